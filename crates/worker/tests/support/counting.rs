//! [`Counting`]: an engine wrapper that counts the deliveries its worker holds (reserved and
//! not yet acked, nacked, buried or released) and can print every successful ack. It
//! forwards `settle_and_reserve` to the engine's own, so the engine's one-round-trip path is
//! the one tested.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use delayq_core::{
    Bury, Cursor, Delivery, Engine, Job, JobId, JobState, Lease, Nack, NackOutcome, NewJob, Page,
    Pushed, Release, Reserve, Result, Schedule, Settle, SettledAndReserved, Timestamp, Topic,
    TopicConfig, TopicStats,
};

/// The prefix of the line a child process prints after each successful ack.
pub const ACKED: &str = "DELAYQ-ACKED ";

#[derive(Default)]
pub struct Counts {
    held: AtomicI64,
    max_held: AtomicI64,
    max_asked: AtomicUsize,
    print_acks: bool,
}

impl Counts {
    /// The most deliveries held at once.
    pub fn max_held(&self) -> i64 {
        self.max_held.load(Ordering::SeqCst)
    }

    /// The largest `max` a reserve asked for.
    pub fn max_asked(&self) -> usize {
        self.max_asked.load(Ordering::SeqCst)
    }

    /// Deliveries held now.
    pub fn held(&self) -> i64 {
        self.held.load(Ordering::SeqCst)
    }

    /// Counts the leased deliveries of a reserve.
    fn reserved(&self, got: &[Delivery]) {
        let leased = got.iter().filter(|d| d.lease.is_some()).count();
        let n = i64::try_from(leased).unwrap();
        let now = self.held.fetch_add(n, Ordering::SeqCst) + n;
        self.max_held.fetch_max(now, Ordering::SeqCst);
    }

