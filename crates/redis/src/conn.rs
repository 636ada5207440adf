//! The connection to Redis, one node or a cluster: the client (URL, TLS), connecting, the
//! server checks (version, eviction policy), loading the functions library, and running
//! function calls alone or in pipelines, loading the library again when Redis answers that
//! it lost it. `cluster` owns what only a cluster needs (its URL, routing per slot);
//! `replicas` the wait-replicas option (a `WAIT` after each state-changing call);
//! `readiness` what a readiness probe asks (a node answers, a cluster is up); `per_slot`
//! the calls over several cluster slots answered slot by slot, each within the slot timeout;
//! `shards` which slots share a primary (`CLUSTER SHARDS`), so that one found unreachable
//! takes its shard along; `probe` asks a skipped shard's primary until it answers.

mod cluster;
mod per_slot;
mod probe;
mod readiness;
mod replicas;
mod shards;

use delayq_core::{Error, Result};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Client, Cmd, RedisError, RedisResult, Value};

use crate::RedisConfig;
use crate::error::map_redis_err;
use crate::library;
use replicas::{Replicas, writes};

/// The shared multiplexed connection (cheap to clone), which reconnects on its own: to one
/// node, or to a Redis Cluster (one multiplexed connection per node, following MOVED and ASK).
#[derive(Clone)]
pub(crate) struct Conn {
    inner: Inner,
    /// The wait-replicas option, when on.
    replicas: Option<Replicas>,
    /// On a cluster, the slots found unreachable lately, the cluster's shards and the slot
    /// timeout (`per_slot`, `shards`).
    health: SlotHealth,
    /// On a cluster, a second connection that gives up after few retries, for the calls to
    /// one slot that a caller waits for beside other slots' ([`Conn::pipeline_quick`]).
    quick: Option<ClusterConnection>,
}

#[derive(Clone)]
enum Inner {
    Node(ConnectionManager),
    Cluster(ClusterConnection),
}

pub(crate) use cluster::NodeClients;
use per_slot::SlotHealth;
pub(crate) use per_slot::{Among, SlotAnswer};

/// Where the waker opens its dedicated blocking connections (see `wait.rs`).
pub(crate) enum WakeClient {
    /// The node's client: one connection blocks on the wake keys of every topic.
    Node(Client),
    /// Clients for the cluster's nodes: one connection per hash slot with waiters, to the
    /// node that serves it.
    Cluster(NodeClients),
}

