//! Kill -9 at a random moment loses no acknowledged write.
//!
//! The test re-executes its own binary as a child (`crash_child`, selected by an environment
//! variable) that pushes, reserves and acks in a loop on a data directory, and prints each
//! write only after the engine acknowledged it. The parent kills the child with SIGKILL at a
//! random moment, reopens the directory and checks: every acknowledged push is there unless
//! an ack of it was sent; no acknowledged ack comes back; delayed jobs keep their due time.
//! The cycles share the directory, so each reopen also recovers what earlier cycles left,
//! and alternate between `synchronous = NORMAL` and `FULL`.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use delayq_core::{Engine, JobId, JobState, NewJob, Reserve, Topic};
use delayq_sqlite::{SqliteConfig, SqliteEngine, Synchronous};
use rand::Rng;

const CHILD_DIR: &str = "DELAYQ_CRASH_CHILD_DIR";
const CHILD_CYCLE: &str = "DELAYQ_CRASH_CHILD_CYCLE";
const CHILD_SYNC: &str = "DELAYQ_CRASH_CHILD_SYNC";
const CYCLES: usize = 24;
/// Workers in the child, so that commits group several requests.
const WORKERS: usize = 4;

fn topic(name: &str) -> Topic {
    Topic::new(name).expect("valid topic")
}

/// The child's body; a no-op test unless run by `kill_9_loses_no_acknowledged_write`.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let cycle: usize = std::env::var(CHILD_CYCLE)
        .ok()
        .and_then(|c| c.parse().ok())
        .expect("cycle number");
    let sync = match std::env::var(CHILD_SYNC).as_deref() {
        Ok("full") => Synchronous::Full,
        _ => Synchronous::Normal,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let engine = SqliteEngine::open(SqliteConfig::dir(&dir).with_synchronous(sync))
            .unwrap_or_else(|e| fail(&format!("open: {e}")));
        // libtest printed "test crash_child ... " without a newline: end that line first.
        say("");
        say("READY");
        let tasks: Vec<_> = (0..WORKERS)
            .map(|w| tokio::spawn(work(engine.clone(), cycle, w)))
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    });
}

/// One child worker: forever push a due job and a delayed job, then reserve and ack one.
async fn work(engine: SqliteEngine, cycle: usize, w: usize) {
    let (flow, later) = (topic("flow"), topic("later"));
    for i in 0.. {
        let id = format!("c{cycle}-w{w}-{i}");
        // Bodies of a few KiB grow the log past the checkpointer's threshold several times
        // a cycle, so kills also land during checkpoints.
        let job = NewJob::new(flow.clone(), vec![b'x'; 8000]).with_id(JobId::new(&id).expect("id"));
        match engine.push(job).await {
            Ok(p) if p.created => say(&format!("PUSHED {id}")),
            other => fail(&format!("push {id}: {other:?}")),
        }
        let lid = format!("{id}-later");
        let job = NewJob::new(later.clone(), "x")
            .with_id(JobId::new(&lid).expect("id"))
            .with_delay(Duration::from_secs(3600));
        match engine.push(job).await {
            Ok(p) if p.created => say(&format!("LATER {lid} {}", p.ready_at.as_millis())),
            other => fail(&format!("push {lid}: {other:?}")),
        }
        let got = engine
            .reserve(&Reserve::new(flow.clone()).max(2))
            .await
            .unwrap_or_else(|e| fail(&format!("reserve: {e}")));
        for d in got {
            let Some(lease) = d.lease else {
                fail("a delivery without a lease");
            };
            say(&format!("ACKING {}", lease.id));
            match engine.ack(&lease).await {
                Ok(()) => say(&format!("ACKED {}", lease.id)),
                Err(e) => fail(&format!("ack {}: {e}", lease.id)),
            }
        }
    }
}

/// Prints one whole line; stdout is line-buffered, so the line is out before the next
/// engine call.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Reports a failure of the child and ends it.
fn fail(line: &str) -> ! {
    say(&format!("ERROR {line}"));
    std::process::exit(3);
}

/// What the children reported, across cycles.
#[derive(Default)]
struct Seen {
    pushed: HashSet<String>,
    acking: HashSet<String>,
    acked: HashSet<String>,
    later: HashMap<String, u64>,
}

