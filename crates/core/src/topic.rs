//! [`TopicConfig`]: a topic's settings, kept by the engine so that every server and client
//! shares them: the defaults of the jobs pushed to it, the largest body it takes, and how
//! long its finished jobs are kept ([`Retention`]).

use std::time::Duration;

use crate::limits::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_TTR, Limits, MAX_RETAINED, MAX_RETENTION_AGE, MAX_TOPIC_BODY,
    MIN_RETENTION_AGE, check_ttr,
};
use crate::{Backoff, Error, JobId, NewJob, check_max_attempts};

/// A topic's settings. Every field is optional: an unset one leaves the built-in default (or
/// the engine's limit) in force. A push's own fields always win over the topic's defaults,
/// which are read when the job is pushed (changing them later leaves existing jobs alone).
///
/// ```
/// use std::time::Duration;
/// use delayq_core::{Backoff, TopicConfig};
/// let config = TopicConfig {
///     ttr: Some(Duration::from_secs(60)),
///     max_attempts: Some(5),
///     backoff: Some(Backoff::fixed(Duration::from_secs(10))),
///     ..TopicConfig::default()
/// };
/// config.validate()?;
/// # Ok::<(), delayq_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TopicConfig {
    /// The lease length of jobs pushed without one (1 s to 24 h); unset: 30 s.
    pub ttr: Option<Duration>,
    /// The deliveries allowed to jobs pushed without a number (1 to 10,000); unset: 3.
    pub max_attempts: Option<u32>,
    /// The retry back-off of jobs pushed without one; unset: [`Backoff::default`].
    pub backoff: Option<Backoff>,
    /// The largest body a job of this topic may have, in bytes (1 B to 512 MiB). The
    /// engine's own limit ([`Limits::max_body`]) stays in force: the smaller one applies.
    pub max_body: Option<usize>,
    /// Keep acked jobs, in state [`crate::JobState::Done`], within these bounds; unset (the
    /// default): an acked job is removed at once.
    pub retention: Option<Retention>,
    /// How many partitions hold the topic's jobs (1 to 1024); unset: 1. A job belongs to
    /// the partition its id hashes to ([`partition_of`]). The contract's order (priority,
    /// then due time, then push order) is promised within a partition; across partitions
    /// it is best effort, so a topic whose jobs must come out in strict order keeps one
    /// partition. The count cannot change while the topic holds jobs
    /// ([`crate::Error::PartitionsInUse`]).
    pub partitions: Option<u16>,
}

/// The most partitions a topic can have.
pub const MAX_PARTITIONS: u16 = 1024;

/// The partition (0 to `n` − 1) of the job `id` in a topic of `n` partitions: the 64-bit
/// FNV-1a hash of the id's bytes, modulo `n` (0 when `n` ≤ 1). Stored jobs depend on it: it
/// never changes.
///
/// ```
/// use delayq_core::{JobId, partition_of};
/// let id = JobId::new("order-42")?;
/// assert_eq!(partition_of(&id, 1), 0);
/// assert!(partition_of(&id, 16) < 16);
/// # Ok::<(), delayq_core::Error>(())
/// ```
pub fn partition_of(id: &JobId, n: u16) -> u16 {
    if n <= 1 {
        return 0;
    }
    let hash = id.as_str().bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (hash % u64::from(n)) as u16
}

/// How many finished (acked) jobs a topic keeps, and for how long: a done job is readable
/// (get, list) until `max_age` after its ack, or until `max_jobs` later ones were acked,
/// whichever comes first; after that it is none (a delete of it answers false). Both bounds
/// are required, so retention never grows without end.
///
/// On a topic of several partitions ([`TopicConfig::partitions`]) `max_jobs` bounds each
/// partition: a done job stays at least until `max_jobs` later ones were acked in its topic,
/// and at most until `max_jobs` later ones were acked in its partition (the embedded engine,
/// which keeps a topic's jobs together, forgets it at the first; Redis at the second). So
/// the topic keeps its newest `max_jobs` done jobs, and at most `max_jobs` per partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// The most done jobs kept (1 to 100,000); the oldest go first.
    pub max_jobs: u32,
    /// How long after its ack a done job is kept (1 s to 30 days).
    pub max_age: Duration,
}

