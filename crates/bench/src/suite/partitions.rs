//! W9: one hot topic on a Redis Cluster of 3 primaries, with 1 partition and with 6, in the
//! same run (issue 18).
//!
//! Every peer keeps one queue in one slot, so one hot queue is capped by one Redis core
//! however large the cluster is. On one cluster (no replicas), one after the other: the topic
//! with one partition, then a topic with 6 (2 per primary); on each, W1's drain (C = 50) and
//! W2's delayed delivery, as W8 runs them. For each run: jobs/s, lateness p99 (W2), and each
//! primary's CPU and commands per job, whose spread says whether the partitions share the
//! load (the goal: within ±15 % of the primaries' mean with 6 partitions).

use delayq::{Topic, TopicConfig};
use delayq_testkit::RedisCluster;

use super::cluster::{ClusterRow, Store, connect, delayed_run, drain_run};
use super::plan::Plan;

/// The partition counts W9 compares.
const COUNTS: [u16; 2] = [1, 6];

/// The deployment name of a W9 row with `n` partitions.
pub(crate) fn deployment(n: u16) -> String {
    match n {
        1 => "cluster, 3 primaries, 1 partition".into(),
        n => format!("cluster, 3 primaries, {n} partitions"),
    }
}

/// W9: W1 (C = 50) then W2 on one topic of each partition count, `plan.reps` times each.
pub(crate) async fn w9(plan: &Plan) -> anyhow::Result<Vec<ClusterRow>> {
    let store =
        Store::Cluster(tokio::task::spawn_blocking(|| RedisCluster::start_with_replicas(0)).await?);
    let engine = connect(&store.url(), 0).await?;
    let mut rows = Vec::new();
    for n in COUNTS {
        let name = deployment(n);
        let topic = Topic::new(format!("w9-hot-{n}"))?;
        let config = TopicConfig {
            partitions: (n > 1).then_some(n),
            ..TopicConfig::default()
        };
        engine.set_topic_config(&topic, &config).await?;
        let topics = [topic];
        rows.push(drain_run(&store, &engine, &topics, plan, ("W9", &name)).await?);
        rows.push(delayed_run(&store, &engine, &topics, plan, ("W9", &name)).await?);
    }
    Ok(rows)
}

/// How far the most and the least loaded primary are from the primaries' mean, in % of the
/// mean: `(below, above)`, from each primary's median of `of`.
pub(crate) fn spread_pct(
    row: &ClusterRow,
    of: impl Fn(&super::cluster::NodeLoad) -> f64,
) -> (f64, f64) {
    let loads: Vec<f64> = row
        .nodes
        .iter()
        .filter(|n| n.node.starts_with("primary"))
        .map(of)
        .collect();
    let mean = loads.iter().sum::<f64>() / loads.len().max(1) as f64;
    if mean <= 0.0 {
        return (0.0, 0.0);
    }
    let min = loads.iter().copied().fold(f64::INFINITY, f64::min);
    let max = loads.iter().copied().fold(0.0, f64::max);
    ((min / mean - 1.0) * 100.0, (max / mean - 1.0) * 100.0)
}
