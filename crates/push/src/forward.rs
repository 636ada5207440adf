//! The forwarder: every server runs one. It reads the engine's destinations every second
//! and runs one worker ([`delayq_worker::Worker`]) per topic that has one, whose handler
//! sends each due job there. So forwarding takes the contract as it is: leases (a send may
//! take the job's ttr: its lease, never renewed), attempts, back-off, dead letters, and any
//! number of servers forwarding one topic without sending a job twice, except after a lease
//! expired (at-least-once: each send carries the job id and attempt).
//!
//! A send waits at most until the job's lease ends (less a margin for the nack), or the
//! destination's `timeout_ms` when that is sooner. A `429` or `503` with `Retry-After` is
//! waited out and sent again within the same attempt when the lease allows (see `retry`).
//!
//! A changed destination replaces its worker (the old one gives its buffered jobs back and
//! finishes what it sends); a removed one stops it. A document that does not read is logged
//! once and skipped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use delayq_core::{Store, Topic};
use delayq_worker::{Job, JobError, Worker, WorkerConfig};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::destination::Destination;
use crate::metrics::PushMetrics;
use crate::nats::Publisher as NatsPublisher;
use crate::rabbitmq::Publisher as RabbitMqPublisher;
use crate::retry::waits_in_place;
use crate::secret::masked_url;
use crate::webhook::{Hook, Message, Outcome, Sender};

/// How often the destinations are read again.
pub const REFRESH: Duration = Duration::from_secs(1);

/// The least share of its ttr a job's lease has left when its send starts.
const MIN_SEND_SHARE: f64 = 0.9;

/// How long a send may wait for its destination: until the job's lease ends (the worker's
/// early estimate), less 2 % of the ttr (5 ms to 1 s) for the nack of a send that timed out
/// to reach the engine before the lease does end. So an unanswered send fails as a
/// `timeout`, with its destination's retry, instead of being stopped with the lease.
fn send_timeout(ttr: Duration, lease_end: Option<Instant>, now: Instant) -> Duration {
    let margin = (ttr / 50).clamp(Duration::from_millis(5), Duration::from_secs(1));
    lease_end
        .map_or(ttr, |end| end.saturating_duration_since(now))
        .saturating_sub(margin)
}

/// The timeout of one send: what the lease leaves ([`send_timeout`]), or the destination's
/// own `timeout` when that is shorter.
fn timeout_of(own: Option<Duration>, left: Duration) -> Duration {
    own.map_or(left, |t| t.min(left))
}

/// Forwards the due jobs of every topic with a destination.
pub struct Forwarder {
    engine: Arc<dyn Store>,
    metrics: PushMetrics,
    sender: Sender,
    refresh: Duration,
}

/// A destination's running worker.
struct Running {
    doc: String,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Forwarder {
    /// A forwarder over `engine`, counting into `metrics`.
    pub fn new(engine: Arc<dyn Store>, metrics: PushMetrics) -> Result<Self, String> {
        Ok(Forwarder {
            engine,
            metrics,
            sender: Sender::new()?,
            refresh: REFRESH,
        })
    }

    /// Reads the destinations every `refresh` instead of every second (tests).
    pub fn with_refresh(mut self, refresh: Duration) -> Self {
        self.refresh = refresh;
        self
    }

    /// Runs until `shutdown` is cancelled, then stops every worker (each gives back what it
    /// buffered and finishes its sends within its grace period).
    pub async fn run(self, shutdown: CancellationToken) {
        let mut running: HashMap<Topic, Running> = HashMap::new();
        let mut unreadable: HashMap<Topic, String> = HashMap::new();
        let mut failing = false;
        loop {
            match self.engine.destinations().await {
                Ok(list) => {
                    if failing {
                        tracing::info!("push: destinations readable again");
                        failing = false;
                    }
                    let mut seen = HashMap::with_capacity(list.len());
                    for stored in list {
                        seen.insert(stored.topic.clone(), ());
                        if running
                            .get(&stored.topic)
                            .is_some_and(|r| r.doc == stored.doc)
                        {
                            continue;
                        }
                        let destination = match Destination::from_json(&stored.doc) {
                            Ok(d) => d,
                            Err(e) => {
                                if unreadable.get(&stored.topic) != Some(&stored.doc) {
                                    tracing::warn!(topic = %stored.topic, error = %e, "push: a stored destination does not read; its jobs wait");
                                    unreadable.insert(stored.topic.clone(), stored.doc);
                                }
                                continue;
                            }
                        };
                        unreadable.remove(&stored.topic);
                        if let Some(old) = running.remove(&stored.topic) {
                            old.stop.cancel();
                        }
                        match self.start(&stored.topic, destination, &shutdown) {
                            Ok((stop, task)) => {
                                running.insert(
                                    stored.topic,
                                    Running {
                                        doc: stored.doc,
                                        stop,
                                        task,
                                    },
                                );
                            }
                            Err(e) => {
                                tracing::warn!(topic = %stored.topic, error = %e, "push: cannot start forwarding");
                            }
                        }
                    }
                    running.retain(|topic, r| {
                        let keep = seen.contains_key(topic);
                        if !keep {
                            tracing::info!(%topic, "push: destination removed; forwarding stops");
                            r.stop.cancel();
                        }
                        keep
                    });
                    unreadable.retain(|topic, _| seen.contains_key(topic));
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "push: cannot read the destinations; retrying");
                        failing = true;
                    }
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(self.refresh) => {}
            }
        }
        for (_, r) in running.drain() {
            r.stop.cancel();
            let _ = r.task.await;
        }
    }

