//! The dashboard's time series: per-topic counts of what this server did (jobs pushed,
//! delivered, acked, sent to dead) and the lateness of its deliveries, kept in memory for the
//! last hour. Nothing of it is stored in the engine: each server has its own, from its start.
//!
//! # How it is kept
//!
//! [`Metrics`](crate::metrics::Metrics) feeds it, in the same calls that count the Prometheus
//! counters, so the two cannot drift apart: events go into each topic's *live* counts. The
//! sampler ([`Series::run`]) files the live counts once a second, at the end of the second,
//! into two rings per topic:
//!
//! - [`SECONDS`] one-second samples: the last minute, for its lateness figures;
//! - [`MINUTES`] one-minute sums: the last hour, for the chart and the hour's lateness.
//!
//! Each slot remembers which second (or minute) it holds, so a slot left over from an earlier
//! turn of the ring is never read as recent: seconds without events need no sample, and the
//! sampler sleeps while nothing happens (an idle server does not wake up every second).
//!
//! # Memory
//!
//! Bounded: at most [`MAX_TOPICS`] topics, each with [`SECONDS`] + [`MINUTES`] slots of a few
//! counters and the lateness histogram ([`BUCKETS`] counts); about 14 KiB per topic, at most
//! about 3.5 MiB in all (a unit test holds the sizes to this). Beyond [`MAX_TOPICS`], the
//! topic with the oldest last event is dropped to make room; a topic that leaves the engine's
//! list (a purge) is dropped with its Prometheus series ([`Series::retain`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use delayq_core::Topic;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// One-second samples kept per topic: the last minute.
pub const SECONDS: usize = 60;
/// One-minute sums kept per topic: the last hour.
pub const MINUTES: usize = 60;
/// The most topics tracked; beyond it, the least recently active one is dropped.
pub const MAX_TOPICS: usize = 256;

/// The upper bounds of the lateness histogram's buckets, in seconds, smallest first; a last
/// bucket takes what is above the last bound. `/metrics`' histograms use the same bounds.
pub const BOUNDS: [f64; 19] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0, 900.0, 3600.0,
];
/// The lateness histogram's buckets: one per bound and one above the last.
pub const BUCKETS: usize = BOUNDS.len() + 1;

/// What happened in one slot of time. Counts saturate rather than wrap (4 billion events in
/// one minute of one topic would be needed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Jobs created by pushes.
    pub pushed: u32,
    /// Deliveries handed out by reserves.
    pub delivered: u32,
    /// Deliveries acked.
    pub acked: u32,
    /// Jobs sent to dead: buried, or nacked on their last attempt.
    pub dead: u32,
    /// The deliveries' lateness, one count per bucket of [`BOUNDS`].
    pub lateness: [u32; BUCKETS],
    /// The largest lateness, in microseconds.
    pub max_lateness_us: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.pushed = self.pushed.saturating_add(o.pushed);
        self.delivered = self.delivered.saturating_add(o.delivered);
        self.acked = self.acked.saturating_add(o.acked);
        self.dead = self.dead.saturating_add(o.dead);
        for (a, b) in self.lateness.iter_mut().zip(o.lateness) {
            *a = a.saturating_add(b);
        }
        self.max_lateness_us = self.max_lateness_us.max(o.max_lateness_us);
    }

    fn is_empty(&self) -> bool {
        *self == Counts::default()
    }

    /// The number of lateness observations.
    pub fn observed(&self) -> u64 {
        self.lateness.iter().map(|&n| u64::from(n)).sum()
    }

    /// The `q` quantile (0 < q ≤ 1) of the lateness, in seconds, estimated from the histogram
    /// as Prometheus' `histogram_quantile` does (linear within the bucket the rank falls in),
    /// never above the largest lateness seen; `None` without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let count = self.observed();
        if count == 0 {
            return None;
        }
        let max = self.max_lateness_us as f64 / 1e6;
        let rank = (q * count as f64).max(1.0);
        let mut seen = 0.0;
        for (i, &n) in self.lateness.iter().enumerate() {
            let n = f64::from(n);
            if n > 0.0 && seen + n >= rank {
                let low = if i == 0 { 0.0 } else { BOUNDS[i - 1] };
                let high = BOUNDS.get(i).copied().unwrap_or(max);
                return Some((low + (high - low) * (rank - seen) / n).min(max));
            }
            seen += n;
        }
        Some(max)
    }
}

/// The histogram bucket of a lateness.
fn bucket(lateness: Duration) -> usize {
    let s = lateness.as_secs_f64();
    BOUNDS.iter().position(|&b| s <= b).unwrap_or(BOUNDS.len())
}