impl Conn {
    /// Connects, refuses a server older than Redis 7.0, loads the library (on every primary
    /// of a cluster, whose shards it then reads) and warns when the eviction policy may drop
    /// jobs. Also answers the clients for the waker's own connections.
    pub(crate) async fn connect(config: &RedisConfig) -> Result<(Conn, WakeClient)> {
        let replicas = Replicas::from_config(config)?;
        let health = SlotHealth::new(config)?;
        if cluster::is_cluster_url(&config.url) {
            let (inner, quick) = cluster::connect(config).await?;
            let nodes = cluster::node_clients(config)?;
            let conn = Conn {
                inner,
                replicas,
                health,
                quick: Some(quick),
            };
            // The shards, while the cluster answers, for the first slot found unreachable;
            // a failure only leaves its marks to their slot until a later read succeeds.
            if conn.health.ask_shards() {
                conn.read_shards().await;
            }
            return Ok((conn, WakeClient::Cluster(nodes)));
        }
        let client = client(config)?;
        let addr = client.get_connection_info().addr().to_string();
        let cm_config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(config.response_timeout))
            .set_connection_timeout(Some(config.connect_timeout))
            .set_number_of_retries(3);
        // The first contact is one try, without the connection manager's retries: a Redis
        // that is not up yet fails at once, and the caller decides whether to wait.
        let probe_config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(Some(config.response_timeout));
        let mut probe = client
            .get_multiplexed_async_connection_with_config(&probe_config)
            .await
            .map_err(|e| connect_error(&addr, e))?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut probe)
            .await
            .map_err(|e| connect_error(&addr, e))?;
        drop(probe);
        check_version(&info)?;
        check_not_a_cluster_node(&info, &addr)?;
        let mut cm = client
            .get_connection_manager_with_config(cm_config)
            .await
            .map_err(|e| connect_error(&addr, e))?;
        load(&mut cm)
            .await
            .map_err(|e| map_redis_err("loading the delayq functions", e))?;
        warn_on_eviction(&mut cm).await;
        Ok((
            Conn {
                inner: Inner::Node(cm),
                replicas,
                health,
                quick: None,
            },
            WakeClient::Node(client),
        ))
    }

    /// Runs a plain command (not a function call), routed by its first key on a cluster
    /// (a keyless one goes to any node).
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &self,
        cmd: &Cmd,
        what: &'static str,
    ) -> Result<T> {
        let r = match &self.inner {
            Inner::Node(cm) => cmd.query_async(&mut cm.clone()).await,
            Inner::Cluster(c) => cmd.query_async(&mut c.clone()).await,
        };
        r.map_err(|e| map_redis_err(what, e))
    }

    /// Runs a plain command that changes state (the topic registry's `SADD`), followed by
    /// `WAIT` when the wait-replicas option is on ([`crate::RedisConfig::wait_replicas`]).
    pub(crate) async fn write<T: redis::FromRedisValue>(
        &self,
        cmd: &Cmd,
        what: &'static str,
    ) -> Result<T> {
        let Some(replicas) = self.replicas else {
            return self.query(cmd, what).await;
        };
        let mut pipe = redis::pipe();
        pipe.add_command(cmd.clone())
            .add_command(replicas.wait_cmd());
        let r: RedisResult<(T, Value)> = match &self.inner {
            Inner::Node(cm) => pipe.query_async(&mut cm.clone()).await,
            Inner::Cluster(c) => pipe.query_async(&mut c.clone()).await,
        };
        let (reply, acked) = r.map_err(|e| map_redis_err(what, e))?;
        replicas.check(&acked)?;
        Ok(reply)
    }

    /// Runs one function call; when Redis answers that the function is missing (restarted
    /// without persistence, `FUNCTION FLUSH`, a failover to a node that lacks it), loads the
    /// library on the node that answered and calls again, once. A call that changes state
    /// is followed by `WAIT` when the wait-replicas option is on.
    pub(crate) async fn call(&self, cmd: &Cmd, what: &'static str) -> Result<Value> {
        let mut target = match &self.inner {
            Inner::Node(cm) => Target::Node(cm.clone()),
            Inner::Cluster(c) => Target::slot_of(c, cmd),
        };
        let wait = self.replicas.filter(|_| writes(cmd));
        let r = match target.cmd(cmd, wait).await {
            Err(e) if is_missing(&e) => match target.load().await {
                Ok(()) => target.cmd(cmd, wait).await,
                Err(e) => Err(e),
            },
            r => r,
        };
        let (reply, acked) = r.map_err(|e| map_redis_err(what, e))?;
        if let (Some(replicas), Some(acked)) = (wait, acked) {
            replicas.check(&acked)?;
        }
        Ok(reply)
    }

    /// Runs several function calls in one round trip: one pipeline on a node; on a cluster
    /// one pipeline per slot (in their given order), the slots' concurrently. When some come
    /// back "function not found", the library is loaded and just those calls are resent
    /// (the others ran). When the wait-replicas option is on, each pipeline with a call that
    /// changes state ends with `WAIT`; too few acknowledgements on any node fail the whole
    /// call with `NotReplicated` (every call ran).
    pub(crate) async fn pipeline(&self, cmds: &[Cmd], what: &'static str) -> Result<Vec<Value>> {
        let piped = match &self.inner {
            Inner::Node(cm) => Target::Node(cm.clone()).pipeline(cmds, self.replicas).await,
            Inner::Cluster(c) => cluster::pipeline(c, cmds, self.replicas).await,
        };
        self.replies(piped, what)
    }

    /// As [`Conn::pipeline`], on a cluster through the connection that gives up after few
    /// retries: a call to a killed primary fails within milliseconds instead of being tried
    /// again until the caller's bound cuts it. A call the cluster refused without running it
    /// while slots move (`cluster::refused_unrun`) is sent again through the other
    /// connection.
    pub(crate) async fn pipeline_quick(
        &self,
        cmds: &[Cmd],
        what: &'static str,
    ) -> Result<Vec<Value>> {
        let Some(quick) = &self.quick else {
            return self.pipeline(cmds, what).await;
        };
        match cluster::pipeline(quick, cmds, self.replicas).await {
            Err(e) if cluster::refused_unrun(&e) => self.pipeline(cmds, what).await,
            piped => self.replies(piped, what),
        }
    }

    /// A pipeline's replies, each error as the contract's; too few acknowledgements of a
    /// `WAIT` fail the whole call with `NotReplicated`.
    fn replies(&self, piped: RedisResult<Piped>, what: &'static str) -> Result<Vec<Value>> {
        let Piped { replies, acked } = piped.map_err(|e| map_redis_err(what, e))?;
        if let Some(replicas) = self.replicas {
            for acked in &acked {
                replicas.check(acked)?;
            }
        }
        replies
            .into_iter()
            .map(|v| match v {
                Value::ServerError(e) => Err(map_redis_err(what, e.into())),
                v => Ok(v),
            })
            .collect()
    }
}

