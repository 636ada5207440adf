//! The kill -9 crash test of the durable engines (`tests/crash.rs` of `delayq-sqlite` and
//! `delayq-postgres`), whatever the engine: the child's workload, the parent's cycles of
//! killing it, and the check against the engine opened again.
//!
//! The test binary re-executes itself as a child (its child test calls [`run_child`] when
//! [`child_cycle`] says it is one) whose workers push, reserve and ack in a loop, and print
//! each write only after the engine acknowledged it. The parent ([`Crashes::cycle`]) kills
//! the child with SIGKILL at a random moment under load, opens the engine again and
//! [`check`]s every report against it: every acknowledged push is there unless an ack of it
//! was sent; no acknowledged ack comes back; delayed jobs keep their due time. The reports
//! add up across cycles, so each check also covers what earlier cycles left.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::ops::Range;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use delayq_core::{Engine, JobId, JobState, NewJob, Reserve, Topic};
use futures_util::{StreamExt, stream};
use rand::Rng;
use rand::rngs::ThreadRng;

/// The environment variable that makes the test binary a crash child, holding its cycle
/// number (which makes its job ids unique across cycles).
pub const CHILD_CYCLE_ENV: &str = "DELAYQ_CRASH_CHILD_CYCLE";

/// Workers in the child, so that commits group several requests.
const WORKERS: usize = 4;
/// The topic of due jobs, reserved and acked by the workers.
const FLOW: &str = "flow";
/// The topic of jobs delayed by an hour, never reserved.
const LATER: &str = "later";
/// How long the parent lets the child run under load before the kill, in milliseconds.
const KILL_AFTER_MS: Range<u64> = 30..400;
/// How long the child may take to open the engine.
const READY_WITHIN: Duration = Duration::from_secs(20);
/// How long one check may take.
const CHECK_WITHIN: Duration = Duration::from_secs(60);
/// Reads by id the check keeps in flight.
const READS_AT_ONCE: usize = 16;

fn topic(name: &str) -> Topic {
    Topic::new(name).expect("valid topic")
}

/// The cycle this process runs as a crash child ([`CHILD_CYCLE_ENV`]); `None` in the parent,
/// where the child test is a no-op.
pub fn child_cycle() -> Option<usize> {
    let v = std::env::var(CHILD_CYCLE_ENV).ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{CHILD_CYCLE_ENV}={v:?} is not a cycle number")),
    )
}

/// The child's body: opens the engine with `open` on a runtime of its own, says `READY`,
/// then runs the workers ([`work`]) until the parent kills it. A failure to open, or of an
/// engine call, is reported with [`fail`].
pub fn run_child<E, F>(cycle: usize, open: F)
where
    E: Engine + Clone,
    F: Future<Output = delayq_core::Result<E>>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let engine = open.await.unwrap_or_else(|e| fail(&format!("open: {e}")));
        // libtest printed "test crash_child ... " without a newline: end that line first.
        say("");
        say("READY");
        let tasks: Vec<_> = (0..WORKERS)
            .map(|w| tokio::spawn(work(engine.clone(), cycle, w)))
            .collect();
        for t in tasks {
            if let Err(e) = t.await {
                fail(&format!("a worker stopped: {e}"));
            }
        }
    });
}