/// A ring of `N` slots, each holding the counts of one period (a second or a minute) and
/// the period's number, so that a slot of an older turn of the ring is never taken for a
/// recent one.
#[derive(Clone, Debug)]
struct Ring<const N: usize> {
    slots: [(u64, Counts); N],
}

impl<const N: usize> Ring<N> {
    fn new() -> Self {
        // No period is u64::MAX: every slot starts out stale.
        Ring {
            slots: [(u64::MAX, Counts::default()); N],
        }
    }

    fn add(&mut self, period: u64, counts: &Counts) {
        let slot = &mut self.slots[(period % N as u64) as usize];
        if slot.0 != period {
            *slot = (period, Counts::default());
        }
        slot.1.add(counts);
    }

    /// The counts of `period`, zero when the ring does not hold it.
    fn get(&self, period: u64) -> Counts {
        let slot = &self.slots[(period % N as u64) as usize];
        if slot.0 == period {
            slot.1
        } else {
            Counts::default()
        }
    }
}

/// One topic's series.
#[derive(Clone, Debug)]
struct Track {
    /// Recorded since the last sample.
    live: Counts,
    seconds: Ring<SECONDS>,
    minutes: Ring<MINUTES>,
    /// When its last event was recorded (the series' event count then), to drop the least
    /// recently active topic first.
    active: u64,
}

impl Track {
    fn new() -> Self {
        Track {
            live: Counts::default(),
            seconds: Ring::new(),
            minutes: Ring::new(),
            active: 0,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// Boxed: a map's table holds room for more entries than it has.
    topics: HashMap<Topic, Box<Track>>,
    /// Events recorded so far, the clock of "least recently active".
    events: u64,
    /// The latest second sampled: a later sample never files into an earlier second.
    sampled: u64,
    /// Something was recorded since the last sample.
    pending: bool,
}

/// A minute of the chart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Minute {
    /// When it began, on this server's wall clock.
    pub start: SystemTime,
    /// What happened in it.
    pub counts: Counts,
}

/// What [`Series::snapshot`] answers.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// When the series began (this server's start), on its wall clock.
    pub since: SystemTime,
    /// The last [`MINUTES`] minutes (fewer in the server's first hour), oldest first; the last
    /// is the minute in progress.
    pub minutes: Vec<Minute>,
    /// The last minute (the last [`SECONDS`] seconds), summed.
    pub last_minute: Counts,
    /// The minutes of `minutes`, summed.
    pub last_hour: Counts,
}

/// Per-topic counts of what this server did, for the last hour (see the module's docs).
#[derive(Debug)]
pub struct Series {
    /// Second 0 of the series.
    epoch: Instant,
    /// `epoch` on the wall clock.
    since: SystemTime,
    inner: Mutex<Inner>,
    /// Told when something is recorded after a quiet spell: the sampler waits for it.
    wake: Notify,
}