impl Retention {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), Error> {
        if !(1..=MAX_RETAINED).contains(&self.max_jobs) {
            return Err(Error::invalid(
                "retention",
                format!("max_jobs {} is outside 1 to {MAX_RETAINED}", self.max_jobs),
            ));
        }
        if !(MIN_RETENTION_AGE..=MAX_RETENTION_AGE).contains(&self.max_age) {
            return Err(Error::invalid(
                "retention",
                format!(
                    "max_age {} ms is outside 1 s to 30 days",
                    self.max_age.as_millis()
                ),
            ));
        }
        Ok(())
    }
}

impl TopicConfig {
    /// Checks the ranges; errors name the field.
    pub fn validate(&self) -> Result<(), Error> {
        if let Some(ttr) = self.ttr {
            check_ttr(ttr)?;
        }
        if let Some(n) = self.max_attempts {
            check_max_attempts(n)?;
        }
        if let Some(b) = &self.backoff {
            b.validate()?;
        }
        if let Some(n) = self.max_body
            && !(1..=MAX_TOPIC_BODY).contains(&n)
        {
            return Err(Error::invalid(
                "max_body",
                format!("{n} bytes is outside 1 to {MAX_TOPIC_BODY}"),
            ));
        }
        if let Some(n) = self.partitions
            && !(1..=MAX_PARTITIONS).contains(&n)
        {
            return Err(Error::invalid(
                "partitions",
                format!("{n} is outside 1 to {MAX_PARTITIONS}"),
            ));
        }
        match &self.retention {
            Some(r) => r.validate(),
            None => Ok(()),
        }
    }

    /// How many partitions the topic has: its setting, else 1.
    pub fn partition_count(&self) -> u16 {
        self.partitions.unwrap_or(1)
    }

    /// The lease length of `job`: its own, else the topic's, else 30 s.
    pub fn ttr_of(&self, job: &NewJob) -> Duration {
        job.ttr.or(self.ttr).unwrap_or(DEFAULT_TTR)
    }

    /// The deliveries allowed to `job`: its own number, else the topic's, else 3.
    pub fn max_attempts_of(&self, job: &NewJob) -> u32 {
        job.max_attempts
            .or(self.max_attempts)
            .unwrap_or(DEFAULT_MAX_ATTEMPTS)
    }

    /// The back-off of `job`: its own, else the topic's, else [`Backoff::default`].
    pub fn backoff_of(&self, job: &NewJob) -> Backoff {
        job.backoff.or(self.backoff).unwrap_or_default()
    }

    /// The largest body of this topic under the engine's `limits`: the smaller of the two.
    pub fn max_body(&self, limits: &Limits) -> usize {
        self.max_body
            .map_or(limits.max_body, |n| n.min(limits.max_body))
    }

