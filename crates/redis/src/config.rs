//! [`RedisConfig`]: where the Redis engine connects and how it behaves.

use std::path::PathBuf;
use std::time::Duration;

use delayq_core::Limits;

/// Configuration of a [`crate::RedisEngine`].
///
/// ```
/// use delayq_redis::RedisConfig;
/// let cfg = RedisConfig::new("redis://user:secret@127.0.0.1:6379/0").with_prefix("myapp");
/// assert_eq!(cfg.prefix, "myapp");
/// ```
#[derive(Clone, Debug)]
pub struct RedisConfig {
    /// `redis://[user:password@]host[:port][/db]` or `rediss://...` for TLS; a Redis Cluster
    /// as `redis+cluster://[user:password@]host:port,host:port,...` (the seeds: any nodes of
    /// the cluster) or `rediss+cluster://...` for TLS.
    pub url: String,
    /// Prefix of every key (default `delayq`); lets several applications share one Redis.
    pub prefix: String,
    /// Input limits (body size).
    pub limits: Limits,
    /// How long a waiting reserver sleeps at most before it looks again without a signal
    /// (default 30 s, jittered up to 40 % later). It bounds the delay of a job whose wake-up
    /// signal was lost with a crashed process (a reserve that starts looks at once, so a
    /// worker whose long-poll is shorter recovers at its next call); signals lost to a dropped
    /// connection are covered at once: every waiter looks again when the wake connection
    /// comes back.
    pub safety_wake: Duration,
    /// The most expired leases and the most due jobs one function call moves (default 1000),
    /// so that one call never blocks Redis for long.
    pub tick_batch: usize,
    /// How long a command may take before the call fails with `Unavailable` (default 10 s). On a
    /// cluster it bounds a command with all its redirections and retries (MOVED, ASK,
    /// TRYAGAIN, CLUSTERDOWN during a resharding or a failover).
    pub response_timeout: Duration,
    /// How long connecting may take (default 5 s).
    pub connect_timeout: Duration,
    /// On a Redis Cluster, how long an operation that spans several hash slots (a reserve
    /// over topics or partitions of several primaries, an ack batch mixing them) waits for
    /// one slot's primary before it answers without it (default 500 ms; at least 1 ms; the
    /// wait-replicas timeout is added when that option is on). The other slots are answered
    /// as they answer: a reserve hands out their jobs and skips that slot's topics, an ack
    /// batch acks their leases and fails only that slot's, each settlement answering its own
    /// slot's error. A primary that is gone (killed, its port closed) is found out within
    /// milliseconds, not after this timeout: such calls go through a connection of their own
    /// that gives up after two retries (a MOVED after a failover, an ASK during a migration,
    /// are followed; a call the cluster refused unrun, TRYAGAIN or ASK, is sent again through
    /// the main one); this timeout bounds a primary that is hung (connections open, no
    /// answer). The slot is then skipped by such operations, with every other slot of
    /// its primary (its shard, as `CLUSTER SHARDS` tells), so that neither the rest of the
    /// operation nor later calls wait on that primary again: for twice the slot timeout (the
    /// wait-replicas part included; at least 1 s), pushed on for as long as a read of a key in
    /// that slot gets no answer, and ended by an answer or by a call to one of them that
    /// succeeds. A call that timed out may still
    /// run when the primary comes back: the jobs its late reply leased are given back at once.
    /// An operation on one slot alone (one topic, one primary) waits as long as
    /// [`Self::response_timeout`] allows, as on one node, where this setting does nothing.
    pub slot_timeout: Duration,
    /// For `rediss://` URLs: a PEM file with the CA certificate(s) that signed the server's
    /// certificate, when it is not signed by a CA the system trusts.
    pub tls_ca_file: Option<PathBuf>,
    /// For `rediss://` URLs to servers that require client certificates (mutual TLS): PEM
    /// files of the client certificate and its private key.
    pub tls_client_cert: Option<(PathBuf, PathBuf)>,
    /// How many replicas must acknowledge every state-changing call before it answers
    /// success (default 0: none, replication stays asynchronous). Each such call is followed,
    /// in the same pipeline on the same node, by `WAIT <wait_replicas> <wait_timeout>`; fewer
    /// acknowledgements in time answer [`delayq_core::Error::NotReplicated`] (the write was
    /// applied on the primary and may or may not survive a failover; a retry is safe). With
    /// it, a call whose success was answered survives the failover of its primary to an
    /// acknowledging replica. On one primary with replicas as on a cluster.
    pub wait_replicas: usize,
    /// How long a state-changing call waits for [`Self::wait_replicas`] acknowledgements
    /// (default 1 s; at least 1 ms and less than [`Self::response_timeout`]). While it waits,
    /// the calls sharing its connection to that node wait behind it.
    pub wait_timeout: Duration,
}

impl RedisConfig {
    /// The defaults for a URL.
    pub fn new(url: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: "delayq".into(),
            limits: Limits::default(),
            safety_wake: Duration::from_secs(30),
            tick_batch: 1000,
            response_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            slot_timeout: Duration::from_millis(500),
            tls_ca_file: None,
            tls_client_cert: None,
            wait_replicas: 0,
            wait_timeout: Duration::from_secs(1),
        }
    }

    /// Waits for `replicas` replicas to acknowledge every state-changing call, at most
    /// `timeout` each ([`Self::wait_replicas`]).
    pub fn with_wait_replicas(mut self, replicas: usize, timeout: Duration) -> Self {
        self.wait_replicas = replicas;
        self.wait_timeout = timeout;
        self
    }

    /// Sets how long an operation over several cluster slots waits for one of them
    /// ([`Self::slot_timeout`]).
    pub fn with_slot_timeout(mut self, timeout: Duration) -> Self {
        self.slot_timeout = timeout;
        self
    }

    /// Sets the key prefix.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the input limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Trusts the CA certificate(s) in this PEM file for `rediss://` connections.
    pub fn with_tls_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca_file = Some(path.into());
        self
    }

    /// Sets the safety wake interval.
    pub fn with_safety_wake(mut self, d: Duration) -> Self {
        self.safety_wake = d;
        self
    }
}