    /// Counts a call that ends a delivery, unless it failed in a way the worker retries.
    fn finished<T>(&self, r: &Result<T>) {
        if !matches!(r, Err(e) if e.is_retryable()) {
            self.held.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[derive(Clone)]
pub struct Counting<E> {
    inner: E,
    counts: Arc<Counts>,
}

impl<E> Counting<E> {
    pub fn new(inner: E) -> Self {
        Counting {
            inner,
            counts: Arc::default(),
        }
    }

    /// Prints `DELAYQ-ACKED <id>` after every successful ack.
    pub fn printing_acks(inner: E) -> Self {
        Counting {
            inner,
            counts: Arc::new(Counts {
                print_acks: true,
                ..Counts::default()
            }),
        }
    }

    pub fn counts(&self) -> Arc<Counts> {
        Arc::clone(&self.counts)
    }
}

#[async_trait]
impl<E: Engine> Engine for Counting<E> {
    async fn push(&self, job: NewJob) -> Result<Pushed> {
        self.inner.push(job).await
    }

    async fn push_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<Pushed>> {
        self.inner.push_batch(jobs).await
    }

    async fn get(&self, topic: &Topic, id: &JobId) -> Result<Option<Job>> {
        self.inner.get(topic, id).await
    }

    async fn delete(&self, topic: &Topic, id: &JobId) -> Result<bool> {
        self.inner.delete(topic, id).await
    }

    async fn reschedule(&self, topic: &Topic, id: &JobId, when: Schedule) -> Result<Timestamp> {
        self.inner.reschedule(topic, id, when).await
    }

    async fn reserve(&self, req: &Reserve) -> Result<Vec<Delivery>> {
        self.counts.max_asked.fetch_max(req.max, Ordering::SeqCst);
        let got = self.inner.reserve(req).await?;
        self.counts.reserved(&got);
        Ok(got)
    }

    async fn settle_and_reserve(
        &self,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        self.counts.max_asked.fetch_max(req.max, Ordering::SeqCst);
        // Settlements stop counting as held when they are sent, not when their answer is
        // read: the engine applies them before anything this worker sends later (one Redis
        // connection answers in order, the embedded engine's writer takes requests in
        // order), while the answers of two calls in flight may be read in either order.
        let n = i64::try_from(settle.len()).unwrap();
        self.counts.held.fetch_sub(n, Ordering::SeqCst);
        let r = self.inner.settle_and_reserve(settle, req).await;
        match &r {
            Ok(answer) => {
                for (s, one) in settle.iter().zip(&answer.settled) {
                    if matches!(one, Err(e) if e.is_retryable()) {
                        self.counts.held.fetch_add(1, Ordering::SeqCst);
                    }
                    if one.is_ok() && self.counts.print_acks && matches!(s, Settle::Ack(_)) {
                        println!("{ACKED}{}", s.lease().id);
                    }
                }
                self.counts.reserved(&answer.deliveries);
            }
            // The worker sends them again.
            Err(e) if e.is_retryable() => {
                self.counts.held.fetch_add(n, Ordering::SeqCst);
            }
            Err(_) => {}
        }
        r
    }

    async fn ack(&self, lease: &Lease) -> Result<()> {
        let r = self.inner.ack(lease).await;
        self.counts.finished(&r);
        if r.is_ok() && self.counts.print_acks {
            println!("{ACKED}{}", lease.id);
        }
        r
    }

    async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        let r = self.inner.ack_batch(leases).await;
        match &r {
            Ok(results) => {
                for (lease, one) in leases.iter().zip(results) {
                    self.counts.finished(one);
                    if one.is_ok() && self.counts.print_acks {
                        println!("{ACKED}{}", lease.id);
                    }
                }
            }
            Err(e) if e.is_retryable() => {}
            Err(_) => {
                let n = i64::try_from(leases.len()).unwrap();
                self.counts.held.fetch_sub(n, Ordering::SeqCst);
            }
        }
        r
    }

    async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
        let r = self.inner.nack(lease, nack).await;
        self.counts.finished(&r);
        r
    }

    async fn release_with(&self, lease: &Lease, release: Release) -> Result<()> {
        let r = self.inner.release_with(lease, release).await;
        self.counts.finished(&r);
        r
    }

    async fn touch(&self, lease: &Lease, ttr: Option<Duration>) -> Result<Timestamp> {
        self.inner.touch(lease, ttr).await
    }

    async fn bury_with(&self, lease: &Lease, bury: Bury) -> Result<()> {
        let r = self.inner.bury_with(lease, bury).await;
        self.counts.finished(&r);
        r
    }

    async fn kick(&self, topic: &Topic, id: &JobId) -> Result<()> {
        self.inner.kick(topic, id).await
    }

    async fn kick_all(&self, topic: &Topic) -> Result<u64> {
        self.inner.kick_all(topic).await
    }

    async fn list(
        &self,
        topic: &Topic,
        state: JobState,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<Page> {
        self.inner.list(topic, state, limit, after).await
    }

    async fn stats(&self, topic: &Topic) -> Result<TopicStats> {
        self.inner.stats(topic).await
    }

    async fn topics(&self) -> Result<Vec<Topic>> {
        self.inner.topics().await
    }

    async fn purge(&self, topic: &Topic) -> Result<u64> {
        self.inner.purge(topic).await
    }

    async fn now(&self) -> Result<Timestamp> {
        self.inner.now().await
    }

    fn unreachable(&self, topics: &[Topic]) -> Vec<Topic> {
        self.inner.unreachable(topics)
    }

    async fn reserve_job(&self, topic: &Topic, id: &JobId) -> Result<Delivery> {
        self.inner.reserve_job(topic, id).await
    }

    async fn bury_waiting(&self, topic: &Topic, id: &JobId, reason: Option<String>) -> Result<()> {
        self.inner.bury_waiting(topic, id, reason).await
    }

    async fn topic_config(&self, topic: &Topic) -> Result<TopicConfig> {
        self.inner.topic_config(topic).await
    }

    async fn set_topic_config(&self, topic: &Topic, config: &TopicConfig) -> Result<()> {
        self.inner.set_topic_config(topic, config).await
    }

    async fn pause(&self, topic: &Topic, until: Option<Timestamp>) -> Result<()> {
        self.inner.pause(topic, until).await
    }
}
