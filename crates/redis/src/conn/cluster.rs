//! What only a Redis Cluster needs: its URL (`redis+cluster://h1:p1,h2:p2`), the cluster
//! client with explicit timeouts and retries, loading the library on every primary or on one
//! slot's primary, and pipelines cut per slot.
//!
//! redis-rs refuses a pipeline whose commands lie in different slots (it routes a pipeline by
//! its first key and answers `CROSSSLOT` on the client side), so [`pipeline`] sends one
//! pipeline per slot, concurrently, each keeping its calls' order. Every delayq call touches
//! one topic's keys, which share the topic's hash tag, so a call is always one slot; redis-rs
//! routes an `FCALL` by its first key after numkeys (tested in `tests/cluster/`).

use std::collections::HashMap;
use std::time::Duration;

use delayq_core::{Error, Result};
use futures_util::future::try_join_all;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, TlsCertificates, Value};

use super::replicas::Replicas;
use super::{
    Inner, Piped, Target, check_loaded, check_version, tls_certificates, warn_on_eviction,
};
use crate::RedisConfig;
use crate::error::map_redis_err;
use crate::library;

const SCHEME: &str = "redis+cluster://";
const TLS_SCHEME: &str = "rediss+cluster://";

/// The shortest and longest pause between two tries of a command the cluster asked to retry
/// (`TRYAGAIN` during a slot migration, `CLUSTERDOWN` during a failover); redis-rs's default
/// shortest pause is 1.28 s, far longer than a migration of a delayq topic takes.
const MIN_RETRY_WAIT_MS: u64 = 10;
const MAX_RETRY_WAIT_MS: u64 = 500;
/// Tries of one command; the caller's `response_timeout` bounds them all together (48
/// pauses of 10 to 500 ms outlast the default 10 s). At most 59: redis-rs computes each
/// pause as 10 ms · 2^(try + 1) before it clamps it, and from 61 tries that product overflows
/// a u64, which panics in redis-rs's connection task in a build with overflow checks (the
/// benchmarks' smoke met it in CI: a call to a killed primary burns its tries quickly, as
/// each reconnect to the dead address is refused at once).
const RETRIES: u32 = 48;
/// Retries of the second connection ([`connect`]'s), which carries the calls to one slot
/// that a caller waits for beside other slots' (`Conn::bounded`): enough to follow a MOVED
/// after a failover or an ASK during a slot migration, few enough that a call to a killed
/// primary fails within milliseconds (its address refuses the connection, and the other
/// nodes answer MOVED to it). With [`RETRIES`] such a call is tried again and again until
/// the slot timeout cuts it (redis-rs puts a call whose connection broke back to pending).
const QUICK_RETRIES: u32 = 2;

/// Clients for single nodes of the cluster by address, with the URL's scheme, credentials
/// and TLS files: the waker's blocking connections (`wait.rs`), which go to the node that
/// serves a slot and follow its MOVED answers there.
#[derive(Clone)]
pub(crate) struct NodeClients {
    /// `host:port` of every seed, where a wait starts (any node answers MOVED to the owner).
    seeds: Vec<String>,
    /// `redis://[user:password@]` or `rediss://[user:password@]`.
    prefix: String,
    certs: Option<redis::TlsCertificates>,
}

impl NodeClients {
    /// `host:port` of every seed of the URL.
    pub(crate) fn seeds(&self) -> &[String] {
        &self.seeds
    }

    /// A client for the node at `addr` (`host:port`).
    pub(crate) fn client(&self, addr: &str) -> RedisResult<redis::Client> {
        let url = format!("{}{addr}", self.prefix);
        match &self.certs {
            None => redis::Client::open(url),
            Some(certs) => redis::Client::build_with_tls(url, certs.clone()),
        }
    }
}