impl Series {
    /// An empty series whose second 0 begins at `epoch`.
    pub fn new(epoch: Instant) -> Self {
        Series {
            epoch,
            since: SystemTime::now()
                .checked_sub(Instant::now().saturating_duration_since(epoch))
                .unwrap_or(SystemTime::UNIX_EPOCH),
            inner: Mutex::new(Inner::default()),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds to a topic's live counts, tracking the topic first (and dropping the least
    /// recently active one when [`MAX_TOPICS`] are tracked).
    fn record(&self, topic: &Topic, f: impl FnOnce(&mut Counts)) {
        let wake = {
            let mut inner = self.lock();
            inner.events += 1;
            let now = inner.events;
            if !inner.topics.contains_key(topic) {
                if inner.topics.len() >= MAX_TOPICS {
                    let oldest = inner
                        .topics
                        .iter()
                        .min_by_key(|(_, t)| t.active)
                        .map(|(t, _)| t.clone());
                    if let Some(oldest) = oldest {
                        inner.topics.remove(&oldest);
                    }
                }
                inner.topics.insert(topic.clone(), Box::new(Track::new()));
            }
            if let Some(track) = inner.topics.get_mut(topic) {
                track.active = now;
                f(&mut track.live);
            }
            !std::mem::replace(&mut inner.pending, true)
        };
        if wake {
            self.wake.notify_one();
        }
    }

    /// Counts `n` jobs created by pushes.
    pub fn pushed(&self, topic: &Topic, n: u64) {
        if n > 0 {
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            self.record(topic, |c| c.pushed = c.pushed.saturating_add(n));
        }
    }

    /// Counts a delivery and its lateness.
    pub fn delivered(&self, topic: &Topic, lateness: Duration) {
        let us = u64::try_from(lateness.as_micros()).unwrap_or(u64::MAX);
        self.record(topic, |c| {
            c.delivered = c.delivered.saturating_add(1);
            let b = &mut c.lateness[bucket(lateness)];
            *b = b.saturating_add(1);
            c.max_lateness_us = c.max_lateness_us.max(us);
        });
    }

    /// Counts an ack.
    pub fn acked(&self, topic: &Topic) {
        self.record(topic, |c| c.acked = c.acked.saturating_add(1));
    }

    /// Counts a job sent to dead.
    pub fn dead(&self, topic: &Topic) {
        self.record(topic, |c| c.dead = c.dead.saturating_add(1));
    }

    /// Drops the topics not in `listed` (the engine's topic list: a purged topic leaves it).
    pub fn retain(&self, listed: &[Topic]) {
        let listed: std::collections::HashSet<&Topic> = listed.iter().collect();
        self.lock().topics.retain(|t, _| listed.contains(t));
    }

    /// The number of topics tracked.
    pub fn topics(&self) -> usize {
        self.lock().topics.len()
    }

    /// The second `at` lies in, or ends: the sample at the end of second `s` (at `epoch +
    /// (s + 1) s`) files under `s`, as does any moment within it.
    fn second(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(nanos.div_ceil(1_000_000_000))
            .unwrap_or(u64::MAX)
            .saturating_sub(1)
    }

    /// Files what was recorded since the last sample under the second `at` ends (or lies in;
    /// never before a second sampled already).
    pub fn sample(&self, at: Instant) {
        let mut inner = self.lock();
        let s = self.second(at).max(inner.sampled);
        inner.sampled = s;
        inner.pending = false;
        for track in inner.topics.values_mut() {
            if !track.live.is_empty() {
                let live = std::mem::take(&mut track.live);
                track.seconds.add(s, &live);
                track.minutes.add(s / 60, &live);
            }
        }
    }

    /// The series at `at` (sampled first, so it includes what was just recorded), of one topic
    /// or, with `None`, of every topic tracked summed. A topic not tracked answers zeros.
    pub fn snapshot(&self, topic: Option<&Topic>, at: Instant) -> Snapshot {
        self.sample(at);
        let inner = self.lock();
        let s = inner.sampled;
        let tracks: Vec<&Track> = match topic {
            Some(t) => inner.topics.get(t).map(|t| &**t).into_iter().collect(),
            None => inner.topics.values().map(|t| &**t).collect(),
        };
        let sum = |f: &dyn Fn(&Track) -> Counts| {
            let mut c = Counts::default();
            for t in &tracks {
                c.add(&f(t));
            }
            c
        };
        let mut last_minute = Counts::default();
        for second in s.saturating_sub(SECONDS as u64 - 1)..=s {
            last_minute.add(&sum(&|t| t.seconds.get(second)));
        }
        let m = s / 60;
        let mut last_hour = Counts::default();
        let minutes = (m.saturating_sub(MINUTES as u64 - 1)..=m)
            .map(|minute| {
                let counts = sum(&|t| t.minutes.get(minute));
                last_hour.add(&counts);
                Minute {
                    start: self.since + Duration::from_secs(minute * 60),
                    counts,
                }
            })
            .collect();
        Snapshot {
            since: self.since,
            minutes,
            last_minute,
            last_hour,
        }
    }

    /// The sampler: once something is recorded, sleeps to the end of the second, samples, and
    /// again; with nothing recorded it waits (it does not wake up every second). Returns when
    /// `shutdown` is cancelled.
    pub async fn run(&self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                () = self.wake.notified() => {}
                () = shutdown.cancelled() => return,
            }
            // Tokio's clock (the same as std's, unless a test paused it).
            let now = tokio::time::Instant::now().into_std();
            let end = self.epoch + Duration::from_secs(self.second(now) + 1);
            tokio::select! {
                () = tokio::time::sleep_until(end.into()) => self.sample(end),
                () = shutdown.cancelled() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

    use super::*;

    fn topic(name: &str) -> Topic {
        Topic::new(name).unwrap()
    }

    fn at(epoch: Instant, secs: u64) -> Instant {
        epoch + Duration::from_secs(secs)
    }

    #[test]
    fn samples_file_under_the_second_they_end() {
        let epoch = Instant::now();
        let s = Series::new(epoch);
        assert_eq!(s.second(epoch), 0);
        assert_eq!(s.second(epoch + Duration::from_millis(300)), 0);
        assert_eq!(s.second(at(epoch, 1)), 0, "the end of second 0");
        assert_eq!(s.second(epoch + Duration::from_millis(1001)), 1);
        assert_eq!(s.second(at(epoch, 61)), 60);
    }

    #[test]
    fn counts_reach_the_minute_and_the_last_minute() {
        let epoch = Instant::now();
        let s = Series::new(epoch);
        let t = topic("orders");
        s.pushed(&t, 3);
        s.delivered(&t, Duration::from_millis(3));
        s.delivered(&t, Duration::from_millis(40));
        s.acked(&t);
        s.dead(&t);
        s.sample(at(epoch, 1));
        let snap = s.snapshot(Some(&t), at(epoch, 30));
        assert_eq!(snap.minutes.len(), 1, "one minute since the start");
        let c = snap.minutes[0].counts;
        assert_eq!((c.pushed, c.delivered, c.acked, c.dead), (3, 2, 1, 1));
        assert_eq!(snap.last_hour, c);
        assert_eq!(snap.last_minute, c);
        // 3 ms is in the (2 ms, 5 ms] bucket, 40 ms in (25 ms, 50 ms].
        assert_eq!(c.lateness[3], 1);
        assert_eq!(c.lateness[6], 1);
        assert_eq!(c.max_lateness_us, 40_000);
        assert_eq!(snap.minutes[0].start, snap.since);

        // A minute later the events are out of the last minute, not out of the hour.
        let snap = s.snapshot(Some(&t), at(epoch, 90));
        assert_eq!(snap.minutes.len(), 2);
        assert_eq!(snap.last_minute, Counts::default());
        assert_eq!(snap.last_hour.pushed, 3);
        assert_eq!(
            snap.minutes[1].start,
            snap.since + Duration::from_secs(60),
            "minute 1"
        );
    }

    #[test]
    fn an_hour_of_samples_wraps_the_rings() {
        let epoch = Instant::now();
        let s = Series::new(epoch);
        let t = topic("orders");
        // One push in each of the first 3660 seconds, sampled at its end.
        for sec in 0..3660 {
            s.pushed(&t, 1);
            s.delivered(&t, Duration::from_millis(if sec < 60 { 2000 } else { 1 }));
            s.sample(at(epoch, sec + 1));
        }
        let snap = s.snapshot(Some(&t), at(epoch, 3660));
        // Minutes 1 to 60 remain; minute 0 (and its slow deliveries) went with the first turn.
        assert_eq!(snap.minutes.len(), MINUTES);
        assert_eq!(snap.minutes[0].start, snap.since + Duration::from_secs(60));
        assert!(snap.minutes.iter().all(|m| m.counts.pushed == 60));
        assert_eq!(snap.last_hour.pushed, 3600);
        assert_eq!(snap.last_minute.pushed, 60);
        assert_eq!(snap.last_hour.max_lateness_us, 1000);
        let p99 = snap.last_hour.quantile(0.99).unwrap();
        assert!((p99 - 0.000995).abs() < 1e-9, "{p99}");

        // Ten quiet minutes later, only the minutes still within the hour count.
        let snap = s.snapshot(Some(&t), at(epoch, 4260));
        assert_eq!(snap.last_hour.pushed, 50 * 60);
        assert_eq!(snap.last_minute, Counts::default());
        assert_eq!(snap.minutes.last().unwrap().counts, Counts::default());
        // Two quiet hours later, nothing.
        let snap = s.snapshot(Some(&t), at(epoch, 3660 + 7200));
        assert_eq!(snap.last_hour, Counts::default());
    }

    #[test]
    fn a_late_sample_files_what_it_missed() {
        let epoch = Instant::now();
        let s = Series::new(epoch);
        let t = topic("orders");
        s.pushed(&t, 1);
        // The sampler was held up for 5 minutes: the push counts in the minute it ran.
        s.sample(at(epoch, 300));
        s.pushed(&t, 1);
        // A sample that would file before one already taken files with it.
        s.sample(at(epoch, 200));
        let snap = s.snapshot(Some(&t), at(epoch, 301));
        assert_eq!(snap.minutes.len(), 6);
        assert_eq!(snap.minutes[4].counts.pushed, 2);
        assert_eq!(snap.last_hour.pushed, 2);
    }

    #[test]
    fn every_topic_is_the_sum_and_unknown_topics_are_empty() {
        let epoch = Instant::now();
        let s = Series::new(epoch);
        s.pushed(&topic("a"), 2);
        s.pushed(&topic("b"), 5);
        s.pushed(&topic("c"), 0);
        let all = s.snapshot(None, at(epoch, 1));
        assert_eq!(all.last_hour.pushed, 7);
        let none = s.snapshot(Some(&topic("nobody")), at(epoch, 1));
        assert_eq!(none.minutes.len(), 1);
        assert_eq!(none.last_hour, Counts::default());
        assert_eq!(none.last_hour.quantile(0.5), None);
        assert_eq!(s.topics(), 2, "a push that created nothing tracks nothing");
    }

    #[test]
    fn topics_are_bounded_and_the_least_recently_active_goes() {
        let epoch = Instant::now();
        let s = Series::new(epoch);
        for i in 0..MAX_TOPICS {
            s.pushed(&topic(&format!("t{i}")), 1);
        }
        // t0 is active again: t1 is now the least recently active.
        s.acked(&topic("t0"));
        s.pushed(&topic("new"), 1);
        assert_eq!(s.topics(), MAX_TOPICS);
        let got = |name: &str| s.snapshot(Some(&topic(name)), at(epoch, 1)).last_hour;
        assert_eq!(got("t1"), Counts::default(), "t1 was dropped");
        assert_eq!(got("t0").acked, 1);
        assert_eq!(got("t2").pushed, 1);
        assert_eq!(got("new").pushed, 1);
    }

    #[test]
    fn a_purged_topic_is_dropped() {
        let epoch = Instant::now();
        let s = Series::new(epoch);
        s.pushed(&topic("gone"), 1);
        s.pushed(&topic("kept"), 1);
        s.sample(at(epoch, 1));
        s.retain(&[topic("kept")]);
        assert_eq!(s.topics(), 1);
        assert_eq!(
            s.snapshot(Some(&topic("gone")), at(epoch, 2)).last_hour,
            Counts::default()
        );
        assert_eq!(s.snapshot(None, at(epoch, 2)).last_hour.pushed, 1);
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket_and_stop_at_the_max() {
        let s = Series::new(Instant::now());
        let t = topic("q");
        // 100 deliveries in (1 ms, 2 ms], the largest 1.5 ms.
        for _ in 0..100 {
            s.delivered(&t, Duration::from_micros(1500));
        }
        let c = s.snapshot(Some(&t), Instant::now()).last_minute;
        assert_eq!(c.observed(), 100);
        let p50 = c.quantile(0.5).unwrap();
        assert!(
            (p50 - 0.0015).abs() < 1e-9,
            "{p50}: halfway into the bucket"
        );
        let p99 = c.quantile(0.99).unwrap();
        assert!((p99 - 0.0015).abs() < 1e-9, "{p99}: capped at the max");
        // Above the last bound, the max is the bucket's top.
        let mut c = Counts::default();
        c.lateness[BOUNDS.len()] = 1;
        c.max_lateness_us = 7_200_000_000;
        assert_eq!(c.quantile(0.5), Some(7200.0));
        let mut c = Counts::default();
        c.lateness[1] = 10; // (0.5 ms, 1 ms]
        c.max_lateness_us = 1000;
        let p50 = c.quantile(0.5).unwrap();
        assert!(
            (p50 - 0.00075).abs() < 1e-9,
            "{p50}: halfway into the bucket"
        );
    }

    #[test]
    fn memory_stays_within_what_the_docs_say() {
        // See the module's "Memory": about 14 KiB per topic, at most about 3.5 MiB.
        let per_topic = std::mem::size_of::<Track>();
        assert!(per_topic <= 14 * 1024, "{per_topic} bytes per topic");
        assert!(per_topic * MAX_TOPICS <= 3584 * 1024);
    }

    #[tokio::test(start_paused = true)]
    async fn the_sampler_sleeps_while_idle_then_files_each_second_at_its_end() {
        let s = std::sync::Arc::new(Series::new(tokio::time::Instant::now().into_std()));
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let s = s.clone();
            let stop = stop.clone();
            async move { s.run(stop).await }
        });
        tokio::time::sleep(Duration::from_millis(2500)).await;
        // Idle, it took no sample (a sample advances `sampled`, with or without events).
        assert_eq!(s.lock().sampled, 0);
        s.pushed(&topic("t"), 1);
        // The sampler files it at the end of second 2, before anyone reads.
        tokio::time::sleep(Duration::from_millis(600)).await;
        let filed = {
            let inner = s.lock();
            (
                inner.sampled,
                inner.topics[&topic("t")].seconds.get(2).pushed,
            )
        };
        assert_eq!(filed, (2, 1));
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(1), task)
            .await
            .unwrap()
            .unwrap();
    }
}