/// The replies of a pipeline, in the order of its calls, and the answers of the `WAIT`s
/// that followed them (one per node or slot that had a call changing state).
pub(crate) struct Piped {
    pub(crate) replies: Vec<Value>,
    pub(crate) acked: Vec<Value>,
}

/// Where a call or a pipeline goes: the one node, or the primary of one cluster slot.
enum Target {
    Node(ConnectionManager),
    /// A cluster connection and the route of the calls' slot (`None`: keyless, any node).
    Slot(ClusterConnection, Option<redis::cluster_routing::Route>),
}

impl Target {
    /// The slot of `cmd`'s keys, as redis-rs routes it (an `FCALL`'s first key after numkeys).
    fn slot_of(c: &ClusterConnection, cmd: &Cmd) -> Target {
        Target::Slot(c.clone(), cluster::route(cmd))
    }

    /// Runs `cmd`, followed in the same pipeline by `WAIT` when `wait` is set; answers
    /// the reply and the `WAIT`'s answer.
    async fn cmd(
        &mut self,
        cmd: &Cmd,
        wait: Option<Replicas>,
    ) -> RedisResult<(Value, Option<Value>)> {
        let Some(replicas) = wait else {
            let reply = match self {
                Target::Node(cm) => cmd.query_async(cm).await?,
                Target::Slot(c, _) => cmd.query_async(c).await?,
            };
            return Ok((reply, None));
        };
        let mut pipe = redis::pipe();
        pipe.add_command(cmd.clone())
            .add_command(replicas.wait_cmd());
        let (reply, acked): (Value, Value) = match self {
            Target::Node(cm) => pipe.query_async(cm).await?,
            Target::Slot(c, _) => pipe.query_async(c).await?,
        };
        Ok((reply, Some(acked)))
    }

    /// Loads the library where the calls go: the node, the slot's primary, or (keyless)
    /// every primary.
    async fn load(&mut self) -> RedisResult<()> {
        match self {
            Target::Node(cm) => load(cm).await,
            Target::Slot(c, Some(route)) => cluster::load_on(c, *route).await,
            Target::Slot(c, None) => load(c).await,
        }
    }