    /// Checks `job`'s body against [`TopicConfig::max_body`].
    pub fn check_body(&self, job: &NewJob, limits: &Limits) -> Result<(), Error> {
        let limit = self.max_body(limits);
        if job.body.len() > limit {
            return Err(Error::BodyTooLarge {
                size: job.body.len(),
                limit,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Topic;

    fn job() -> NewJob {
        NewJob::new(Topic::new("t").unwrap_or_else(|e| panic!("{e}")), "12345")
    }

    #[test]
    fn a_push_wins_over_the_topic_which_wins_over_the_built_in() {
        let none = TopicConfig::default();
        assert_eq!(none.ttr_of(&job()), DEFAULT_TTR);
        assert_eq!(none.max_attempts_of(&job()), DEFAULT_MAX_ATTEMPTS);
        assert_eq!(none.backoff_of(&job()), Backoff::default());
        let fixed = Backoff::fixed(Duration::from_secs(7));
        let topic = TopicConfig {
            ttr: Some(Duration::from_secs(90)),
            max_attempts: Some(9),
            backoff: Some(fixed),
            max_body: None,
            retention: None,
            partitions: None,
        };
        assert_eq!(topic.ttr_of(&job()), Duration::from_secs(90));
        assert_eq!(topic.max_attempts_of(&job()), 9);
        assert_eq!(topic.backoff_of(&job()), fixed);
        let own = job()
            .with_ttr(Duration::from_secs(2))
            .with_max_attempts(1)
            .with_backoff(Backoff::default());
        assert_eq!(topic.ttr_of(&own), Duration::from_secs(2));
        assert_eq!(topic.max_attempts_of(&own), 1);
        assert_eq!(topic.backoff_of(&own), Backoff::default());
    }

    #[test]
    fn the_smaller_body_limit_applies() {
        let limits = Limits { max_body: 10 };
        let mut topic = TopicConfig::default();
        assert_eq!(topic.max_body(&limits), 10);
        topic.max_body = Some(4);
        assert_eq!(topic.max_body(&limits), 4);
        assert!(matches!(
            topic.check_body(&job(), &limits),
            Err(Error::BodyTooLarge { size: 5, limit: 4 })
        ));
        topic.max_body = Some(100);
        assert_eq!(topic.max_body(&limits), 10);
        assert!(topic.check_body(&job(), &limits).is_ok());
    }

    #[test]
    fn partitions_are_stable_and_spread() {
        let id = |s: &str| JobId::new(s).unwrap_or_else(|e| panic!("{e}"));
        // Fixed forever: stored jobs were placed by these values.
        assert_eq!(
            partition_of(&id("a"), 1024),
            (0xaf63_dc4c_8601_ec8c_u64 % 1024) as u16
        );
        assert_eq!(partition_of(&id("a"), 1), 0);
        assert_eq!(partition_of(&id("a"), 0), 0);
        let mut counts = [0u32; 8];
        for k in 0..8000 {
            counts[usize::from(partition_of(&id(&format!("job-{k}")), 8))] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn validation_names_the_field() {
        assert!(TopicConfig::default().validate().is_ok());
        let bad = [
            (
                TopicConfig {
                    ttr: Some(Duration::from_millis(10)),
                    ..TopicConfig::default()
                },
                "ttr",
            ),
            (
                TopicConfig {
                    max_attempts: Some(0),
                    ..TopicConfig::default()
                },
                "max_attempts",
            ),
            (
                TopicConfig {
                    backoff: Some(Backoff::default().with_factor(0)),
                    ..TopicConfig::default()
                },
                "backoff",
            ),
            (
                TopicConfig {
                    max_body: Some(0),
                    ..TopicConfig::default()
                },
                "max_body",
            ),
            (
                TopicConfig {
                    retention: Some(Retention {
                        max_jobs: 0,
                        max_age: Duration::from_secs(60),
                    }),
                    ..TopicConfig::default()
                },
                "retention",
            ),
            (
                TopicConfig {
                    retention: Some(Retention {
                        max_jobs: 10,
                        max_age: Duration::from_millis(999),
                    }),
                    ..TopicConfig::default()
                },
                "retention",
            ),
            (
                TopicConfig {
                    partitions: Some(0),
                    ..TopicConfig::default()
                },
                "partitions",
            ),
            (
                TopicConfig {
                    partitions: Some(MAX_PARTITIONS + 1),
                    ..TopicConfig::default()
                },
                "partitions",
            ),
        ];
        for (config, field) in bad {
            let what = match config.validate() {
                Err(Error::InvalidTtr { .. }) => "ttr",
                Err(Error::InvalidArgument { what, .. }) => what,
                other => panic!("{config:?}: {other:?}"),
            };
            assert_eq!(what, field);
        }
    }
}
