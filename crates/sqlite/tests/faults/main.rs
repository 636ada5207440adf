//! The embedded engine under disk faults, with real file systems the tests mount: a
//! database at its size cap and a full file system (a small tmpfs, so the write-ahead log
//! itself cannot grow) while concurrent producers and workers share the writer's group
//! commits, and a file system the kernel turns read-only under load (ext4 with
//! `errors=remount-ro` on a loop device).
//!
//! Each checks, from the answers the callers got, against what a reopened engine holds:
//! every write answered Ok is there; every write refused before its commit changed nothing
//! (a refused batch is all or nothing) and no refused reserve left a lease behind; a write
//! whose `COMMIT` failed is answered "may or may not be stored" and is there whole or not
//! at all (on the read-only file system some are there: the commit reached the log before
//! the error); no job was delivered twice; the engine keeps reading while it cannot write,
//! then writes again once space is back without being reopened.
//!
//! Needs root (it mounts); budget in CI: about 15 s for the three.

#[path = "../support/mod.rs"]
mod support;

mod load;
mod mount;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use delayq_core::{Engine, JobId, JobState, NewJob, Topic};
use delayq_sqlite::{SqliteConfig, SqliteEngine, Synchronous};

use load::{Figures, Load, Record, check};
use mount::{Ext4, Tmpfs};

const BODY: usize = 2048;

fn topic() -> Topic {
    Topic::new("faults").expect("topic")
}

/// Waits (bounded) until `done` holds, failing with `what` after `limit`.
async fn until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// While the engine refuses writes, it keeps reading: stats, a get, a list.
async fn reads_work(e: &SqliteEngine, t: &Topic) {
    for _ in 0..5 {
        let stats = e.stats(t).await.expect("stats while writes fail");
        let page = e
            .list(t, JobState::Ready, 3, None)
            .await
            .expect("list while writes fail");
        if let Some(j) = page.jobs.first() {
            // The load's workers go on: the job may have been taken and acked meanwhile
            // (writes that free space still succeed at the size cap).
            let got = e.get(t, &j.id).await.expect("get while writes fail");
            assert!(
                got.is_none_or(|g| g.id == j.id),
                "get {} answered another job",
                j.id
            );
        }
        assert!(stats.ready + stats.reserved > 0, "{stats:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn report(name: &str, f: &Figures, took: Duration, r: &Record) {
    eprintln!("{name}: {f:?} in {took:?}; refusals said: {:?}", r.messages);
}

/// The database reaches its size cap (`max_db_bytes`) under load. Deletes and acks need no
/// new page, so they keep working; a push or reserve that needs one is refused whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_size_cap_under_load_refuses_exactly_and_recovers() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let t = topic();
    let cfg = SqliteConfig::dir(dir.path()).with_max_db_bytes(1 << 20);
    let e = SqliteEngine::open(cfg.clone()).expect("open");
    let load = Load::start(&e, &t, 6, 2, BODY);
    until(Duration::from_secs(20), "the cap was reached", || {
        load.refusals() >= 200
    })
    .await;
    reads_work(&e, &t).await;
    let record = load.stop().await;
    assert!(
        record.messages.iter().all(|m| m.contains("full")),
        "{:?}",
        record.messages
    );
    let before = support::dump(dir.path());
    assert!(
        e.push(NewJob::new(t.clone(), vec![1u8; 64 * BODY]))
            .await
            .is_err(),
        "a large push fitted at the cap"
    );
    assert_eq!(support::dump(dir.path()), before, "a refused push wrote");

    // Space comes back by deleting jobs, without reopening.
    let mut deleted = BTreeSet::new();
    let page = e.list(&t, JobState::Ready, 100, None).await.expect("list");
    for j in page.jobs {
        assert!(e.delete(&t, &j.id).await.expect("delete at the cap"));
        deleted.insert(j.id);
    }
    let mut record = record;
    for i in 0..20 {
        let id = JobId::new(format!("after-{i}")).expect("id");
        e.push(NewJob::new(t.clone(), vec![2u8; BODY]).with_id(id.clone()))
            .await
            .expect("a push after deletes freed space");
        record.pushed.push(id);
    }
    drop(e);
    let e = SqliteEngine::open(cfg).expect("reopen");
    let f = check(&e, &t, &record, &deleted, None).await;
    assert!(f.batches_refused > 0, "no batch was refused: {f:?}");
    report("size cap", &f, started.elapsed(), &record);
}

/// The file system holding the data directory fills up under load (a tmpfs of 3 MiB): the
/// log cannot grow, so every write is refused, whole, while reads go on; once the file
/// system grows (`remount,size=`), writes succeed again without reopening.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_file_system_under_load_refuses_exactly_and_recovers() {
    let started = Instant::now();
    let fs = Tmpfs::mount(3 << 20);
    let dir = fs.path().join("data");
    let t = topic();
    let e = SqliteEngine::open(SqliteConfig::dir(&dir)).expect("open");
    let load = Load::start(&e, &t, 6, 2, BODY);
    until(Duration::from_secs(20), "the file system filled up", || {
        load.refusals() >= 200
    })
    .await;
    reads_work(&e, &t).await;
    fs.resize(64 << 20);
    let after = load.accepted();
    until(
        Duration::from_secs(15),
        "pushes succeeded again after the file system grew",
        || load.accepted() >= after + 200,
    )
    .await;
    let record = load.stop().await;
    assert!(
        record.messages.iter().any(|m| m.contains("full")),
        "{:?}",
        record.messages
    );
    drop(e);
    let e = SqliteEngine::open(SqliteConfig::dir(&dir)).expect("reopen");
    let f = check(&e, &t, &record, &BTreeSet::new(), None).await;
    assert!(f.batches_refused > 0, "no batch was refused: {f:?}");
    // A failed commit is unsure only until the engine commits again: the next commit
    // overwrites the log where the failed one was, so none of them can come back.
    assert_eq!(f.unsure_stored + f.unsure_acks_landed, 0, "{f:?}");
    report("full file system", &f, started.elapsed(), &record);
    drop(e);
    drop(fs);
}