impl Seen {
    fn line(&mut self, line: &str) {
        let mut parts = line.split(' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("PUSHED"), Some(id), None) => {
                self.pushed.insert(id.into());
            }
            (Some("ACKING"), Some(id), None) => {
                self.acking.insert(id.into());
            }
            (Some("ACKED"), Some(id), None) => {
                self.acked.insert(id.into());
            }
            (Some("LATER"), Some(id), Some(at)) => {
                self.later.insert(id.into(), at.parse().expect("due time"));
            }
            (Some(w), _, _) if w.starts_with("ERROR") => panic!("the child failed: {line}"),
            _ => {}
        }
    }
}

/// A child process that is killed when dropped, so that a failing test leaves no child
/// running.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs one child until a random moment, kills it with SIGKILL; returns its whole lines.
fn run_child(dir: &Path, cycle: usize, rng: &mut impl Rng) -> Vec<String> {
    let exe = std::env::current_exe().expect("test binary");
    let child = Command::new(exe)
        .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, dir)
        .env(CHILD_CYCLE, cycle.to_string())
        .env(
            CHILD_SYNC,
            if cycle.is_multiple_of(2) {
                "normal"
            } else {
                "full"
            },
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child");
    let mut child = Reaped(child);
    let stdout = child.0.stdout.take().expect("child stdout");
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut lines = Vec::new();
        loop {
            let mut buf = Vec::new();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                // A line cut by the kill has no newline and is not a report.
                Ok(_) if buf.last() != Some(&b'\n') => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf).trim_end().to_string();
                    if line == "READY" {
                        let _ = tx.send(());
                    }
                    lines.push(line);
                }
            }
        }
        lines
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the child opened the engine");
    std::thread::sleep(Duration::from_millis(rng.random_range(30..400)));
    assert!(
        child.0.try_wait().expect("child status").is_none(),
        "the child exited before the kill"
    );
    child.0.kill().expect("SIGKILL the child");
    child.0.wait().expect("reap the child");
    reader.join().expect("reader thread")
}

/// Reopens the directory through the engine and checks every report against it.
async fn check(dir: &Path, seen: &Seen) {
    let engine = SqliteEngine::open(SqliteConfig::dir(dir)).expect("reopen after kill -9");
    let (flow, later) = (topic("flow"), topic("later"));
    let mut present: HashSet<String> = HashSet::new();
    for state in JobState::ALL {
        let mut cursor = None;
        loop {
            let page = engine
                .list(&flow, state, 1000, cursor.as_ref())
                .await
                .expect("list");
            present.extend(page.jobs.iter().map(|j| j.id.to_string()));
            match page.next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
    }
    for id in &seen.acked {
        assert!(!present.contains(id), "acked job {id} came back");
    }
    for id in &seen.pushed {
        if !seen.acking.contains(id) {
            assert!(present.contains(id), "acknowledged push {id} was lost");
        }
    }
    for (id, at) in &seen.later {
        let j = engine
            .get(&later, &JobId::new(id).expect("id"))
            .await
            .expect("get")
            .unwrap_or_else(|| panic!("acknowledged delayed push {id} was lost"));
        assert_eq!(j.state, JobState::Delayed, "{id}");
        assert_eq!(j.ready_at.as_millis(), *at, "{id} changed its due time");
    }
}

#[test]
fn kill_9_loses_no_acknowledged_write() {
    if std::env::var(CHILD_DIR).is_ok() {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("delayq-crash-")
        .tempdir()
        .expect("temp dir");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut rng = rand::rng();
    let mut seen = Seen::default();
    let start = Instant::now();
    let mut writes = 0;
    for cycle in 0..CYCLES {
        let lines = run_child(dir.path(), cycle, &mut rng);
        writes += lines.len();
        for l in &lines {
            seen.line(l);
        }
        rt.block_on(check(dir.path(), &seen));
    }
    eprintln!(
        "{CYCLES} kill -9 cycles, {writes} acknowledged writes ({} pushes, {} acks, {} delayed) checked in {:?}",
        seen.pushed.len(),
        seen.acked.len(),
        seen.later.len(),
        start.elapsed()
    );
    assert!(
        seen.acked.len() > CYCLES,
        "the children did too little work"
    );
}
