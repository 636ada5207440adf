//! Prometheus metrics: per-topic counters of what this server did, histograms of lateness and
//! of time reserved, and per-state gauges read from the engine at each scrape; HTTP requests
//! and their latency by route template and status; the build; the process.
//!
//! Every per-topic series exists, at 0, from the first scrape after its topic appears in the
//! engine's list, and goes when the topic leaves it (a purge).
//!
//! The same calls feed the dashboard's time series ([`Series`]), so the two never disagree.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use delayq_core::{Engine, JobId, JobState, Topic, TopicStats};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::process::ProcessCollector;
use crate::series::{self, Series};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TopicLabel {
    topic: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabel {
    method: String,
    /// The route template (`/v1/topics/{topic}/jobs`), never the path itself, so that the
    /// series stay few; `unmatched` for paths no route takes.
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabel {
    version: &'static str,
    commit: &'static str,
    build_date: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    topic: String,
    state: String,
}

/// The buckets of every histogram in seconds: the dashboard's lateness histogram's.
fn seconds_buckets() -> impl Iterator<Item = f64> {
    series::BOUNDS.into_iter()
}

type Histograms = Family<TopicLabel, Histogram, fn() -> Histogram>;

/// The most leases tracked for the time-reserved histogram; beyond it, new leases are not
/// timed (their jobs still work).
const MAX_TRACKED_LEASES: usize = 1_000_000;

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    /// The forwarder's (`delayq-push`), in the same registry.
    push: delayq_push::PushMetrics,
    /// The process metrics, whose standard names carry no `delayq_` prefix.
    process: Registry,
    http_requests: Family<HttpLabel, Counter>,
    http_seconds: Family<HttpLabel, Histogram, fn() -> Histogram>,
    /// The topics that have series, to drop those of a topic the engine no longer lists.
    topics: Mutex<HashSet<Topic>>,
    pushed: Family<TopicLabel, Counter>,
    delivered: Family<TopicLabel, Counter>,
    acked: Family<TopicLabel, Counter>,
    nacked: Family<TopicLabel, Counter>,
    buried: Family<TopicLabel, Counter>,
    released: Family<TopicLabel, Counter>,
    lateness: Histograms,
    reserved_time: Histograms,
    lease_expirations: Family<TopicLabel, Counter>,
    /// The engine's count of expired leases per topic at the last scrape, to turn it into a
    /// counter that only grows (a purge restarts the engine's count).
    expirations_seen: Mutex<HashMap<Topic, u64>>,
    job_expirations: Family<TopicLabel, Counter>,
    /// The engine's count of expired jobs per topic at the last scrape, as
    /// `expirations_seen`.
    job_expirations_seen: Mutex<HashMap<Topic, u64>>,
    jobs: Family<StateLabel, Gauge>,
    oldest_overdue: Family<TopicLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// 1 while a topic is paused, else 0.
    paused: Family<TopicLabel, Gauge>,
    /// 1 while the engine cannot reach a topic (`Engine::unreachable`), else 0.
    unreachable: Family<TopicLabel, Gauge>,
    /// When this server handed out each lease it still tracks.
    leases: Mutex<HashMap<(Topic, JobId, u64), Instant>>,
    /// The last hour of pushes, deliveries, acks, deaths and lateness, for the dashboard.
    series: Series,
}

/// How much an engine's count for `topic` grew since the last scrape (`seen` keeps it): a
/// smaller count than last time means the topic was purged, so all of it is new.
fn growth(seen: &Mutex<HashMap<Topic, u64>>, topic: &Topic, count: u64) -> u64 {
    let last = seen
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(topic.clone(), count)
        .unwrap_or(0);
    if count >= last { count - last } else { count }
}

/// What ended a lease, for the counters.
#[derive(Clone, Copy, Debug)]
pub enum LeaseEnd {
    /// Acked.
    Acked,
    /// Nacked: `dead` when it was the job's last attempt.
    Nacked {
        /// The job went dead.
        dead: bool,
    },
    /// Buried.
    Buried,
    /// Released.
    Released,
}

impl Metrics {
    /// The forwarder's metrics, for it to count into.
    pub fn push(&self) -> &delayq_push::PushMetrics {
        &self.push
    }

    /// Empty metrics in their own registry.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("delayq");
        let push = delayq_push::PushMetrics::new();
        push.register(&mut registry);
        let pushed = Family::default();
        let delivered = Family::default();
        let acked = Family::default();
        let nacked = Family::default();
        let buried = Family::default();
        let released = Family::default();
        let new_hist: fn() -> Histogram = || Histogram::new(seconds_buckets());
        let lateness = Histograms::new_with_constructor(new_hist);
        let reserved_time = Histograms::new_with_constructor(new_hist);
        let lease_expirations = Family::default();
        let job_expirations = Family::default();
        let jobs = Family::default();
        let oldest_overdue = Family::default();
        let paused = Family::default();
        let unreachable = Family::default();
        let http_requests = Family::default();
        let http_seconds =
            Family::<HttpLabel, Histogram, fn() -> Histogram>::new_with_constructor(new_hist);
        registry.register(
            "build",
            "The version, git commit and build date of this server",
            Info::new(BuildLabel {
                version: crate::build::VERSION,
                commit: crate::build::COMMIT,
                build_date: crate::build::DATE,
            }),
        );
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, route template and status",
            http_requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time to answer an HTTP request (a long-poll counts its wait), by method, route template and status",
            http_seconds.clone(),
        );
        let mut process = Registry::default();
        process.register_collector(Box::new(ProcessCollector));
        registry.register(
            "jobs_pushed",
            "Jobs created by pushes through this server",
            pushed.clone(),
        );
        registry.register(
            "jobs_delivered",
            "Deliveries handed out by this server's reserves",
            delivered.clone(),
        );
        registry.register(
            "jobs_acked",
            "Deliveries acked through this server",
            acked.clone(),
        );
        registry.register(
            "jobs_nacked",
            "Deliveries nacked through this server",
            nacked.clone(),
        );
        registry.register(
            "jobs_buried",
            "Deliveries buried through this server",
            buried.clone(),
        );
        registry.register(
            "jobs_released",
            "Deliveries released through this server",
            released.clone(),
        );
        registry.register(
            "lateness_seconds",
            "Delivery time minus due time, on the engine's clock",
            lateness.clone(),
        );
        registry.register(
            "reserved_seconds",
            "Time from delivery to ack, nack, bury or release, for leases handed out by this server",
            reserved_time.clone(),
        );
        registry.register(
            "lease_expirations",
            "Leases that ran out without an answer (worker died or overran its ttr), from the engine",
            lease_expirations.clone(),
        );
        registry.register(
            "jobs_expired",
            "Jobs whose expiry (expires_at or max_lateness) passed before a delivery: gone dead with the reason expired, or dropped; from the engine",
            job_expirations.clone(),
        );
        registry.register(
            "jobs",
            "Jobs per topic and state, read from the engine at each scrape",
            jobs.clone(),
        );
        registry.register(
            "oldest_overdue_seconds",
            "How long the longest-waiting due job of a topic has waited (0 when none); growing means no one is reserving",
            oldest_overdue.clone(),
        );
        registry.register(
            "topic_paused",
            "1 while a topic is paused (it hands out no job), else 0, read from the engine at each scrape",
            paused.clone(),
        );
        registry.register(
            "topic_unreachable",
            "1 while the engine cannot reach a topic (a Redis Cluster primary that did not answer in time lately: reserves skip it), else 0; its job gauges then keep the values read before",
            unreachable.clone(),
        );
        Metrics {
            registry,
            push,
            process,
            http_requests,
            http_seconds,
            topics: Mutex::new(HashSet::new()),
            pushed,
            delivered,
            acked,
            nacked,
            buried,
            released,
            lateness,
            reserved_time,
            lease_expirations,
            expirations_seen: Mutex::new(HashMap::new()),
            job_expirations,
            job_expirations_seen: Mutex::new(HashMap::new()),
            jobs,
            oldest_overdue,
            paused,
            unreachable,
            leases: Mutex::new(HashMap::new()),
            series: Series::new(Instant::now()),
        }
    }

    /// The dashboard's time series, which this struct's methods feed.
    pub fn series(&self) -> &Series {
        &self.series
    }

    fn label(topic: &Topic) -> TopicLabel {
        TopicLabel {
            topic: topic.to_string(),
        }
    }

    /// Counts created jobs.
    pub fn pushed(&self, topic: &Topic, created: u64) {
        self.pushed
            .get_or_create(&Self::label(topic))
            .inc_by(created);
        self.series.pushed(topic, created);
    }

    /// Records a delivery: lateness, and the lease's start for the time-reserved histogram.
    pub fn delivered(&self, topic: &Topic, id: &JobId, token: Option<u64>, lateness: Duration) {
        let label = Self::label(topic);
        self.delivered.get_or_create(&label).inc();
        self.lateness
            .get_or_create(&label)
            .observe(lateness.as_secs_f64());
        self.series.delivered(topic, lateness);
        if let Some(token) = token {
            let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
            if leases.len() < MAX_TRACKED_LEASES {
                leases.insert((topic.clone(), id.clone(), token), Instant::now());
            }
        }
    }

    /// Records the end of a lease handed out by this server.
    pub fn lease_ended(&self, topic: &Topic, id: &JobId, token: u64, how: LeaseEnd) {
        let label = Self::label(topic);
        let counter = match how {
            LeaseEnd::Acked => &self.acked,
            LeaseEnd::Nacked { .. } => &self.nacked,
            LeaseEnd::Buried => &self.buried,
            LeaseEnd::Released => &self.released,
        };
        counter.get_or_create(&label).inc();
        match how {
            LeaseEnd::Acked => self.series.acked(topic),
            LeaseEnd::Buried | LeaseEnd::Nacked { dead: true } => self.series.dead(topic),
            LeaseEnd::Nacked { dead: false } | LeaseEnd::Released => {}
        }
        let start = self
            .leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(topic.clone(), id.clone(), token));
        if let Some(start) = start {
            self.reserved_time
                .get_or_create(&label)
                .observe(start.elapsed().as_secs_f64());
        }
    }

    /// Records an answered HTTP request.
    pub fn http(&self, method: &str, route: Option<&str>, status: u16, took: Duration) {
        let label = HttpLabel {
            method: method.to_string(),
            route: route.unwrap_or("unmatched").to_string(),
            status,
        };
        self.http_requests.get_or_create(&label).inc();
        self.http_seconds
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    /// Makes every per-topic series of the listed topics exist (at 0 when nothing happened
    /// yet), and drops the series of topics no longer listed (the time series' too).
    pub fn sync_topics(&self, listed: &[Topic]) {
        self.series.retain(listed);
        let mut known = self.topics.lock().unwrap_or_else(|e| e.into_inner());
        let listed_set: HashSet<&Topic> = listed.iter().collect();
        known.retain(|topic| {
            if listed_set.contains(topic) {
                return true;
            }
            let label = Self::label(topic);
            for counter in self.counters() {
                counter.remove(&label);
            }
            self.lateness.remove(&label);
            self.reserved_time.remove(&label);
            self.oldest_overdue.remove(&label);
            self.paused.remove(&label);
            self.unreachable.remove(&label);
            for state in JobState::ALL {
                self.jobs.remove(&StateLabel {
                    topic: topic.to_string(),
                    state: state.to_string(),
                });
            }
            for seen in [&self.expirations_seen, &self.job_expirations_seen] {
                seen.lock().unwrap_or_else(|e| e.into_inner()).remove(topic);
            }
            false
        });
        for topic in listed {
            if known.insert(topic.clone()) {
                let label = Self::label(topic);
                for counter in self.counters() {
                    counter.get_or_create(&label).inc_by(0);
                }
                drop(self.lateness.get_or_create(&label));
                drop(self.reserved_time.get_or_create(&label));
            }
        }
    }

    /// The per-topic counter families.
    fn counters(&self) -> [&Family<TopicLabel, Counter>; 8] {
        [
            &self.job_expirations,
            &self.pushed,
            &self.delivered,
            &self.acked,
            &self.nacked,
            &self.buried,
            &self.released,
            &self.lease_expirations,
        ]
    }

    /// Refreshes the gauges from the engine and renders everything in the text format.
    pub async fn render(&self, engine: &dyn Engine) -> delayq_core::Result<String> {
        let topics = engine.topics().await?;
        self.sync_topics(&topics);
        let stats = stats_or_unreachable(engine, &topics).await?;
        for (topic, s) in topics.into_iter().zip(stats) {
            self.unreachable
                .get_or_create(&Self::label(&topic))
                .set(i64::from(s.is_none()));
            // Not reached: its other gauges keep their last values.
            let Some(s) = s else {
                continue;
            };
            for (state, n) in [
                (JobState::Delayed, s.delayed),
                (JobState::Ready, s.ready),
                (JobState::Reserved, s.reserved),
                (JobState::Dead, s.dead),
                (JobState::Done, s.done),
            ] {
                let label = StateLabel {
                    topic: topic.to_string(),
                    state: state.to_string(),
                };
                self.jobs
                    .get_or_create(&label)
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
            self.oldest_overdue
                .get_or_create(&Self::label(&topic))
                .set(s.oldest_overdue.map(|d| d.as_secs_f64()).unwrap_or(0.0));
            self.paused
                .get_or_create(&Self::label(&topic))
                .set(i64::from(s.paused_until.is_some()));
            self.lease_expirations
                .get_or_create(&Self::label(&topic))
                .inc_by(growth(&self.expirations_seen, &topic, s.expired_leases));
            self.job_expirations
                .get_or_create(&Self::label(&topic))
                .inc_by(growth(&self.job_expirations_seen, &topic, s.expired_jobs));
        }
        self.forget_stale_leases();
        let mut out = String::new();
        encode_registry(&mut out, &self.registry)
            .and_then(|()| encode_registry(&mut out, &self.process))
            .and_then(|()| encode_eof(&mut out))
            .map_err(|e| delayq_core::Error::Internal(format!("encoding metrics: {e}")))?;
        Ok(out)
    }

    /// Drops tracked leases older than the longest ttr: they expired without an answer.
    fn forget_stale_leases(&self) {
        let max_age = delayq_core::limits::MAX_TTR + Duration::from_secs(3600);
        self.leases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, start| start.elapsed() < max_age);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The stats of each of `topics` (`Engine::stats_each`), or `None` for a topic the engine
/// cannot reach now (`Engine::unreachable`: a Redis Cluster primary that did not answer
/// within the slot timeout, or that is skipped since). What `/metrics` and `GET /v1/topics`
/// show: a listing answers within about the slot timeout whatever primary is down, instead of
/// waiting on it for the response timeout and then failing whole (issue 37). Any other error
/// (one Redis node down, a database error) fails the listing, as before.
pub(crate) async fn stats_or_unreachable(
    engine: &dyn Engine,
    topics: &[Topic],
) -> delayq_core::Result<Vec<Option<TopicStats>>> {
    let stats = engine.stats_each(topics).await;
    let unreachable = engine.unreachable(topics);
    topics
        .iter()
        .zip(stats)
        .map(|(t, s)| match s {
            Ok(s) => Ok(Some(s)),
            Err(_) if unreachable.contains(t) => Ok(None),
            Err(e) => Err(e),
        })
        .collect()
}
