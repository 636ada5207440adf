//! What the worker cases need from an engine ([`Backend`]), the `worker_suite!` macro that
//! instantiates every case for one engine, and small helpers.

pub mod cases;
pub mod cluster;
pub mod counting;
pub mod postgres;
pub mod redis;
pub mod sqlite;

use std::future::Future;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use delayq_core::{Engine, JobId, Store, Topic, TopicConfig};

/// One engine under test: a fresh store per test, owned by the test.
#[async_trait]
pub trait Backend: Send + Sync + Sized + 'static {
    /// The engine.
    type Engine: Store + Clone;

    /// Starts a fresh store (its own `redis-server`, its own data directory, or a key
    /// prefix of its own on a shared cluster) for the test `name` (its module path).
    async fn start(name: &str) -> Self;

    /// A handle on the store (another client of the same Redis; for an embedded engine,
    /// the handle of the one engine that owns the directory).
    async fn open(&self) -> Self::Engine;

    /// What a child process needs to open the same store (a URL, a directory).
    fn address(&self) -> String;

    /// Opens the store at `address`; called in a child process.
    async fn open_address(address: &str) -> Self::Engine;

    /// Drops every handle this backend keeps, so another process can open the store
    /// (an embedded engine owns its directory). The next `open` opens it again.
    async fn close(&self);

    /// The partition count the cases' topics get (`None`: left unset, one partition).
    fn partitions() -> Option<u16> {
        None
    }

    /// A topic for a case: `name`, given [`Backend::partitions`] while it is empty.
    async fn topic(&self, name: &str) -> Topic {
        let t = topic(name);
        if let Some(n) = Self::partitions() {
            let config = TopicConfig {
                partitions: Some(n),
                ..TopicConfig::default()
            };
            self.open()
                .await
                .set_topic_config(&t, &config)
                .await
                .unwrap_or_else(|e| panic!("giving {t} {n} partitions: {e}"));
        }
        t
    }
}

/// A backend whose cases run on topics of 8 partitions (issue 18).
pub struct Partitioned<B>(B);

#[async_trait]
impl<B: Backend> Backend for Partitioned<B> {
    type Engine = B::Engine;

    async fn start(name: &str) -> Self {
        Partitioned(B::start(name).await)
    }

    async fn open(&self) -> Self::Engine {
        self.0.open().await
    }

    fn address(&self) -> String {
        self.0.address()
    }

    async fn open_address(address: &str) -> Self::Engine {
        B::open_address(address).await
    }

    async fn close(&self) {
        self.0.close().await
    }

    fn partitions() -> Option<u16> {
        Some(8)
    }
}

/// Makes one `#[tokio::test]` per case of `support::cases` for a [`Backend`] type.
macro_rules! worker_suite {
    ($backend:ty) => {
        $crate::support::worker_suite!(@cases $backend;
            concurrency_limit_is_never_exceeded,
            leases_held_never_exceed_prefetch,
            a_buffered_job_starts_with_enough_lease_left,
            shutdown_releases_the_buffer_at_once,
            one_handler_runs_jobs_in_the_engines_order,
            two_workers_share_a_short_queue,
            panic_retries_then_dead_and_the_worker_carries_on,
            permanent_error_is_dead_at_the_first_failure,
            renewal_keeps_a_long_handler_alive,
            shutdown_releases_jobs_to_another_worker_at_once,
            killed_worker_jobs_come_back_after_the_ttr,
            deleting_a_running_job_cancels_its_handler_issue_14,
            two_schedulers_push_one_job_per_fire_issue_14,
            late_fires_are_pushed_and_a_replaced_schedule_forgets_its_old_fire_issue_14,
            a_refused_schedule_changes_nothing_and_stops_no_other_issue_14,
        );
    };
    (@cases $backend:ty; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let name = concat!(module_path!(), "::", stringify!($case));
                $crate::support::cases::$case::<$backend>(name).await;
            }
        )*
    };
}
pub(crate) use worker_suite;

pub fn topic(name: &str) -> Topic {
    Topic::new(name).unwrap()
}

pub fn id(name: &str) -> JobId {
    JobId::new(name).unwrap()
}

/// Polls `check` every 20 ms until it returns true; panics with `what` after `limit`.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Awaits `fut`, panicking with `what` after `limit`.
pub async fn within<T>(limit: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("timed out after {limit:?} waiting for {what}"))
}