    /// Starts the worker of one destination.
    fn start(
        &self,
        topic: &Topic,
        destination: Destination,
        shutdown: &CancellationToken,
    ) -> Result<(CancellationToken, JoinHandle<()>), String> {
        let n = destination.max_concurrency() as usize;
        // The worker's own prefetch (reserving ahead of the sends, adapting to their speed
        // and falling back when other servers share the topic): with only as many jobs as
        // sends in flight, every freed slot waited a round trip to the engine for its next
        // job, and each reserve carried only the slots just freed (W10 in BENCHMARKS.md).
        let config = WorkerConfig::default()
            .with_concurrency(n)
            // A send may take the job's ttr, no more: no renewal (the worker then leaves the
            // lease untouched and the send runs until its end, `send_timeout`).
            .with_max_extension(Duration::ZERO)
            // A job that waited in the buffer for more than a tenth of its ttr is touched
            // before its send starts, so that every send has at least 90 % of the ttr.
            .with_min_lease_left(MIN_SEND_SHARE);
        let kind = destination.kind();
        let timeout = destination.timeout();
        let target = match destination {
            Destination::Webhook(hook) => {
                tracing::info!(%topic, url = %masked_url(&hook.url), concurrency = n, "push: forwarding to a webhook");
                Target::Webhook {
                    hook: Hook::new(&hook)?,
                    sender: self.sender.clone(),
                }
            }
            Destination::Nats(nats) => {
                tracing::info!(%topic, url = %masked_url(&nats.url), subject = %nats.subject, concurrency = n, "push: forwarding to NATS JetStream");
                Target::Nats(NatsPublisher::new(&nats))
            }
            Destination::RabbitMq(r) => {
                tracing::info!(%topic, url = %masked_url(&r.url), exchange = %r.exchange, routing_key = %r.routing_key, concurrency = n, "push: forwarding to RabbitMQ");
                Target::RabbitMq(RabbitMqPublisher::new(&r))
            }
        };
        let ctx = Arc::new(Context {
            target,
            kind,
            timeout,
            metrics: self.metrics.clone(),
        });
        let handler = move |job: Job<Bytes>| {
            let ctx = Arc::clone(&ctx);
            async move { ctx.deliver(job).await }
        };
        let worker =
            Worker::with_config(Arc::clone(&self.engine), [topic.clone()], config, handler)
                .map_err(|e| e.to_string())?;
        let stop = shutdown.child_token();
        let until = stop.clone();
        let task = tokio::spawn(async move {
            worker.run(until.cancelled_owned()).await;
        });
        Ok((stop, task))
    }
}

/// Where one destination's handler sends.
enum Target {
    Webhook { hook: Hook, sender: Sender },
    Nats(NatsPublisher),
    RabbitMq(RabbitMqPublisher),
}

impl Target {
    async fn send(&self, msg: &Message<'_>, timeout: Duration) -> Outcome {
        match self {
            Target::Webhook { hook, sender } => sender.send(hook, msg, timeout).await,
            Target::Nats(p) => p.send(msg, timeout).await,
            Target::RabbitMq(p) => p.send(msg, timeout).await,
        }
    }
}

/// What one destination's handler shares.
struct Context {
    target: Target,
    kind: &'static str,
    /// The destination's `timeout_ms`, if it has one.
    timeout: Option<Duration>,
    metrics: PushMetrics,
}