    /// The calls in one pipeline, errors kept as values; those answering "function not
    /// found" are resent once after loading the library. With `wait`, a pipeline holding a
    /// call that changes state ends with `WAIT`; the last one sent is answered (it covers
    /// every write before it on the connection).
    async fn pipeline(&mut self, cmds: &[Cmd], wait: Option<Replicas>) -> RedisResult<Piped> {
        let (mut replies, mut acked) = self.send(cmds, wait).await?;
        let missing: Vec<usize> = replies
            .iter()
            .enumerate()
            .filter(|(_, v)| is_missing_reply(v))
            .map(|(i, _)| i)
            .collect();
        if !missing.is_empty() {
            self.load().await?;
            let retry: Vec<Cmd> = missing.iter().map(|&i| cmds[i].clone()).collect();
            let (again, again_acked) = self.send(&retry, wait).await?;
            for (i, v) in missing.into_iter().zip(again) {
                replies[i] = v;
            }
            acked = again_acked.or(acked);
        }
        Ok(Piped {
            replies,
            acked: acked.into_iter().collect(),
        })
    }

    /// One pipeline of `cmds`, errors kept as values, then `WAIT` when `wait` is set and
    /// a call changes state; answers the calls' replies and the `WAIT`'s answer.
    async fn send(
        &mut self,
        cmds: &[Cmd],
        wait: Option<Replicas>,
    ) -> RedisResult<(Vec<Value>, Option<Value>)> {
        let mut pipe = redis::pipe();
        for cmd in cmds {
            pipe.add_command(cmd.clone());
        }
        let wait = wait.filter(|_| cmds.iter().any(writes));
        if let Some(replicas) = wait {
            pipe.add_command(replicas.wait_cmd());
        }
        pipe.ignore_errors();
        let mut replies: Vec<Value> = match self {
            Target::Node(cm) => pipe.query_async(cm).await?,
            Target::Slot(c, _) => pipe.query_async(c).await?,
        };
        // A pipeline answers every command; a short one is reported by `Replicas::check`.
        let acked = wait.map(|_| {
            if replies.len() == cmds.len() + 1 {
                replies.pop().unwrap_or(Value::Nil)
            } else {
                Value::Nil
            }
        });
        Ok((replies, acked))
    }
}

/// The error of a failed connect to `addr` (`host:port`), in one clause that says what was
/// found there: nothing listening, no answer, a name that does not resolve, or a server that
/// does not speak the Redis protocol (an HTTP port, say: [`Error::InvalidConfig`], since
/// waiting will not help). The redis-rs error stays the source, out of the message, so that
/// a report printing the message and its sources does not repeat the cause.
/// A plain `redis://` URL pointed at a node of a Redis Cluster would connect, then answer
/// every call of a topic on another node's slots `MOVED`: refused at connect instead, with
/// the URL to use.
fn check_not_a_cluster_node(info: &str, addr: &str) -> Result<()> {
    if info.lines().any(|l| l.trim() == "redis_mode:cluster") {
        return Err(Error::InvalidConfig {
            reason: format!(
                "the Redis at {addr} is a node of a Redis Cluster; use redis+cluster://{addr} (rediss+cluster:// for TLS) so that each topic goes to the node that holds it"
            ),
        });
    }
    Ok(())
}

fn connect_error(addr: &str, e: RedisError) -> Error {
    // A database index the server does not have (`redis://host/99` with `databases 16`)
    // fails the connection's SELECT: a configuration error, which waiting does not fix.
    if e.to_string().contains("DB index is out of range") {
        return Error::InvalidConfig {
            reason: format!(
                "the Redis at {addr} has no such database: the URL's database index is out of range (Redis has 16 by default, 0 to 15, its `databases` setting); use a smaller index, e.g. redis://{addr}/0"
            ),
        };
    }
    let message = if e.is_connection_refusal() {
        format!("connecting to Redis at {addr}: connection refused (nothing listens there)")
    } else if e.is_timeout() {
        format!("connecting to Redis at {addr}: no answer in time")
    } else if matches!(
        e.kind(),
        redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType
    ) {
        return Error::InvalidConfig {
            reason: format!(
                "the server at {addr} is not a Redis server (it answered in another protocol, HTTP perhaps); check the host and port of the Redis URL"
            ),
        };
    } else if e.to_string().contains("lookup address") {
        format!("connecting to Redis at {addr}: the host name does not resolve")
    } else if e.is_io_error() {
        format!("connecting to Redis at {addr}: {e}")
    } else {
        return map_redis_err(&format!("connecting to Redis at {addr}"), e);
    };
    Error::unavailable(message, e)
}