/// The [`NodeClients`] of a cluster URL.
pub(super) fn node_clients(config: &RedisConfig) -> Result<NodeClients> {
    let (urls, tls) = seeds(&config.url)?;
    let certs = tls_certificates(config, tls)?;
    let split = |u: &str| -> (String, String) {
        let (scheme, rest) = u.split_once("://").unwrap_or(("redis", u));
        match rest.rsplit_once('@') {
            Some((user, host)) => (format!("{scheme}://{user}@"), host.to_string()),
            None => (format!("{scheme}://"), rest.to_string()),
        }
    };
    let prefix = urls.first().map(|u| split(u).0).unwrap_or_default();
    Ok(NodeClients {
        seeds: urls.iter().map(|u| split(u).1).collect(),
        prefix,
        certs,
    })
}

/// True for `redis+cluster://` and `rediss+cluster://` URLs.
pub(super) fn is_cluster_url(url: &str) -> bool {
    url.starts_with(SCHEME) || url.starts_with(TLS_SCHEME)
}

/// The seed URLs of a cluster URL, `redis[s]+cluster://[user:password@]h1:p1,h2:p2[/]`,
/// each as a one-node URL carrying the credentials, and whether they use TLS.
fn seeds(url: &str) -> Result<(Vec<String>, bool)> {
    let bad = |why: &str| Error::InvalidConfig {
        reason: format!(
            "cannot use the Redis Cluster URL: {why}; use redis+cluster://[user:password@]host:port,host:port,... (rediss+cluster:// for TLS)"
        ),
    };
    let (rest, tls) = match (url.strip_prefix(SCHEME), url.strip_prefix(TLS_SCHEME)) {
        (Some(rest), _) => (rest, false),
        (_, Some(rest)) => (rest, true),
        _ => {
            return Err(bad(
                "it does not start with redis+cluster:// or rediss+cluster://",
            ));
        }
    };
    let rest = match rest.split_once('/') {
        None => rest,
        Some((hosts, "" | "0")) => hosts,
        Some(_) => {
            return Err(bad(
                "a cluster has only database 0, so the URL takes no other /db",
            ));
        }
    };
    let (userinfo, hosts) = match rest.rsplit_once('@') {
        Some((user, hosts)) => (Some(user), hosts),
        None => (None, rest),
    };
    let scheme = if tls { "rediss" } else { "redis" };
    let seeds: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| match userinfo {
            Some(u) => format!("{scheme}://{u}@{h}"),
            None => format!("{scheme}://{h}"),
        })
        .collect();
    if seeds.is_empty() {
        return Err(bad("it names no node"));
    }
    Ok((seeds, tls))
}

/// Connects to the cluster through its seeds, checks every primary's version, loads the
/// library on every primary, and warns when the eviction policy may drop jobs. Answers the
/// connection for every call, and a second one, with [`QUICK_RETRIES`], for the calls to one
/// slot that a caller waits for beside other slots'.
pub(super) async fn connect(config: &RedisConfig) -> Result<(Inner, ClusterConnection)> {
    let (seeds, tls) = seeds(&config.url)?;
    let certs = tls_certificates(config, tls)?;
    let nodes = seeds
        .iter()
        .map(|s| s.split_once("://").map_or(s.as_str(), |(_, rest)| rest))
        .map(|s| s.rsplit_once('@').map_or(s, |(_, h)| h))
        .collect::<Vec<_>>()
        .join(",");
    let main = client(config, &seeds, certs.clone(), RETRIES)?;
    let mut conn = connection(config, &main, &nodes).await?;
    // INFO goes to every primary and answers each one's reply.
    let info: Value = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .map_err(|e| map_redis_err("reading the Redis Cluster's versions", e))?;
    for info in strings(info) {
        check_version(&info)?;
    }
    // FUNCTION LOAD goes to every primary; each replicates it to its replicas.
    super::load(&mut conn)
        .await
        .map_err(|e| map_redis_err("loading the delayq functions on every primary", e))?;
    warn_on_eviction(&mut conn).await;
    let quick = client(config, &seeds, certs, QUICK_RETRIES)?;
    let quick = connection(config, &quick, &nodes).await?;
    Ok((Inner::Cluster(conn), quick))
}