/// The kernel turns the data directory's file system read-only under load, as ext4 does
/// after an I/O error (`errors=remount-ro`). Writes are refused with a retryable error
/// that names the cause, reads go on. The kernel does not let such a file system be made
/// writable again without unmounting it (its journal was aborted), so the engine has to be
/// stopped: the file system is then repaired and mounted again (as a reboot would), and
/// the reopened engine holds every acknowledged write (`synchronous = FULL`: with `NORMAL`
/// an aborted file system is like an operating system crash, and the last commits not yet
/// written back may be lost) and writes again.
///
/// Except for the kernel's own window: ext4 aborts its journal, writes its superblock, and
/// only then marks the file system read-only (a few milliseconds, inside the write that
/// triggers the error); a commit whose `fsync` returns in between is confirmed by the
/// kernel and never written. The engine looks at the file system after each commit and
/// answers one that ended on a read-only file system "may or may not be stored", which
/// catches every such commit after the mark; a write answered Ok inside the window may be
/// undone (counted as `lost_in_window`: about 1 run in 20), any other may not. The test
/// knows only that the engine answered between the call and the moment the calling task
/// saw the answer (see `load::Span`): a write counts as answered inside the window when
/// that span meets it; one whose answer was seen before the trigger began, or that was
/// called after the trigger returned, must not be lost. For the same reason a refusal
/// given inside the window may say only "I/O error" (the engine looks for a read-only file
/// system as it answers, and the mark is not set yet); any other must name it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_file_system_under_load_loses_no_acknowledged_write() {
    let started = Instant::now();
    let mut fs = Ext4::mount(64 << 20);
    let dir = fs.path().join("data");
    let t = topic();
    let cfg = SqliteConfig::dir(&dir).with_synchronous(Synchronous::Full);
    let e = SqliteEngine::open(cfg.clone()).expect("open");
    let load = Load::start(&e, &t, 6, 2, BODY);
    until(Duration::from_secs(20), "some pushes were answered", || {
        load.accepted() >= 200
    })
    .await;
    let from = Instant::now();
    fs.fail_read_only();
    let window = (from, Instant::now());
    until(Duration::from_secs(20), "writes were refused", || {
        load.refusals() >= 200
    })
    .await;
    reads_work(&e, &t).await;
    assert!(
        !fs.try_remount_rw(),
        "the kernel made the failed file system writable again: test that the engine writes again without reopening"
    );
    let record = load.stop().await;
    for (span, m) in &record.refusals {
        assert!(
            m.contains("read-only") || (span.may_fall_in(window) && m.contains("I/O error")),
            "a refusal that cannot have been given inside the kernel's window does not name the read-only file system ({span:?}, window {window:?}): {m}"
        );
    }
    drop(e);
    fs.repair_and_remount();
    let e = SqliteEngine::open(cfg).expect("reopen after the repair");
    let f = check(&e, &t, &record, &BTreeSet::new(), Some(window)).await;
    e.push(NewJob::new(t.clone(), "after"))
        .await
        .expect("a push after the repair");
    report("read-only file system", &f, started.elapsed(), &record);
}