/// Builds the redis-rs client from the URL and the TLS files.
fn client(config: &RedisConfig) -> Result<Client> {
    let tls = config.url.starts_with("rediss://");
    let bad_url = |e: redis::RedisError| Error::InvalidConfig {
        reason: format!(
            "cannot use the Redis URL: {e}; use redis://[user:password@]host[:port][/db], or rediss:// for TLS"
        ),
    };
    match tls_certificates(config, tls)? {
        None => Client::open(config.url.as_str()).map_err(bad_url),
        Some(certs) => Client::build_with_tls(config.url.as_str(), certs).map_err(bad_url),
    }
}

/// The TLS files of `config` (`tls`: the URL asks for TLS), read; `None` when there are none
/// (the system's roots then). Refuses files without a TLS URL. Installs the ring crypto
/// provider for a TLS URL: redis-rs leaves that choice to the application; ring needs no C
/// toolchain, and an application that installed its own provider keeps it.
fn tls_certificates(config: &RedisConfig, tls: bool) -> Result<Option<redis::TlsCertificates>> {
    if !tls {
        if config.tls_ca_file.is_some() || config.tls_client_cert.is_some() {
            return Err(Error::InvalidConfig {
                reason: "TLS certificate files are set but the URL is not rediss:// (or rediss+cluster://); use a TLS URL".into(),
            });
        }
        return Ok(None);
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    if config.tls_ca_file.is_none() && config.tls_client_cert.is_none() {
        return Ok(None);
    }
    let read = |path: &std::path::Path, what: &str| {
        std::fs::read(path).map_err(|e| Error::InvalidConfig {
            reason: format!("cannot read the TLS {what} file {}: {e}", path.display()),
        })
    };
    let root_cert = match &config.tls_ca_file {
        Some(p) => Some(read(p, "CA certificate")?),
        None => None,
    };
    let client_tls = match &config.tls_client_cert {
        Some((cert, key)) => Some(redis::ClientTlsConfig {
            client_cert: read(cert, "client certificate")?,
            client_key: read(key, "client key")?,
        }),
        None => None,
    };
    Ok(Some(redis::TlsCertificates {
        client_tls,
        root_cert,
    }))
}

/// Warns when Redis may evict delayq's keys.
async fn warn_on_eviction<C: redis::aio::ConnectionLike>(conn: &mut C) {
    let policy: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(conn)
        .await;
    match policy {
        Ok(kv) => {
            if let Some(p) = kv.get(1).filter(|p| may_evict_jobs(p)) {
                tracing::warn!(
                    maxmemory_policy = %p,
                    "Redis may evict any key when it reaches maxmemory: delayq jobs would vanish silently; set maxmemory-policy noeviction"
                );
            }
        }
        Err(e) => {
            tracing::debug!(error = %e, "cannot read maxmemory-policy (CONFIG may be disabled)")
        }
    }
}

/// True for eviction policies that can remove delayq's keys. delayq's keys have no TTL, so
/// the `volatile-*` policies never pick them; `allkeys-*` ones may.
fn may_evict_jobs(policy: &str) -> bool {
    policy.starts_with("allkeys-")
}

/// The oldest Redis with Functions (`FUNCTION LOAD`, `FCALL`).
const MIN_VERSION: (u32, u32) = (7, 0);

/// Loads (or replaces) the library on the connection's server (every primary of a cluster),
/// checking the name it answers.
async fn load<C: redis::aio::ConnectionLike>(con: &mut C) -> RedisResult<()> {
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(library::SOURCE)
        .query_async(con)
        .await?;
    check_loaded(&name)
}

/// Checks the library name `FUNCTION LOAD` answered.
fn check_loaded(name: &str) -> RedisResult<()> {
    if name != library::NAME {
        return Err(RedisError::from((
            redis::ErrorKind::Client,
            "FUNCTION LOAD answered another library name",
            format!("expected {}, got {name}", library::NAME),
        )));
    }
    Ok(())
}

/// True for the error `FCALL` answers when the function is not loaded: a Redis restarted
/// without persistence, a `FUNCTION FLUSH`, a failover to a replica that lacks it.
fn is_missing(e: &RedisError) -> bool {
    e.detail().is_some_and(is_missing_message) || is_missing_message(&e.to_string())
}

/// [`is_missing`] for one reply of a pipeline (with errors kept as values).
fn is_missing_reply(v: &Value) -> bool {
    match v {
        Value::ServerError(e) => {
            e.details().is_some_and(is_missing_message) || is_missing_message(e.code())
        }
        _ => false,
    }
}

fn is_missing_message(s: &str) -> bool {
    s.contains("Function not found")
}

/// Refuses a server older than Redis 7.0, whose `INFO server` is `info`, with a message
/// saying what was found and what is needed.
fn check_version(info: &str) -> Result<()> {
    let found = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("redis_version:"))
        .unwrap_or("unknown");
    let mut parts = found.split('.').map(|p| p.parse::<u32>().ok());
    let major_minor = match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => Some((major, minor)),
        _ => None,
    };
    match major_minor {
        Some(v) if v >= MIN_VERSION => Ok(()),
        _ => Err(Error::InvalidConfig {
            reason: format!(
                "the Redis server is version {found}; delayq needs Redis 7.0 or newer (it runs as a Redis Functions library); upgrade Redis"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_policies() {
        for p in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
            assert!(may_evict_jobs(p), "{p}");
        }
        for p in [
            "noeviction",
            "volatile-lru",
            "volatile-ttl",
            "volatile-random",
        ] {
            assert!(!may_evict_jobs(p), "{p}");
        }
    }

    #[test]
    fn versions_before_7_are_refused_with_what_was_found() {
        let info = |v: &str| format!("# Server\r\nredis_version:{v}\r\nredis_mode:standalone\r\n");
        assert!(check_version(&info("7.0.15")).is_ok());
        assert!(check_version(&info("8.6.2")).is_ok());
        for old in ["6.2.14", "5.0.7", "garbage"] {
            match check_version(&info(old)) {
                Err(Error::InvalidConfig { reason }) => {
                    assert!(reason.contains(old), "{reason}");
                    assert!(reason.contains("7.0 or newer"), "{reason}");
                }
                other => panic!("{old}: {other:?}"),
            }
        }
        assert!(check_version("no version here").is_err());
    }

    #[test]
    fn connect_errors_say_what_was_found_once() {
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        match connect_error("127.0.0.1:1", refused) {
            Error::Unavailable { message, .. } => {
                assert_eq!(
                    message,
                    "connecting to Redis at 127.0.0.1:1: connection refused (nothing listens there)"
                );
            }
            other => panic!("{other:?}"),
        }
        let http = RedisError::from((
            redis::ErrorKind::Parse,
            "Parse error at 1",
            "Unexpected `33`".to_string(),
        ));
        match connect_error("127.0.0.1:8080", http) {
            Error::InvalidConfig { reason } => {
                assert!(reason.contains("not a Redis server"), "{reason}");
                assert!(!reason.contains("33"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn missing_function_is_recognised() {
        let e = RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "An error was signalled by the server",
            "Function not found".to_string(),
        ));
        assert!(is_missing(&e));
    }
}

/// Fuzzed Redis URLs (issue 17): any string is a client or `InvalidConfig`.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: delayq_testkit::fuzz_cases(512), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_redis_url_is_a_client_or_invalid_config(
            scheme in prop::sample::select(vec!["redis://", "rediss://", "redis+unix://", "unix://", "", "http://"]),
            rest in prop_oneof![any::<String>(), "[a-z0-9:@/.%?=&\\[\\]-]{0,40}"],
        ) {
            let url = format!("{scheme}{rest}");
            if let Err(e) = client(&RedisConfig::new(url)) {
                prop_assert!(matches!(e, Error::InvalidConfig { .. }), "{e:?}");
            }
        }
    }
}
