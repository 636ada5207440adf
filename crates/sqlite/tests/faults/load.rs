//! A load of concurrent producers and workers on one engine that records every answer, and
//! the check of those records against what a reopened engine holds.
//!
//! Producers push jobs with ids never used before, one at a time or in batches of four (a
//! batch is one request: all or nothing); workers reserve up to eight and ack each, and
//! keep a lease whose ack was refused to ack it again, as a real worker does. Every refused
//! call must be retryable; its message is kept for the test to judge.
//!
//! A refusal is definite (the write was not committed: it changed nothing) or unsure (the
//! `COMMIT` itself failed, so the commit may have reached the log, and a reopen may find
//! it: the engine says so). An unsure write must still be whole or absent: a batch all
//! there or none of it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use delayq_core::{Engine, Error, JobId, JobState, Lease, NewJob, Reserve, Topic};
use delayq_sqlite::SqliteEngine;
use tokio::task::JoinHandle;

/// Every lease is long enough to outlive a test: a second delivery would be a bug.
const TTR: Duration = Duration::from_secs(300);

/// What one task saw.
#[derive(Default)]
pub struct Record {
    /// Pushes answered Ok (one id per job of a batch).
    pub pushed: Vec<JobId>,
    /// Pushes refused for sure (one id per job of a batch).
    pub refused: Vec<JobId>,
    /// Pushes (single or batch) answered "may or may not be stored".
    pub unsure: Vec<Vec<JobId>>,
    /// Reserves answered "may or may not be stored": each may have leased up to eight jobs
    /// nobody holds (they are retried after their ttr).
    pub unsure_reserves: usize,
    /// Leases whose last ack was answered "may or may not be stored".
    pub unsure_acks: BTreeSet<JobId>,
    /// Batches refused as a whole.
    pub batches_refused: usize,
    /// Deliveries: each lease a reserve answered.
    pub delivered: Vec<Lease>,
    /// Leases whose ack was answered Ok.
    pub acked: Vec<Lease>,
    /// When each push, delivery and ack (by job id) that was answered Ok was called and
    /// when its answer was seen.
    pub pushed_at: BTreeMap<JobId, Span>,
    pub delivered_at: BTreeMap<JobId, Span>,
    pub acked_at: BTreeMap<JobId, Span>,
    /// Refused calls by kind ("push", "ack", "reserve").
    pub failures: BTreeMap<&'static str, usize>,
    /// The messages of refused calls.
    pub messages: BTreeSet<String>,
    /// Every refused call: when it was called and answered, and what it said.
    pub refusals: Vec<(Span, String)>,
}

/// When a call was made and when the task that made it saw the answer. The engine answered
/// somewhere in between, not when the answer was seen: the writer wakes the caller's task,
/// and a busy runtime may poll it milliseconds later (the requests of one group commit,
/// answered together by the writer, were seen up to 4 ms apart, on one CPU).
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub called: Instant,
    pub seen: Instant,
}

impl Span {
    /// From `called` to now.
    fn since(called: Instant) -> Span {
        Span {
            called,
            seen: Instant::now(),
        }
    }

    /// Whether the answer may have been given between `from` and `to`: the call was made
    /// by `to` and its answer seen from `from` on. An answer seen before `from` was given
    /// before it, and one to a call made after `to` was given after it.
    pub fn may_fall_in(&self, (from, to): (Instant, Instant)) -> bool {
        self.called <= to && self.seen >= from
    }
}

impl Record {
    fn refuse(&mut self, kind: &'static str, e: &Error, span: Span) {
        assert!(
            e.is_retryable(),
            "a {kind} failed with a final error: {e:?}"
        );
        *self.failures.entry(kind).or_default() += 1;
        self.messages.insert(e.to_string());
        self.refusals.push((span, e.to_string()));
    }

    fn merge(&mut self, o: Record) {
        self.pushed.extend(o.pushed);
        self.refused.extend(o.refused);
        self.unsure.extend(o.unsure);
        self.unsure_reserves += o.unsure_reserves;
        self.unsure_acks.extend(o.unsure_acks);
        self.batches_refused += o.batches_refused;
        self.delivered.extend(o.delivered);
        self.acked.extend(o.acked);
        self.pushed_at.extend(o.pushed_at);
        self.delivered_at.extend(o.delivered_at);
        self.acked_at.extend(o.acked_at);
        for (k, n) in o.failures {
            *self.failures.entry(k).or_default() += n;
        }
        self.messages.extend(o.messages);
        self.refusals.extend(o.refusals);
    }
}

/// Whether a refusal says the write may have been stored after all.
pub fn is_unsure(e: &Error) -> bool {
    e.to_string().contains("may or may not be stored")
}

/// A running load; [`Load::stop`] ends it and gathers the records.
pub struct Load {
    stop: Arc<AtomicBool>,
    refusals: Arc<AtomicUsize>,
    accepted: Arc<AtomicUsize>,
    tasks: Vec<JoinHandle<Record>>,
}

