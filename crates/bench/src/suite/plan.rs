//! The sizes of a run: the full suite (`all`) and CI's smoke run (`smoke`).

use std::time::Duration;

/// Every size and bound of a run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Plan {
    /// Repetitions of each figure.
    pub reps: usize,
    /// Body size in bytes.
    pub body: usize,
    /// W1: the backlog, the consumer counts, the time cap of one drain.
    pub w1_jobs: usize,
    pub w1_consumers: Vec<usize>,
    pub w1_cap: Duration,
    /// W2: jobs, delay spread, consumers, push batch, give-up time after the first push.
    pub w2_jobs: usize,
    pub w2_spread: Duration,
    pub w2_consumers: usize,
    pub w2_batch: usize,
    pub w2_cap: Duration,
    /// W3: pending jobs.
    pub w3_jobs: usize,
    /// W4: pending levels on Redis, on the embedded engine and on PostgreSQL (absent from
    /// older results), jobs per probe.
    pub w4_levels_redis: Vec<usize>,
    pub w4_levels_embedded: Vec<usize>,
    #[serde(default)]
    pub w4_levels_postgres: Vec<usize>,
    pub w4_probe: usize,
    /// W5: idle workers and how long they idle.
    pub w5_workers: usize,
    pub w5_idle: Duration,
    /// W6: jobs, consumer counts, lease (ttr) for at-least-once.
    pub w6_jobs: usize,
    pub w6_consumers: Vec<usize>,
    pub w6_ttr: Duration,
    /// W8: the backlog of each drain on a cluster and beside it (W2's sizes are W2's).
    #[serde(default)]
    pub w8_jobs: usize,
    /// W8's failover: how long the producers push before the primary is killed.
    #[serde(default)]
    pub w8_before_kill: Duration,
    /// W8's failover under load: jobs over the six topics, and the span of their due times
    /// (absent from older results).
    #[serde(default)]
    pub w8_flow_jobs: usize,
    #[serde(default)]
    pub w8_flow_spread: Duration,
    /// W10 (push to a webhook beside the HTTP pull): jobs in W2's shape (W2's spread and
    /// batch), the backlog of the drain, the webhook's `max_concurrency` (and as many pull
    /// consumers), and the give-up time of each run.
    #[serde(default)]
    pub w10_jobs: usize,
    #[serde(default)]
    pub w10_drain: usize,
    #[serde(default)]
    pub w10_concurrency: usize,
    #[serde(default)]
    pub w10_cap: Duration,
}

impl Plan {
    /// W2's delayed jobs as the driver takes them.
    pub(crate) fn w2_spec(&self) -> delayq_bench::driver::DelayedSpec {
        delayq_bench::driver::DelayedSpec {
            jobs: self.w2_jobs,
            spread: self.w2_spread,
            consumers: self.w2_consumers,
            batch: self.w2_batch,
            body: self.body,
            cap: self.w2_cap,
        }
    }

    /// The full suite: the sizes issue 6 asks for.
    pub(crate) fn full() -> Plan {
        Plan {
            reps: 3,
            body: 100,
            w1_jobs: 100_000,
            w1_consumers: vec![1, 10, 50],
            w1_cap: Duration::from_millis(1500),
            w2_jobs: 100_000,
            w2_spread: Duration::from_secs(5),
            w2_consumers: 50,
            w2_batch: 100,
            w2_cap: Duration::from_secs(20),
            w3_jobs: 1_000_000,
            w4_levels_redis: vec![10_000, 100_000, 1_000_000, 10_000_000],
            w4_levels_embedded: vec![10_000, 100_000, 1_000_000],
            w4_levels_postgres: vec![10_000, 100_000, 1_000_000],
            w4_probe: 20_000,
            w5_workers: 100,
            w5_idle: Duration::from_secs(30),
            w6_jobs: 2_000,
            w6_consumers: vec![1, 10],
            w6_ttr: Duration::from_secs(1),
            w8_jobs: 100_000,
            w8_before_kill: Duration::from_secs(1),
            w8_flow_jobs: 60_000,
            w8_flow_spread: Duration::from_secs(12),
            w10_jobs: 100_000,
            w10_drain: 50_000,
            w10_concurrency: 50,
            w10_cap: Duration::from_secs(30),
        }
    }

    /// CI's smoke run: every system and workload, small.
    pub(crate) fn smoke() -> Plan {
        Plan {
            reps: 1,
            body: 100,
            w1_jobs: 2_000,
            w1_consumers: vec![1, 10],
            w1_cap: Duration::from_millis(1500),
            w2_jobs: 1_000,
            w2_spread: Duration::from_secs(1),
            w2_consumers: 10,
            w2_batch: 100,
            w2_cap: Duration::from_secs(10),
            w3_jobs: 5_000,
            w4_levels_redis: vec![1_000, 5_000],
            w4_levels_embedded: vec![1_000, 5_000],
            w4_levels_postgres: vec![1_000, 5_000],
            w4_probe: 1_000,
            w5_workers: 5,
            w5_idle: Duration::from_secs(2),
            w6_jobs: 300,
            w6_consumers: vec![1, 10],
            w6_ttr: Duration::from_secs(1),
            w8_jobs: 2_000,
            w8_before_kill: Duration::from_millis(200),
            w8_flow_jobs: 3_000,
            w8_flow_spread: Duration::from_secs(6),
            w10_jobs: 1_000,
            w10_drain: 1_000,
            w10_concurrency: 10,
            w10_cap: Duration::from_secs(10),
        }
    }
}