impl Context {
    async fn deliver(&self, job: Job<Bytes>) -> Result<(), JobError> {
        let meta = job.meta();
        let topic = job.topic().as_str();
        let id = format!(
            "{topic}/{}/{}",
            job.id().as_str(),
            meta.created_at.as_millis()
        );
        let msg = Message {
            id: &id,
            topic,
            job_id: job.id().as_str(),
            attempt: job.attempt(),
            due_at_ms: meta.ready_at.as_millis(),
            body: job.body(),
        };
        let lease_lost = || {
            Outcome::retry(
                "lease_lost",
                "the lease ended before the destination answered",
            )
        };
        let (mut waits, mut waited) = (0, Duration::ZERO);
        let first = Instant::now();
        let (outcome, took) = loop {
            let started = Instant::now();
            let left = send_timeout(meta.ttr, job.lease_end(), started);
            let outcome = tokio::select! {
                o = self.target.send(&msg, timeout_of(self.timeout, left)) => o,
                () = job.cancelled() => lease_lost(),
            };
            let took = started.elapsed();
            let Outcome::Throttled { after, cause, .. } = &outcome else {
                break (outcome, took);
            };
            let left = send_timeout(meta.ttr, job.lease_end(), Instant::now());
            if !waits_in_place(*after, waits, waited, meta.ttr, left) {
                break (outcome, took);
            }
            // The receiver is up and said when to come back: wait within this attempt, so
            // that the answer uses up none of the job's attempts.
            self.metrics.failed(topic, self.kind, cause, Some(took));
            tracing::debug!(%topic, id = %job.id(), attempt = job.attempt(), after_ms = after.as_millis() as u64, "push: the destination asked to come back later; waiting within the attempt");
            let after = *after;
            tokio::select! {
                () = tokio::time::sleep(after) => {}
                () = job.cancelled() => break (lease_lost(), took),
            }
            waits += 1;
            waited += after;
        };
        match outcome {
            Outcome::Delivered => {
                // The latency is the last send's; the lateness counts the waits before it.
                self.metrics
                    .delivered(topic, self.kind, took, job.lateness() + first.elapsed());
                Ok(())
            }
            Outcome::Throttled {
                after,
                cause,
                reason,
            } => {
                self.metrics.failed(topic, self.kind, cause, Some(took));
                tracing::debug!(%topic, id = %job.id(), attempt = job.attempt(), %reason, "push: the destination asked to come back later than this attempt allows; retrying then");
                Err(JobError::retry_after(after, reason))
            }
            Outcome::Retry {
                after,
                cause,
                reason,
            } => {
                self.metrics.failed(topic, self.kind, cause, Some(took));
                tracing::debug!(%topic, id = %job.id(), attempt = job.attempt(), %reason, "push: send failed; retrying");
                Err(match after {
                    Some(d) => JobError::retry_after(d, reason),
                    None => JobError::retry(reason),
                })
            }
            Outcome::Refused { cause, reason } => {
                self.metrics.failed(topic, self.kind, cause, Some(took));
                tracing::warn!(%topic, id = %job.id(), destination = self.kind, %reason, "push: the destination refused a job; it goes to dead");
                Err(JobError::permanent(reason))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_runs_until_its_lease_ends_less_the_margin() {
        let now = Instant::now();
        let ttr = Duration::from_secs(30);
        let ms = Duration::from_millis;
        // The whole lease left: 30 s less 600 ms.
        assert_eq!(send_timeout(ttr, Some(now + ttr), now), ms(29_400));
        // What is left of it.
        assert_eq!(send_timeout(ttr, Some(now + ms(20_000)), now), ms(19_400));
        // The margin is at least 5 ms and at most 1 s.
        assert_eq!(send_timeout(ms(100), Some(now + ms(100)), now), ms(95));
        let hour = Duration::from_secs(3600);
        assert_eq!(send_timeout(hour, Some(now + hour), now), hour - ms(1000));
        // A lease already over, and none (at-most-once).
        assert_eq!(send_timeout(ttr, Some(now), now), Duration::ZERO);
        assert_eq!(send_timeout(ttr, None, now), ms(29_400));
    }

    #[test]
    fn a_destination_timeout_cuts_a_send_short_never_longer() {
        let ms = Duration::from_millis;
        assert_eq!(timeout_of(None, ms(29_400)), ms(29_400));
        assert_eq!(timeout_of(Some(ms(500)), ms(29_400)), ms(500));
        // The lease still ends the send.
        assert_eq!(timeout_of(Some(ms(60_000)), ms(29_400)), ms(29_400));
    }
}
