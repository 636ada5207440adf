//! What every connection of one server shares ([`Shared`]): the engine, the job numbers, the
//! reserves' coalescers and lines, the counters, the settings ([`Options`]) and whether the
//! server is draining; and which tubes exist, as beanstalkd counts them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use delayq_core::{Coalescers, Store, Topic};

use crate::counters::{Stats, Tubes};
use crate::line::Lines;
use crate::numbers::Numbers;
use crate::tube::Tube;

/// The beanstalkd protocol server's settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// The largest job body a `put` may carry (`max-job-size`); a larger one is answered
    /// `JOB_TOO_BIG`. Default 65,535 bytes, as beanstalkd's.
    pub max_job_size: usize,
    /// The most connections open at once; more are closed as soon as they are accepted.
    /// Default 10,000.
    pub max_connections: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_job_size: 65_535,
            max_connections: 10_000,
        }
    }
}

/// What every connection of one server shares.
pub(crate) struct Shared {
    pub(crate) engine: Arc<dyn Store>,
    pub(crate) numbers: Numbers,
    pub(crate) coalescers: Coalescers,
    pub(crate) lines: Lines,
    pub(crate) stats: Stats,
    pub(crate) tubes: Tubes,
    pub(crate) options: Options,
    pub(crate) default_tube: (Tube, Topic),
    pub(crate) started: Instant,
    /// `stats`' `id` (random per process, as beanstalkd's) and `hostname`.
    pub(crate) server_id: String,
    pub(crate) hostname: String,
    draining: AtomicBool,
}

impl Shared {
    /// The shared state of a server that starts now: nothing counted yet, no job numbers
    /// claimed, `default` the tube new connections use and watch.
    ///
    /// # Errors
    /// When the default tube cannot be mapped to a topic (never).
    pub(crate) fn new(engine: Arc<dyn Store>, options: Options) -> std::io::Result<Self> {
        let default = Tube::default_tube();
        let default_topic = default
            .topic()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Shared {
            numbers: Numbers::new(engine.clone()),
            coalescers: Coalescers::new(engine.clone()),
            lines: Lines::default(),
            engine,
            stats: Stats::default(),
            tubes: Tubes::default(),
            default_tube: (default, default_topic),
            started: Instant::now(),
            server_id: format!("{:016x}", rand_id()),
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "localhost".into()),
            draining: AtomicBool::new(false),
            options,
        })
    }

    /// Whether the server is stopping: puts answer `DRAINING`, waiting reserves end.
    pub(crate) fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// The server stops: from now on [`Shared::draining`].
    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// A tube and its topic, or `None` when its name maps to no topic (too long once
    /// mapped): the client gets `BAD_FORMAT`.
    pub(crate) fn tube(&self, tube: &Tube) -> Option<(Tube, Topic)> {
        tube.topic().ok().map(|topic| (tube.clone(), topic))
    }

    /// Whether a tube exists as beanstalkd counts them: it is `default`, some connection
    /// here uses or watches it, or its topic holds a job (waiting, reserved or buried).
    pub(crate) async fn tube_exists(&self, tube: &Tube, topic: &Topic) -> bool {
        let here = self.tubes.counts(tube);
        if *tube == self.default_tube.0 || here.using > 0 || here.watching > 0 {
            return true;
        }
        match self.engine.stats(topic).await {
            Ok(s) => holds_jobs(&s),
            Err(_) => true,
        }
    }

    /// The tubes that exist (as [`Shared::tube_exists`]), sorted: `default`, those in use
    /// here, and those of the engine's topics (at most [`LISTED_TOPICS`] looked at) that
    /// hold a job. The topics' counts are read together (`Engine::stats_each`): a topic
    /// whose counts could not be read (a Redis Cluster primary dead or hung, found out
    /// within the slot timeout) is listed, as [`Shared::tube_exists`] takes it to exist.
    pub(crate) async fn tubes(&self) -> delayq_core::Result<Vec<Tube>> {
        let topics = self.engine.topics().await?;
        let mut tubes = vec![self.default_tube.0.clone()];
        tubes.extend(self.tubes.in_use());
        let listed: Vec<(Topic, Tube)> = topics
            .into_iter()
            .take(LISTED_TOPICS)
            .filter_map(|t| Tube::from_topic(&t).map(|tube| (t, tube)))
            .filter(|(_, tube)| !tubes.contains(tube))
            .collect();
        let (topics, listed): (Vec<Topic>, Vec<Tube>) = listed.into_iter().unzip();
        for (tube, stats) in listed
            .into_iter()
            .zip(self.engine.stats_each(&topics).await)
        {
            if stats.as_ref().map_or(true, holds_jobs) {
                tubes.push(tube);
            }
        }
        tubes.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        tubes.dedup();
        Ok(tubes)
    }
}

/// The most topics `list-tubes` and `stats` look at (one engine call each).
pub(crate) const LISTED_TOPICS: usize = 1000;

/// Whether a topic holds a job that beanstalkd would count (done jobs aside).
fn holds_jobs(s: &delayq_core::TopicStats) -> bool {
    s.delayed + s.ready + s.reserved + s.dead > 0
}

/// A per-process id: the clock's nanoseconds mixed with the process id.
fn rand_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}