/// One child worker: forever push a due job and a delayed job, then reserve and ack up to
/// two; each write is printed ([`say`]) once acknowledged, and each ack also before it is
/// sent (`ACKING`). Ids are `c<cycle>-w<worker>-<n>`.
pub async fn work<E: Engine + Clone>(engine: E, cycle: usize, w: usize) {
    let (flow, later) = (topic(FLOW), topic(LATER));
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

/// Prints one whole line of the child's report and flushes it, so the line is out before
/// the next engine call.
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Reports a failure of the child (`ERROR ...`, which fails the parent) and ends it.
pub fn fail(line: &str) -> ! {
    say(&format!("ERROR {line}"));
    std::process::exit(3);
}

/// What the children reported, across cycles.
#[derive(Debug, Default)]
pub struct Seen {
    /// Due jobs whose push was acknowledged (`PUSHED`).
    pub pushed: HashSet<String>,
    /// Jobs an ack of which was sent (`ACKING`): they may be there or not.
    pub acking: HashSet<String>,
    /// Jobs whose ack was acknowledged (`ACKED`).
    pub acked: HashSet<String>,
    /// Delayed jobs whose push was acknowledged (`LATER`), with the due time it answered,
    /// in milliseconds.
    pub later: HashMap<String, u64>,
}

impl Seen {
    /// Takes in one line of a child's output; true when it reports an acknowledged write.
    /// Panics on an `ERROR` line.
    pub fn line(&mut self, line: &str) -> bool {
        let mut parts = line.split(' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("PUSHED"), Some(id), None) => self.pushed.insert(id.into()),
            (Some("ACKING"), Some(id), None) => {
                self.acking.insert(id.into());
                false
            }
            (Some("ACKED"), Some(id), None) => self.acked.insert(id.into()),
            (Some("LATER"), Some(id), Some(at)) => self
                .later
                .insert(id.into(), at.parse().expect("due time"))
                .is_none(),
            (Some(w), _, _) if w.starts_with("ERROR") => panic!("the child failed: {line}"),
            _ => false,
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

/// The parent's side: runs the cycles of children and keeps what they reported.
pub struct Crashes {
    child_test: &'static str,
    rng: ThreadRng,
    seen: Seen,
    writes: usize,
    cycles: usize,
    start: Instant,
}

impl Crashes {
    /// No cycle yet; `child_test` is the name of the test that calls [`run_child`].
    pub fn new(child_test: &'static str) -> Self {
        Crashes {
            child_test,
            rng: rand::rng(),
            seen: Seen::default(),
            writes: 0,
            cycles: 0,
            start: Instant::now(),
        }
    }

    /// Runs a child for `cycle` with `env` (what its engine needs) besides
    /// [`CHILD_CYCLE_ENV`]; once it is ready, lets it work for a random moment, kills it with
    /// SIGKILL, then calls `with_it` (what else dies at that moment) and takes in its
    /// reports. Panics when the child fails, does not get ready within 20 s, or exits
    /// before the kill.
    pub fn cycle<K, V>(
        &mut self,
        cycle: usize,
        env: impl IntoIterator<Item = (K, V)>,
        with_it: impl FnOnce(),
    ) where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let exe = std::env::current_exe().expect("test binary");
        let child = Command::new(exe)
            .args([
                self.child_test,
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_CYCLE_ENV, cycle.to_string())
            .envs(env)
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
        if let Err(e) = rx.recv_timeout(READY_WITHIN) {
            drop(child);
            let lines = reader.join().expect("reader thread");
            for l in &lines {
                self.seen.line(l);
            }
            panic!("the child of cycle {cycle} did not open the engine ({e}); it said {lines:?}");
        }
        std::thread::sleep(Duration::from_millis(self.rng.random_range(KILL_AFTER_MS)));
        assert!(
            child.0.try_wait().expect("child status").is_none(),
            "the child of cycle {cycle} exited before the kill"
        );
        child.0.kill().expect("SIGKILL the child");
        child.0.wait().expect("reap the child");
        with_it();
        for l in reader.join().expect("reader thread") {
            if self.seen.line(&l) {
                self.writes += 1;
            }
        }
        self.cycles += 1;
    }

    /// What the children reported so far.
    pub fn seen(&self) -> &Seen {
        &self.seen
    }

    /// One line with the cycles run, the acknowledged writes checked and the time taken.
    pub fn report(&self) -> String {
        format!(
            "{} kill -9 cycles, {} acknowledged writes ({} pushes, {} acks, {} delayed) checked in {:?}",
            self.cycles,
            self.writes,
            self.seen.pushed.len(),
            self.seen.acked.len(),
            self.seen.later.len(),
            self.start.elapsed()
        )
    }

    /// Panics unless the children acked more jobs than there were cycles: a test whose
    /// children did almost nothing checked nothing.
    pub fn assert_enough_work(&self) {
        assert!(
            self.seen.acked.len() > self.cycles,
            "the children did too little work: {}",
            self.report()
        );
    }
}

/// Checks every report in `seen` against `engine`, opened again after the kill: no acked
/// job is listed in any state; every pushed job without an ack sent, and every delayed
/// job, is there (read by id, as a listing could miss a job the engine's own timers move
/// between states meanwhile); delayed jobs are still delayed and due when their push said.
/// Panics on the first difference, or after 60 s.
pub async fn check<E: Engine>(engine: &E, seen: &Seen) {
    tokio::time::timeout(CHECK_WITHIN, check_all(engine, seen))
        .await
        .unwrap_or_else(|_| panic!("the check did not end within {CHECK_WITHIN:?}"));
}

async fn check_all<E: Engine>(engine: &E, seen: &Seen) {
    let (flow, later) = (&topic(FLOW), &topic(LATER));
    let mut present: HashSet<String> = HashSet::new();
    for state in JobState::ALL {
        let mut cursor = None;
        loop {
            let page = engine
                .list(flow, state, 1000, cursor.as_ref())
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
    stream::iter(seen.pushed.difference(&seen.acking))
        .map(|id| async move { (id, engine.get(flow, &JobId::new(id).expect("id")).await) })
        .buffer_unordered(READS_AT_ONCE)
        .for_each(|(id, got)| {
            let got = got.unwrap_or_else(|e| panic!("get {id}: {e}"));
            assert!(got.is_some(), "acknowledged push {id} was lost");
            std::future::ready(())
        })
        .await;
    stream::iter(&seen.later)
        .map(|(id, at)| async move {
            let got = engine.get(later, &JobId::new(id).expect("id")).await;
            (id, *at, got)
        })
        .buffer_unordered(READS_AT_ONCE)
        .for_each(|(id, at, got)| {
            let j = got
                .unwrap_or_else(|e| panic!("get {id}: {e}"))
                .unwrap_or_else(|| panic!("acknowledged delayed push {id} was lost"));
            assert_eq!(j.state, JobState::Delayed, "{id}");
            assert_eq!(j.ready_at.as_millis(), at, "{id} changed its due time");
            std::future::ready(())
        })
        .await;
}
