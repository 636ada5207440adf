//! Benchmarks of the embedded engine (not timed tests): push rate, end-to-end rate, lateness,
//! bytes on disk per pending job, and reopen time with a large backlog.
//!
//! `cargo bench -p delayq-sqlite --bench engine [-- <part>...]`, parts: `push`, `e2e`,
//! `lateness`, `disk`, `reopen` (default: all). `DELAYQ_BENCH_SYNC=full` runs with
//! `synchronous = FULL`; `DELAYQ_BENCH_DIR` chooses where the data directories go (default:
//! the system temp dir).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use delayq_core::{Delivery, Engine, Lease, NewJob, Reserve, Topic};
use delayq_sqlite::{DB_FILE, SqliteConfig, SqliteEngine, Synchronous};
use rand::Rng;
use tempfile::TempDir;

fn topic(name: &str) -> Topic {
    Topic::new(name).expect("valid topic")
}

fn sync() -> Synchronous {
    match std::env::var("DELAYQ_BENCH_SYNC").as_deref() {
        Ok("full") => Synchronous::Full,
        _ => Synchronous::Normal,
    }
}

fn scratch() -> TempDir {
    let base: PathBuf = std::env::var_os("DELAYQ_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    tempfile::Builder::new()
        .prefix("delayq-bench-")
        .tempdir_in(base)
        .expect("scratch dir")
}

fn open(dir: &Path) -> SqliteEngine {
    SqliteEngine::open(SqliteConfig::dir(dir).with_synchronous(sync())).expect("open")
}

fn body() -> Vec<u8> {
    vec![b'x'; 100]
}

/// Pushes `total` jobs from `producers` tasks in batches of `batch`; returns jobs/s.
async fn push_rate(
    e: &SqliteEngine,
    t: &Topic,
    total: usize,
    batch: usize,
    producers: usize,
    delay: Duration,
) -> f64 {
    let start = Instant::now();
    let per = total / producers;
    let tasks: Vec<_> = (0..producers)
        .map(|_| {
            let (e, t) = (e.clone(), t.clone());
            tokio::spawn(async move {
                for _ in 0..per / batch {
                    let jobs = (0..batch)
                        .map(|_| NewJob::new(t.clone(), body()).with_delay(delay))
                        .collect();
                    e.push_batch(jobs).await.expect("push");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("producer");
    }
    (per / batch * batch * producers) as f64 / start.elapsed().as_secs_f64()
}

async fn bench_push() {
    println!("## push (100-byte bodies, delay 1 h)");
    for (batch, producers, total) in [
        (1, 1, 20_000),
        (1, 16, 100_000),
        (100, 1, 200_000),
        (100, 4, 400_000),
    ] {
        let dir = scratch();
        let e = open(dir.path());
        let rate = push_rate(
            &e,
            &topic("push"),
            total,
            batch,
            producers,
            Duration::from_secs(3600),
        )
        .await;
        println!(
            "push batch {batch:>3}, {producers:>2} producers: {rate:>10.0} jobs/s ({total} jobs)"
        );
    }
}

/// A consumer: reserves up to `max`, acks them (one ack_batch, or one ack each), until
/// `done` reaches `total`. Records each delivery's lateness when `lateness` is given.
async fn consume(
    e: SqliteEngine,
    t: Topic,
    max: usize,
    batch_ack: bool,
    done: Arc<AtomicUsize>,
    total: usize,
) -> Vec<Duration> {
    let mut late = Vec::new();
    while done.load(Ordering::Relaxed) < total {
        let got: Vec<Delivery> = e
            .reserve(
                &Reserve::new(t.clone())
                    .max(max)
                    .wait(Duration::from_millis(200)),
            )
            .await
            .expect("reserve");
        late.extend(got.iter().map(|d| d.lateness));
        let leases: Vec<Lease> = got.iter().filter_map(|d| d.lease.clone()).collect();
        if leases.is_empty() {
            continue;
        }
        if batch_ack {
            for r in e.ack_batch(&leases).await.expect("ack_batch") {
                r.expect("ack");
            }
        } else {
            for l in &leases {
                e.ack(l).await.expect("ack");
            }
        }
        done.fetch_add(leases.len(), Ordering::Relaxed);
    }
    late
}

async fn bench_e2e() {
    println!("## end to end (push batches of 100 while consumers reserve and ack)");
    for (consumers, max, batch_ack) in [(1, 10, true), (8, 10, true), (8, 1, false)] {
        let total = 200_000;
        let dir = scratch();
        let e = open(dir.path());
        let t = topic("e2e");
        let done = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let workers: Vec<_> = (0..consumers)
            .map(|_| {
                tokio::spawn(consume(
                    e.clone(),
                    t.clone(),
                    max,
                    batch_ack,
                    done.clone(),
                    total,
                ))
            })
            .collect();
        push_rate(&e, &t, total, 100, 2, Duration::ZERO).await;
        for w in workers {
            w.await.expect("consumer");
        }
        let rate = total as f64 / start.elapsed().as_secs_f64();
        let how = if batch_ack {
            "ack_batch"
        } else {
            "one ack per job"
        };
        println!(
            "e2e {consumers} consumer(s), reserve max {max:>2}, {how:<15}: {rate:>8.0} jobs/s ({total} jobs)"
        );
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn bench_lateness() {
    println!("## lateness (delays spread uniformly over 5 s, 8 waiting consumers)");
    let total = 20_000;
    let dir = scratch();
    let e = open(dir.path());
    let t = topic("late");
    let done = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..8)
        .map(|_| tokio::spawn(consume(e.clone(), t.clone(), 10, true, done.clone(), total)))
        .collect();
    let mut rng = rand::rng();
    for _ in 0..total / 100 {
        let jobs = (0..100)
            .map(|_| {
                NewJob::new(t.clone(), body())
                    .with_delay(Duration::from_millis(rng.random_range(0..5000)))
            })
            .collect();
        e.push_batch(jobs).await.expect("push");
    }
    let mut late: Vec<Duration> = Vec::new();
    for w in workers {
        late.extend(w.await.expect("consumer"));
    }
    late.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "lateness of {} jobs: p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
        late.len(),
        ms(percentile(&late, 0.50)),
        ms(percentile(&late, 0.99)),
        ms(percentile(&late, 0.999)),
        ms(late[late.len() - 1]),
    );
}

fn disk_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(DB_FILE))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

async fn fill(dir: &Path, n: usize) -> f64 {
    let e = open(dir);
    let rate = push_rate(&e, &topic("pending"), n, 1000, 2, Duration::from_secs(3600)).await;
    drop(e);
    rate
}

async fn bench_disk() {
    println!("## bytes on disk per pending job (100-byte bodies, generated UUIDv7 ids)");
    for n in [100_000usize] {
        let dir = scratch();
        fill(dir.path(), n).await;
        let bytes = disk_bytes(dir.path());
        println!(
            "{n} pending jobs: {bytes} bytes on disk after close, {:.0} bytes per job",
            bytes as f64 / n as f64
        );
    }
}

/// Set in the child that `bench_reopen` kills: the directory to fill.
const FILL_ENV: &str = "DELAYQ_BENCH_FILL_DIR";

/// The child of the kill -9 reopen: fills the directory, says so, and waits to be killed.
async fn fill_then_wait(dir: &Path, n: usize) {
    let e = open(dir);
    push_rate(&e, &topic("pending"), n, 1000, 2, Duration::from_secs(3600)).await;
    println!("FILLED");
    std::future::pending::<()>().await;
}

/// Fills `dir` with `n` jobs in a child process and kills it with SIGKILL: the engine is
/// never closed, so the log is left for the next open to recover.
fn fill_and_kill(dir: &Path, n: usize) {
    use std::io::BufRead;
    let exe = std::env::current_exe().expect("bench binary");
    let mut child = std::process::Command::new(exe)
        .env(FILL_ENV, dir)
        .env("DELAYQ_BENCH_FILL_N", n.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the filler");
    let out = child.stdout.take().expect("stdout");
    for line in std::io::BufReader::new(out).lines() {
        if line.expect("read") == "FILLED" {
            break;
        }
    }
    child.kill().expect("SIGKILL the filler");
    child.wait().expect("reap the filler");
}

async fn reopen_rounds(dir: &Path, n: usize, label: &str) {
    for round in 1..=3 {
        let start = Instant::now();
        let e = open(dir);
        let opened = start.elapsed();
        let s = e.stats(&topic("pending")).await.expect("stats");
        let first = e
            .reserve(&Reserve::new(topic("pending")))
            .await
            .expect("reserve");
        let usable = start.elapsed();
        assert_eq!(s.delayed, n as u64);
        assert!(first.is_empty());
        println!(
            "reopen {round} {label}: open {:.1} ms, open + stats + first reserve {:.1} ms",
            opened.as_secs_f64() * 1000.0,
            usable.as_secs_f64() * 1000.0
        );
        drop(e);
    }
}

async fn bench_reopen() {
    println!("## reopen with 1,000,000 pending jobs");
    let n = 1_000_000;
    let dir = scratch();
    let rate = fill(dir.path(), n).await;
    println!(
        "filled {n} delayed jobs at {rate:.0} jobs/s (batches of 1000); {} bytes on disk ({:.0} per job)",
        disk_bytes(dir.path()),
        disk_bytes(dir.path()) as f64 / n as f64
    );
    reopen_rounds(dir.path(), n, "after a clean close").await;

    let dir = scratch();
    let start = Instant::now();
    fill_and_kill(dir.path(), n);
    println!(
        "filled {n} delayed jobs in a child in {:.1} s, then kill -9; log left: {} bytes",
        start.elapsed().as_secs_f64(),
        std::fs::metadata(dir.path().join(format!("{DB_FILE}-wal")))
            .map(|m| m.len())
            .unwrap_or(0)
    );
    reopen_rounds(dir.path(), n, "after kill -9 (first one replays the log)").await;
}

fn main() {
    if let Some(dir) = std::env::var_os(FILL_ENV) {
        let n = std::env::var("DELAYQ_BENCH_FILL_N")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(1_000_000);
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(fill_then_wait(Path::new(&dir), n));
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |part: &str| args.is_empty() || args.iter().any(|a| a == part);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!("synchronous = {:?}", sync());
    rt.block_on(async {
        if wants("push") {
            bench_push().await;
        }
        if wants("e2e") {
            bench_e2e().await;
        }
        if wants("lateness") {
            bench_lateness().await;
        }
        if wants("disk") {
            bench_disk().await;
        }
        if wants("reopen") {
            bench_reopen().await;
        }
    });
}