impl Load {
    /// Starts `pushers` producers of `body` bytes a job and `workers` workers on `topic`.
    pub fn start(
        engine: &SqliteEngine,
        topic: &Topic,
        pushers: usize,
        workers: usize,
        body: usize,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let refusals = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for p in 0..pushers {
            let (e, t) = (engine.clone(), topic.clone());
            let (stop, refusals, accepted) = (stop.clone(), refusals.clone(), accepted.clone());
            tasks.push(tokio::spawn(async move {
                let mut r = Record::default();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let size = if n.is_multiple_of(3) { 4 } else { 1 };
                    let jobs: Vec<NewJob> = (0..size)
                        .map(|k| {
                            let id = JobId::new(format!("p{p}-{n}-{k}")).expect("id");
                            NewJob::new(t.clone(), vec![n as u8; body])
                                .with_id(id)
                                .with_ttr(TTR)
                        })
                        .collect();
                    let ids: Vec<JobId> = jobs.iter().map(|j| j.id.clone()).collect();
                    let called = Instant::now();
                    let out = if size == 1 {
                        let job = jobs.into_iter().next().expect("one job");
                        e.push(job).await.map(|p| vec![p])
                    } else {
                        e.push_batch(jobs).await
                    };
                    let span = Span::since(called);
                    match out {
                        Ok(answers) => {
                            assert!(answers.iter().all(|a| a.created), "{answers:?}");
                            r.pushed_at.extend(ids.iter().map(|id| (id.clone(), span)));
                            r.pushed.extend(ids);
                            accepted.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(err) => {
                            r.refuse("push", &err, span);
                            if is_unsure(&err) {
                                r.unsure.push(ids);
                            } else {
                                r.refused.extend(ids);
                            }
                            r.batches_refused += usize::from(size > 1);
                            refusals.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                }
                r
            }));
        }
        for _ in 0..workers {
            let (e, t) = (engine.clone(), topic.clone());
            let (stop, refusals) = (stop.clone(), refusals.clone());
            tasks.push(tokio::spawn(async move {
                let mut r = Record::default();
                let mut held: Vec<Lease> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let mut kept = Vec::new();
                    for lease in held.drain(..) {
                        let called = Instant::now();
                        let out = e.ack(&lease).await;
                        let span = Span::since(called);
                        match out {
                            Ok(()) => {
                                r.unsure_acks.remove(&lease.id);
                                r.acked_at.insert(lease.id.clone(), span);
                                r.acked.push(lease);
                            }
                            Err(err) => {
                                r.refuse("ack", &err, span);
                                // A sure refusal of a retry says nothing of an earlier
                                // unsure try, which may have landed: the lease stays unsure
                                // until an ack answers Ok.
                                if is_unsure(&err) {
                                    r.unsure_acks.insert(lease.id.clone());
                                }
                                refusals.fetch_add(1, Ordering::Relaxed);
                                kept.push(lease);
                            }
                        }
                    }
                    held = kept;
                    let req = Reserve::new(t.clone())
                        .max(8)
                        .wait(Duration::from_millis(50));
                    let called = Instant::now();
                    let out = e.reserve(&req).await;
                    let span = Span::since(called);
                    match out {
                        Ok(got) => {
                            for d in got {
                                let lease = d.lease.expect("at-least-once lease");
                                r.delivered_at.insert(lease.id.clone(), span);
                                r.delivered.push(lease.clone());
                                held.push(lease);
                            }
                        }
                        Err(err) => {
                            r.refuse("reserve", &err, span);
                            r.unsure_reserves += usize::from(is_unsure(&err));
                            refusals.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                }
                r
            }));
        }
        Load {
            stop,
            refusals,
            accepted,
            tasks,
        }
    }

    /// Refused calls so far.
    pub fn refusals(&self) -> usize {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Pushes (single or batch) answered Ok so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Stops every task and merges what they saw.
    pub async fn stop(self) -> Record {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Record::default();
        for t in self.tasks {
            all.merge(t.await.expect("a load task panicked"));
        }
        all
    }
}

/// What the check found, for the report.
#[derive(Debug)]
#[expect(dead_code, reason = "read through Debug, in the test's report")]
pub struct Figures {
    pub pushed: usize,
    pub refused: usize,
    pub batches_refused: usize,
    pub unsure_pushes: usize,
    /// Unsure pushes a reopen found stored (whole).
    pub unsure_stored: usize,
    pub delivered: usize,
    pub acked: usize,
    /// Unsure acks a reopen found applied.
    pub unsure_acks_landed: usize,
    /// Pushes, reserves and acks whose Ok answer may have been given inside the kernel's
    /// error handling that a reopen found undone (see [`check`]'s `window`).
    pub lost_in_window: usize,
    pub held: usize,
    /// Jobs a reopen found leased by an unsure reserve nobody got the answer of.
    pub orphan_leases: usize,
    pub deleted: usize,
    pub failures: BTreeMap<&'static str, usize>,
}

/// Checks a reopened engine against the records: every push answered Ok is there (unless
/// acked or in `deleted`), in the state its answers say; no push refused for sure is
/// there or was ever delivered, and an unsure one is there whole or not at all; every ack
/// answered Ok removed its job; every lease still held is live with its token (or, its ack
/// unsure, gone); no job was delivered twice; a job reserved by a lease nobody got comes
/// only from an unsure reserve.
///
/// `window`: while the kernel handles a file-system error (from just before the test
/// triggers it to when the trigger returns), ext4 has aborted its journal but not yet
/// marked the file system read-only, and a commit whose `fsync` returns then is confirmed
/// and dropped: the engine cannot see it (it catches those after the mark). A write whose
/// Ok answer may have been given inside the window may be undone, and is counted; any
/// other may not. The answer was given between the call and when its task saw it
/// ([`Span`]), so that whole span is set against the window, not the moment the answer
/// was seen: that can be after the window ended although the engine answered inside it.
/// A write whose answer was seen before the window began, or that was called after the
/// window ended, must still be there.
pub async fn check(
    e: &SqliteEngine,
    t: &Topic,
    r: &Record,
    deleted: &BTreeSet<JobId>,
    window: Option<(Instant, Instant)>,
) -> Figures {
    let inside =
        |at: Option<&Span>| window.is_some_and(|w| at.is_some_and(|span| span.may_fall_in(w)));
    let mut lost_in_window = 0;
    let delivered: BTreeMap<&JobId, &Lease> = r.delivered.iter().map(|l| (&l.id, l)).collect();
    assert_eq!(
        delivered.len(),
        r.delivered.len(),
        "a job was delivered twice although no lease expired"
    );
    let acked: BTreeSet<&JobId> = r.acked.iter().map(|l| &l.id).collect();
    let pushed: BTreeSet<&JobId> = r.pushed.iter().collect();
    let mut present: BTreeSet<JobId> = BTreeSet::new();
    for id in &r.refused {
        assert!(!pushed.contains(id), "{id} was both refused and stored");
        assert!(
            e.get(t, id).await.expect("get").is_none(),
            "{id}: its push was refused (not committed), yet it is stored"
        );
        assert!(!delivered.contains_key(id), "{id}: refused, yet delivered");
    }
    let mut unsure_stored = 0;
    for ids in &r.unsure {
        let mut found = Vec::new();
        for id in ids {
            assert!(!delivered.contains_key(id), "{id}: refused, yet delivered");
            if let Some(job) = e.get(t, id).await.expect("get") {
                found.push(job);
            }
        }
        assert!(
            found.is_empty() || found.len() == ids.len(),
            "an unsure push of {ids:?} is stored in part: {found:?}"
        );
        unsure_stored += usize::from(!found.is_empty());
        present.extend(found.into_iter().map(|j| j.id));
    }
    let (mut held, mut landed) = (0, 0);
    for id in &r.pushed {
        let job = e.get(t, id).await.expect("get");
        if job.is_none() && inside(r.pushed_at.get(id)) {
            lost_in_window += 1;
            continue;
        }
        if let Some(back) = &job
            && acked.contains(id)
            && inside(r.acked_at.get(id))
        {
            lost_in_window += 1;
            present.insert(id.clone());
            held += usize::from(back.state == JobState::Reserved);
            continue;
        }
        if acked.contains(id) || deleted.contains(id) {
            assert!(job.is_none(), "{id} was acked or deleted, yet it is back");
            continue;
        }
        if job.is_none() && r.unsure_acks.contains(id) {
            landed += 1;
            continue;
        }
        let job = job.unwrap_or_else(|| panic!("{id}: its push was answered Ok, but it is lost"));
        present.insert(id.clone());
        match delivered.get(id) {
            Some(_) if job.state == JobState::Ready && inside(r.delivered_at.get(id)) => {
                lost_in_window += 1;
            }
            Some(lease) => {
                assert_eq!(job.state, JobState::Reserved, "{id}");
                assert_eq!(job.attempts, 1, "{id}");
                e.touch(lease, None)
                    .await
                    .unwrap_or_else(|err| panic!("{id}: its lease was lost: {err}"));
                held += 1;
            }
            None => assert!(
                job.state == JobState::Ready
                    || (job.state == JobState::Reserved && r.unsure_reserves > 0),
                "{id} was never delivered, yet it is {:?}",
                job.state
            ),
        }
    }
    let stats = e.stats(t).await.expect("stats");
    assert_eq!(
        (stats.ready + stats.reserved) as usize,
        present.len(),
        "the topic holds jobs nobody pushed: {stats:?}"
    );
    let orphans = stats.reserved as usize - held;
    assert!(
        orphans <= 8 * r.unsure_reserves,
        "{orphans} jobs are reserved by leases no reserve answered, after {} unsure reserves",
        r.unsure_reserves
    );
    Figures {
        pushed: r.pushed.len(),
        refused: r.refused.len(),
        batches_refused: r.batches_refused,
        unsure_pushes: r.unsure.len(),
        unsure_stored,
        delivered: r.delivered.len(),
        acked: acked.len(),
        unsure_acks_landed: landed,
        lost_in_window,
        held,
        orphan_leases: orphans,
        deleted: deleted.len(),
        failures: r.failures.clone(),
    }
}
