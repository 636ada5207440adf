//! The forwarder's metrics, per topic and destination kind: deliveries, failures by cause,
//! the time a destination took to confirm, and lateness (confirmed minus due).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    topic: String,
    destination: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    topic: String,
    destination: String,
    /// Webhook: `status_4xx` (sent to dead), `status_429`, `status_5xx`; RabbitMQ:
    /// `unroutable`, `no_exchange`, `nack`; NATS: `no_stream`; any: `too_large` (sent to
    /// dead), `timeout`, `connect`, `lease_lost`, `other`.
    cause: String,
}

type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// The forwarder's metrics; clones share them.
#[derive(Clone, Debug)]
pub struct PushMetrics {
    deliveries: Family<Labels, Counter>,
    failures: Family<FailureLabels, Counter>,
    latency: Histograms,
    lateness: Histograms,
}

impl Default for PushMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl PushMetrics {
    /// Empty metrics, not yet in a registry.
    pub fn new() -> Self {
        // 1 ms to about 65 s.
        let new_hist: fn() -> Histogram = || Histogram::new(exponential_buckets(0.001, 2.0, 17));
        PushMetrics {
            deliveries: Family::default(),
            failures: Family::default(),
            latency: Histograms::new_with_constructor(new_hist),
            lateness: Histograms::new_with_constructor(new_hist),
        }
    }

    /// Adds them to `registry` (whose prefix, `delayq`, they take).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "push_deliveries",
            "Jobs a destination confirmed, by topic and destination kind",
            self.deliveries.clone(),
        );
        registry.register(
            "push_failures",
            "Sends that failed, by topic, destination kind and cause",
            self.failures.clone(),
        );
        registry.register(
            "push_latency_seconds",
            "How long a destination took to answer a send",
            self.latency.clone(),
        );
        registry.register(
            "push_lateness_seconds",
            "When a destination confirmed a job, minus the job's due time",
            self.lateness.clone(),
        );
    }

    fn labels(topic: &str, kind: &str) -> Labels {
        Labels {
            topic: topic.to_string(),
            destination: kind.to_string(),
        }
    }

    /// Records a confirmed delivery.
    pub(crate) fn delivered(&self, topic: &str, kind: &str, took: Duration, late: Duration) {
        let l = Self::labels(topic, kind);
        self.deliveries.get_or_create(&l).inc();
        self.latency.get_or_create(&l).observe(took.as_secs_f64());
        self.lateness.get_or_create(&l).observe(late.as_secs_f64());
    }

    /// Records a failed send.
    pub(crate) fn failed(&self, topic: &str, kind: &str, cause: &str, took: Option<Duration>) {
        let l = Self::labels(topic, kind);
        if let Some(took) = took {
            self.latency.get_or_create(&l).observe(took.as_secs_f64());
        }
        self.failures
            .get_or_create(&FailureLabels {
                topic: l.topic,
                destination: l.destination,
                cause: cause.to_string(),
            })
            .inc();
    }
}