/// A cluster client of `seeds` with the configured timeouts and `retries` tries again of a
/// command.
fn client(
    config: &RedisConfig,
    seeds: &[String],
    certs: Option<TlsCertificates>,
    retries: u32,
) -> Result<ClusterClient> {
    let mut builder = ClusterClient::builder(seeds.to_vec())
        .connection_timeout(config.connect_timeout)
        // redis-rs has no response timeout on cluster connections unless told; the overall
        // one bounds a command with all its redirections and retries.
        .response_timeout(config.response_timeout)
        .overall_response_timeout(Some(config.response_timeout))
        .retries(retries)
        .min_retry_wait(MIN_RETRY_WAIT_MS)
        .max_retry_wait(MAX_RETRY_WAIT_MS);
    if let Some(certs) = certs {
        builder = builder.certs(certs);
    }
    builder.build().map_err(|e| Error::InvalidConfig {
        reason: format!(
            "cannot use the Redis Cluster URL: {e}; use redis+cluster://[user:password@]host:port,host:port,..."
        ),
    })
}

/// Connects `client` to the cluster (`nodes`: its seeds, for the error), bounded by the
/// connect timeout.
async fn connection(
    config: &RedisConfig,
    client: &ClusterClient,
    nodes: &str,
) -> Result<ClusterConnection> {
    tokio::time::timeout(
        config.connect_timeout + Duration::from_secs(1),
        client.get_async_connection(),
    )
    .await
    .map_err(|_| {
        Error::unavailable(
            format!("connecting to the Redis Cluster at {nodes}: no answer in time"),
            std::io::Error::from(std::io::ErrorKind::TimedOut),
        )
    })?
    .map_err(|e| super::connect_error(nodes, refused_credentials(e)))
}

/// True when the cluster refused `e`'s call without running it, for a reason a live
/// primary gives while slots move (`TRYAGAIN`, `ASK` beyond the quick connection's retries,
/// `READONLY` from a primary just turned replica): the call may be sent again, through the
/// connection that retries longer. A killed primary's errors (I/O, `MOVED` to it,
/// `CLUSTERDOWN`) are not.
pub(super) fn refused_unrun(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(
            ServerErrorKind::TryAgain | ServerErrorKind::Ask | ServerErrorKind::ReadOnly
        )
    )
}

/// redis-rs reports a cluster it could not reach through any seed as an I/O error, with the
/// last seed's error flattened into its detail text; a refused password (or none given where
/// one is required) would then read as "unavailable", and a caller would wait for a cluster
/// that will never let it in. This finds the refusal in the text and gives it back its kind,
/// so that it answers a configuration error, as on one node.
fn refused_credentials(e: RedisError) -> RedisError {
    let detail = e.detail().unwrap_or_default();
    let refused = ["AuthenticationFailed", "WRONGPASS", "NOAUTH"]
        .iter()
        .any(|code| detail.contains(code));
    if e.kind() == ErrorKind::Io && refused {
        return RedisError::from((
            ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ));
    }
    e
}

/// Every string in a reply (a map's values, an array's items, or the string itself).
fn strings(v: Value) -> Vec<String> {
    match v {
        Value::Map(kv) => kv.into_iter().flat_map(|(_, v)| strings(v)).collect(),
        Value::Array(items) => items.into_iter().flat_map(strings).collect(),
        Value::BulkString(b) => vec![String::from_utf8_lossy(&b).into_owned()],
        Value::VerbatimString { text, .. } => vec![text],
        Value::SimpleString(s) => vec![s],
        _ => Vec::new(),
    }
}

/// The route (slot, primary) of `cmd`, as redis-rs routes it: an `FCALL`'s first key after
/// numkeys, another command's first argument; `None` for a keyless call. (redis-rs keeps its
/// own routing function private; `tests/cluster/` checks that both agree.)
pub(super) fn route(cmd: &Cmd) -> Option<Route> {
    first_key(cmd).map(|key| Route::with_key(key, SlotAddr::Master))
}

/// The hash slot of `cmd` ([`route`]'s slot); `None` for a keyless call.
pub(super) fn slot_of_cmd(cmd: &Cmd) -> Option<u16> {
    first_key(cmd).map(slot_of_key)
}

/// The hash slot of `key`, as Redis computes it: CRC16/XMODEM of its hash tag (the part
/// between the first `{` and the next `}`, when not empty) or of the whole key, modulo 16384.
pub(super) fn slot_of_key(key: &[u8]) -> u16 {
    let tag = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .map(|close| &rest[..close])
        })
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tag) % 16384
}

