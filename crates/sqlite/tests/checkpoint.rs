//! The checkpointer copies the write-ahead log into the database file while the engine runs
//! (the writer never does it on its own for small logs), and closing leaves no log behind.

use std::path::Path;
use std::time::{Duration, Instant};

use delayq_core::{Engine, NewJob, Topic};
use delayq_sqlite::{DB_FILE, SqliteConfig, SqliteEngine};

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_is_checkpointed_while_the_engine_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join(DB_FILE);
    let wal = dir.path().join(format!("{DB_FILE}-wal"));
    let e = SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("open");
    let t = Topic::new("ckpt").expect("topic");
    let start_size = size(&db);
    // About 3 MiB of bodies: past the checkpointer's 1 MiB threshold, far under the 64 MiB
    // at which the writer would complete a checkpoint itself.
    for _ in 0..40 {
        let jobs = (0..10)
            .map(|_| {
                NewJob::new(t.clone(), vec![1u8; 8 * 1024]).with_delay(Duration::from_secs(60))
            })
            .collect();
        e.push_batch(jobs).await.expect("push");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while size(&db) < start_size + (1 << 20) {
        assert!(
            Instant::now() < deadline,
            "the database file did not grow: the log was not checkpointed (db {} bytes, log {} bytes)",
            size(&db),
            size(&wal)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(e);
    assert!(!wal.exists(), "closing left the log behind");
}