/// The key a call is routed by: an `FCALL`'s first key after numkeys, another command's
/// first argument; `None` for a keyless call.
fn first_key(cmd: &Cmd) -> Option<&[u8]> {
    let args: Vec<&[u8]> = cmd
        .args_iter()
        .filter_map(|a| match a {
            redis::Arg::Simple(b) => Some(b),
            _ => None,
        })
        .collect();
    let name = args.first()?;
    let key = if [b"FCALL".as_slice(), b"FCALL_RO"]
        .iter()
        .any(|f| name.eq_ignore_ascii_case(f))
    {
        let numkeys: usize = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
        if numkeys == 0 {
            return None;
        }
        *args.get(3)?
    } else {
        *args.get(1)?
    };
    Some(key)
}

/// Loads the library on the primary that serves `route`'s slot (the one that answered
/// "function not found": a new primary after a failover, or one that lost it).
pub(super) async fn load_on(c: &mut ClusterConnection, route: Route) -> RedisResult<()> {
    let mut cmd = redis::cmd("FUNCTION");
    cmd.arg("LOAD").arg("REPLACE").arg(library::SOURCE);
    let name = c
        .route_command(
            cmd,
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
        )
        .await?;
    let name: String = redis::from_redis_value(name)?;
    check_loaded(&name)
}

/// Runs `cmds` as one pipeline per slot, concurrently, each in its given order (and ending
/// with `WAIT` when `wait` is set and it changes state: the `WAIT` goes with the pipeline to
/// the slot's primary); answers the replies in the order of `cmds`, errors kept as values,
/// and every `WAIT`'s answer.
pub(super) async fn pipeline(
    c: &ClusterConnection,
    cmds: &[Cmd],
    wait: Option<Replicas>,
) -> RedisResult<Piped> {
    let mut slots: Vec<(Option<Route>, Vec<usize>)> = Vec::new();
    let mut index: HashMap<Option<Route>, usize> = HashMap::new();
    for (i, cmd) in cmds.iter().enumerate() {
        let route = route(cmd);
        let k = *index.entry(route).or_insert_with(|| {
            slots.push((route, Vec::new()));
            slots.len() - 1
        });
        slots[k].1.push(i);
    }
    let replies = try_join_all(slots.iter().map(|(route, idx)| {
        let mut target = Target::Slot(c.clone(), *route);
        let group: Vec<Cmd> = idx.iter().map(|&i| cmds[i].clone()).collect();
        async move { target.pipeline(&group, wait).await }
    }))
    .await?;
    let mut out = vec![Value::Nil; cmds.len()];
    let mut acked = Vec::new();
    for ((_, idx), piped) in slots.iter().zip(replies) {
        for (&i, v) in idx.iter().zip(piped.replies) {
            out[i] = v;
        }
        acked.extend(piped.acked);
    }
    Ok(Piped {
        replies: out,
        acked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls_become_seeds_with_their_credentials() {
        let ok = |url: &str| seeds(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(
            ok("redis+cluster://127.0.0.1:7000,127.0.0.1:7001"),
            (
                vec![
                    "redis://127.0.0.1:7000".to_string(),
                    "redis://127.0.0.1:7001".to_string()
                ],
                false
            )
        );
        assert_eq!(
            ok("rediss+cluster://app:s3cret@a:1,b:2/"),
            (
                vec![
                    "rediss://app:s3cret@a:1".to_string(),
                    "rediss://app:s3cret@b:2".to_string()
                ],
                true
            )
        );
        assert_eq!(ok("redis+cluster://a:1/0").0, vec!["redis://a:1"]);
        for bad in ["redis+cluster://", "redis+cluster://a:1/3", "redis://a:1"] {
            match seeds(bad) {
                Err(Error::InvalidConfig { reason }) => {
                    assert!(reason.contains("redis+cluster://"), "{reason}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert!(is_cluster_url("rediss+cluster://a:1"));
        assert!(!is_cluster_url("redis://a:1"));
    }

    /// redis-rs's pause before a retry (`RetryParams::wait_time_for_retry`, exponent base 2
    /// and factor 10 by default, computed for one more than the tries made) must not
    /// overflow for any number of tries either connection allows.
    #[test]
    fn the_retry_pause_never_overflows_in_redis_rs() {
        for retries in [RETRIES, QUICK_RETRIES] {
            for retry in 0..=retries + 1 {
                assert!(
                    2u64.checked_pow(retry)
                        .and_then(|p| p.checked_mul(10))
                        .is_some(),
                    "{retries} retries: the pause of try {retry} overflows"
                );
            }
        }
    }

    /// The quick connection's failures that are sent again through the main one: refusals
    /// of a live primary while slots move, which ran nothing; not a dead primary's.
    #[test]
    fn only_a_call_refused_unrun_goes_again_through_the_main_connection() {
        let kind = |k: ServerErrorKind| RedisError::from((ErrorKind::Server(k), "refused"));
        for k in [
            ServerErrorKind::TryAgain,
            ServerErrorKind::Ask,
            ServerErrorKind::ReadOnly,
        ] {
            assert!(refused_unrun(&kind(k)), "{k:?}");
        }
        for k in [
            ServerErrorKind::Moved,
            ServerErrorKind::ClusterDown,
            ServerErrorKind::ResponseError,
        ] {
            assert!(!refused_unrun(&kind(k)), "{k:?}");
        }
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(!refused_unrun(&io));
    }

    #[test]
    fn fcall_routes_by_its_first_key_after_numkeys() {
        let mut a = redis::cmd("FCALL");
        a.arg("f")
            .arg(2)
            .arg("delayq:{t}:jobs")
            .arg("delayq:{t}:ready");
        let mut b = redis::cmd("FCALL");
        b.arg("g").arg(1).arg("x:{t}:wake").arg("other-arg");
        assert_eq!(route(&a), Some(Route::with_key("{t}", SlotAddr::Master)));
        assert_eq!(route(&a), route(&b));
        assert_eq!(route(&redis::cmd("TIME")), None);
        assert_eq!(slot_of_cmd(&redis::cmd("TIME")), None);
    }

    #[test]
    fn slots_are_computed_as_redis_does() {
        // The examples of Redis's `CLUSTER KEYSLOT` documentation; an empty tag hashes the
        // whole key.
        assert_eq!(slot_of_key(b"somekey"), 11058);
        assert_eq!(slot_of_key(b"foo{hash_tag}"), 2515);
        assert_eq!(slot_of_key(b"{hash_tag}.x"), 2515);
        for key in ["foo{}{bar}", "delayq:{t~3~7}:jobs", "{}", "a{b"] {
            assert_eq!(
                slot_of_key(key.as_bytes()),
                delayq_testkit::key_slot(key),
                "{key}"
            );
        }
        let mut a = redis::cmd("FCALL");
        a.arg("f").arg(1).arg("delayq:{t}:jobs");
        assert_eq!(slot_of_cmd(&a), Some(slot_of_key(b"t")));
        assert_eq!(
            route(&a),
            Some(Route::new(slot_of_key(b"t"), SlotAddr::Master))
        );
    }
}

/// Fuzzed cluster URLs (issue 17): any string is a list of seeds or `InvalidConfig`, and
/// every seed is a URL redis-rs reads or refuses with an error, never a panic.
#[cfg(test)]
mod fuzz {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: delayq_testkit::fuzz_cases(512), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_cluster_url_is_seeds_or_invalid_config(
            scheme in prop::sample::select(vec![SCHEME, TLS_SCHEME, "redis://", ""]),
            rest in prop_oneof![any::<String>(), "[a-z0-9:@,/.%\\[\\]-]{0,40}"],
        ) {
            let url = format!("{scheme}{rest}");
            match seeds(&url) {
                Ok((seeds, tls)) => {
                    prop_assert!(!seeds.is_empty());
                    prop_assert_eq!(tls, scheme == TLS_SCHEME);
                    for seed in seeds {
                        let _ = redis::Client::open(seed.as_str());
                    }
                }
                Err(e) => prop_assert!(matches!(e, Error::InvalidConfig { .. }), "{e:?}"),
            }
        }
    }
}
