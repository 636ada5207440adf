//! [`RedisCluster`]: a Redis Cluster of 3 primaries and 3 replicas owned by a test, built
//! with `redis-cli --cluster create`, with helpers that kill a primary or move a slot and
//! wait until the cluster has settled again.
//!
//! Each node is a [`RedisServer`] in cluster mode ([`RedisOptions::cluster`]): free loopback
//! ports, its own temporary directory (`nodes.conf`, `redis.log`, and whatever a replica's
//! sync writes, so restarted nodes never read another node's files), killed on drop, its log
//! printed when a test panics. [`ClusterOptions`] may secure it as one node is: TLS only
//! (clients, cluster bus, replication; one generated CA for all nodes) and an ACL user. Methods that wait for the cluster to converge (seconds) are
//! async, so the test's traffic keeps flowing meanwhile; the ones that read the topology ask
//! one node and answer at once.
//!
//! A missing `redis-server` or `redis-cli` fails with what to install; it never skips.
//!
//! `slot` computes a key's hash slot, `nodes` parses `CLUSTER NODES`, `settle` decides
//! whether the cluster has settled.

mod nodes;
mod settle;
mod slot;

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::redis_server::{Access, REDIS_SERVER_ENV, TlsFiles, binary};
use crate::{AclUser, RedisOptions, RedisServer};
pub use nodes::ClusterNode;
use settle::{observe, on_node, ordered, replicated, wait_settled};
pub use slot::{SLOTS, key_slot};

/// The environment variable that overrides the `redis-cli` binary. Without it, `redis-cli`
/// next to [`REDIS_SERVER_ENV`]'s binary when that is set and has one, else `redis-cli` on
/// the `PATH`.
pub const REDIS_CLI_ENV: &str = "DELAYQ_REDIS_CLI";

/// Primaries of the cluster; each gets one replica.
const PRIMARIES: usize = 3;

/// `cluster-node-timeout` in milliseconds: how long a primary may be unreachable before the
/// others mark it failed and its replica takes over (a failover takes 2 to 3 times this).
/// Short so the failover tests are quick; long enough that a busy 2-core machine does not
/// fail a live node over by mistake.
const NODE_TIMEOUT_MS: u32 = 2000;

/// The longest the harness waits for the cluster to form, fail over or settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Keys moved per `MIGRATE` by [`RedisCluster::migrate_slot`].
const MIGRATE_BATCH: usize = 100;

/// A running Redis Cluster owned by the test: 3 primaries with one replica each (or with
/// none, from [`RedisCluster::start_with_replicas`]).
pub struct RedisCluster {
    servers: Vec<RedisServer>,
    opts: ClusterOptions,
}

/// Options of a test cluster, as [`RedisOptions`] are for one node.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    /// Replicas per primary (1 by default; 0 for 3 primaries alone).
    pub replicas: usize,
    /// Every node speaks TLS only, with a certificate for `127.0.0.1` signed by one CA
    /// generated for the cluster ([`RedisCluster::tls_ca_file`]): to clients (no plain port,
    /// so the cluster announces the TLS ports), on the cluster bus and to its primary; the
    /// cluster is formed with `redis-cli --tls`. [`RedisCluster::url`] is then
    /// `rediss+cluster://`.
    pub tls: bool,
    /// An ACL user on every node ([`RedisOptions::acl`]); [`RedisCluster::url`] carries its
    /// credentials. The default user needs the harness's password, which replicas give their
    /// primary (`masterauth`) and `redis-cli` the nodes.
    pub acl: Option<AclUser>,
    /// `cluster-require-full-coverage`: with `true` (Redis's default) every node refuses
    /// every call (CLUSTERDOWN) while some slot has no live primary, from when the others
    /// mark a dead primary failed until its replica takes over; with `false` only the dead
    /// primary's slots refuse.
    pub full_coverage: bool,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            replicas: 1,
            tls: false,
            acl: None,
            full_coverage: true,
        }
    }
}

/// What [`RedisCluster::kill_primary`] did.
#[derive(Clone, Debug)]
pub struct Failover {
    /// The primary that was killed, as the cluster knew it before.
    pub killed: ClusterNode,
    /// Its replica, now the primary of the same slots.
    pub promoted: ClusterNode,
    /// Just before the SIGKILL was sent. A call that ended before this was answered by the
    /// live primary.
    pub signalled: Instant,
    /// Once the killed process was reaped: it answers nothing after this. A call that began
    /// after it never reached the killed primary; one between `signalled` and this may
    /// have, and lost its answer.
    pub gone: Instant,
}

impl RedisCluster {
    /// Starts 6 nodes, forms the cluster and waits (at most 30 s) until every node reports
    /// `cluster_state:ok` with all 16384 slots covered, agrees on who serves what, and every
    /// replica has finished its sync and acknowledged a write made through its primary
    /// afterwards (so its replication stream flows). Panics with the reason and the nodes'
    /// logs otherwise.
    pub fn start() -> Self {
        RedisCluster::start_with(ClusterOptions::default())
    }

    /// As [`Self::start`], with `replicas` replicas per primary (0 for 3 primaries alone, as
    /// the benchmarks compare them with one node; [`Self::kill_primary`] then has nobody to
    /// promote).
    pub fn start_with_replicas(replicas: usize) -> Self {
        RedisCluster::start_with(ClusterOptions {
            replicas,
            ..ClusterOptions::default()
        })
    }

    /// As [`Self::start`], with options: replicas, TLS, an ACL user.
    pub fn start_with(opts: ClusterOptions) -> Self {
        let node = RedisOptions {
            cluster: true,
            extra_args: node_args(opts.full_coverage),
            tls: opts.tls,
            acl: opts.acl.clone(),
            ..RedisOptions::default()
        };
        let tls = opts.tls.then(TlsFiles::generate);
        let servers = (0..PRIMARIES * (1 + opts.replicas))
            .map(|_| RedisServer::start_with_tls_files(node.clone(), tls.as_ref()))
            .collect();
        let cluster = RedisCluster { servers, opts };
        cluster.create();
        if let Err(e) = wait_settled(cluster.access(), &cluster.running_ports(), SETTLE_TIMEOUT) {
            panic!("the Redis Cluster did not come up: {e}");
        }
        cluster
    }

    /// The cluster that the tests of this binary running at the same time share, started by
    /// the first of them ([`Self::start`]) and killed when the last one drops its handle.
    ///
    /// A cluster takes seconds to start; a suite that runs many short cases on it (the
    /// worker suite, the HTTP API tests) shares one instead of starting one per case. Such
    /// tests must keep apart by key prefix (each its own `RedisConfig::with_prefix`, which
    /// also prefixes the topic registry and the schedules hash) and must not change the
    /// topology: a test that kills a node or moves a slot starts a cluster of its own. No
    /// process outlives the tests: the handle is counted, not a static that is never dropped;
    /// when the tests run one at a time each starts its own.
    pub fn shared() -> Arc<RedisCluster> {
        static SHARED: Mutex<Weak<RedisCluster>> = Mutex::new(Weak::new());
        // A test that panicked while starting the cluster left nothing behind to reuse.
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cluster) = shared.upgrade() {
            return cluster;
        }
        let cluster = Arc::new(RedisCluster::start());
        *shared = Arc::downgrade(&cluster);
        cluster
    }

    /// `redis://127.0.0.1:<port>` (`rediss://` with TLS) of every running node, without
    /// credentials: seeds for a cluster client.
    pub fn urls(&self) -> Vec<String> {
        self.running().map(RedisServer::url).collect()
    }

    /// `redis+cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,...` over every running node: the URL
    /// form of a cluster that `delayq serve --redis` and `Queue::open` take (issue 13). With
    /// TLS `rediss+cluster://`; with an ACL user `...://user:password@127.0.0.1:<p1>,...`.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .running()
            .map(|s| format!("127.0.0.1:{}", s.port()))
            .collect();
        let scheme = if self.opts.tls { "rediss" } else { "redis" };
        let userinfo = self
            .opts
            .acl
            .as_ref()
            .map(|u| format!("{}@", u.userinfo()))
            .unwrap_or_default();
        format!("{scheme}+cluster://{userinfo}{}", seeds.join(","))
    }

    /// The PEM file of the CA that signed every node's certificate (only with
    /// [`ClusterOptions::tls`]).
    pub fn tls_ca_file(&self) -> PathBuf {
        assert!(self.opts.tls, "this cluster was started without TLS");
        self.servers[0].tls_ca_file()
    }

    /// The options the cluster was started with.
    pub fn options(&self) -> &ClusterOptions {
        &self.opts
    }

    /// Every running node as the cluster sees it now: primaries first, ordered by the first
    /// slot they serve (so index `i` names the same slots across a failover), then replicas
    /// in the order of their primaries.
    pub fn nodes(&self) -> Vec<ClusterNode> {
        let ports = self.running_ports();
        let mut last = String::from("no node is running");
        for &port in &ports {
            match observe(self.access(), port) {
                Ok(o) => return ordered(o.view.into_iter().map(|e| e.node), &ports),
                Err(e) => last = e,
            }
        }
        panic!("no node of the cluster answered CLUSTER NODES: {last}")
    }

    /// The running primaries, ordered by the first slot they serve.
    pub fn primaries(&self) -> Vec<ClusterNode> {
        self.nodes()
            .into_iter()
            .filter(|n| n.is_primary())
            .collect()
    }

    /// Two primaries for a test that stops the first ([`crate::Stopped`]) while the second
    /// stays healthy: the first holds neither the topic registry (`delayq:topics`) nor the
    /// set of paused topics (`delayq:paused`) under the default prefix, which every listing
    /// of topics reads, so that listing does not wait on it; the second is another primary.
    pub fn stoppable_and_healthy(&self) -> (ClusterNode, ClusterNode) {
        let listing = [key_slot("delayq:topics"), key_slot("delayq:paused")];
        let primaries = self.primaries();
        let stoppable = primaries
            .iter()
            .find(|p| !listing.iter().any(|s| p.serves(*s)))
            .unwrap_or_else(|| panic!("every primary holds a listing's key: {primaries:?}"));
        let healthy = primaries
            .iter()
            .find(|p| p.id != stoppable.id)
            .unwrap_or_else(|| panic!("the cluster has one primary: {primaries:?}"));
        (stoppable.clone(), healthy.clone())
    }

    /// The running replicas, in the order of their primaries.
    pub fn replicas(&self) -> Vec<ClusterNode> {
        self.nodes()
            .into_iter()
            .filter(|n| !n.is_primary())
            .collect()
    }

    /// The primary that serves `key`'s slot ([`key_slot`]).
    pub fn node_for_key(&self, key: impl AsRef<[u8]>) -> ClusterNode {
        let slot = key_slot(key);
        let primaries = self.primaries();
        primaries
            .iter()
            .find(|p| p.serves(slot))
            .cloned()
            .unwrap_or_else(|| panic!("no running primary serves slot {slot}: {primaries:?}"))
    }

    /// The node process on `port` (its URL, log, directory, a connection to it).
    pub fn server(&self, port: u16) -> &RedisServer {
        self.servers
            .iter()
            .find(|s| s.port() == port)
            .unwrap_or_else(|| panic!("port {port} is not a node of this cluster"))
    }

    /// Three primaries, no replicas (nobody to fail over to: a primary stopped with
    /// [`crate::Stopped`] stays the owner of its slots), each with a `cluster-node-timeout`
    /// of 120 s, longer than a test, so that the others do not mark a stopped primary failed
    /// and the cluster stays up: for the tests of a hung primary (issue 37). Blocks while
    /// the cluster forms, as [`Self::start_with_replicas`] does.
    pub async fn start_for_stopping() -> Self {
        let cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with_replicas(0))
            .await
            .unwrap_or_else(|e| panic!("starting the test Redis Cluster: {e}"));
        for node in cluster.nodes() {
            let mut c = cluster.server(node.port).connection().await;
            let set: redis::RedisResult<()> = redis::cmd("CONFIG")
                .arg("SET")
                .arg("cluster-node-timeout")
                .arg(120_000)
                .query_async(&mut c)
                .await;
            set.unwrap_or_else(|e| panic!("CONFIG SET cluster-node-timeout on {}: {e}", node.port));
        }
        cluster
    }

    /// A cluster connection (redis-rs) seeded with every running node, as the default user
    /// (over TLS, with the harness's password when there is an ACL user): it follows MOVED
    /// and ASK. Connect and response timeouts are set, since redis-rs has none by default.
    pub async fn cluster_connection(&self) -> redis::cluster_async::ClusterConnection {
        let access = self.access();
        let seeds: Vec<String> = self
            .running_ports()
            .iter()
            .map(|&p| access.url(p))
            .collect();
        let mut builder = redis::cluster::ClusterClient::builder(seeds)
            .connection_timeout(Duration::from_secs(1))
            .response_timeout(Duration::from_secs(5));
        if let Some(certs) = access.certs() {
            builder = builder.certs(certs);
        }
        let client = builder
            .build()
            .unwrap_or_else(|e| panic!("bad seed URLs {:?}: {e}", self.urls()));
        client
            .get_async_connection()
            .await
            .unwrap_or_else(|e| panic!("cannot connect to the test Redis Cluster: {e}"))
    }

    /// Waits until every replica has acknowledged every write its primary took before this
    /// call (a write through each primary, then `WAIT` on that connection), at most 30 s.
    ///
    /// Replication is asynchronous: a write the engine answered may not have reached the
    /// replica yet when its primary dies. A test that checks what survives a failover without
    /// the engine's wait-replicas option calls this before [`Self::kill_primary`]. A `WAIT`
    /// on a connection of the test's own proves nothing here: it counts acknowledgements of
    /// that connection's last write, and one that wrote nothing gets its answer at once.
    pub async fn wait_replicated(&self) {
        let view = self.nodes();
        let access = self.access().clone();
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let done = tokio::task::spawn_blocking(move || {
            loop {
                match replicated(&access, &view) {
                    Ok(()) => return Ok(()),
                    Err(e) if Instant::now() > deadline => return Err(e),
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|done| done);
        if let Err(e) = done {
            panic!("the replicas did not catch up with their primaries: {e}");
        }
    }

    /// Kills primary `i` (of [`Self::primaries`]) with SIGKILL and waits until its replica
    /// has taken its slots over and every running node is settled again.
    pub async fn kill_primary(&mut self, i: usize) -> Failover {
        let primaries = self.primaries();
        let killed = primaries.get(i).cloned().unwrap_or_else(|| {
            panic!(
                "there is no primary {i}: the cluster has {}",
                primaries.len()
            )
        });
        assert!(
            self.replicas()
                .iter()
                .any(|r| r.primary_id.as_ref() == Some(&killed.id)),
            "primary {i} (port {}) has no replica to take over",
            killed.port
        );
        let signalled = Instant::now();
        self.server_mut(killed.port).kill();
        let gone = Instant::now();
        let view = self.settle(&format!("after killing primary {i}")).await;
        let first = killed.slots.first().map_or(0, |r| *r.start());
        let promoted = view
            .into_iter()
            .find(|n| n.is_primary() && n.serves(first))
            .unwrap_or_else(|| panic!("no primary serves slot {first} after the failover"));
        Failover {
            killed,
            promoted,
            signalled,
            gone,
        }
    }

    /// Kills the node on `port` with SIGKILL and returns at once, without waiting for the
    /// cluster to react. A primary without a replica leaves its slots unserved: the other
    /// nodes report `cluster_state:fail` once they have marked it failed (after
    /// `cluster-node-timeout`, 2 s here), and [`Self::restart`] brings it back.
    pub fn kill_node(&mut self, port: u16) {
        self.server_mut(port).kill();
    }

    /// Starts the node on `port` again (killing it first if it runs) on the same ports and
    /// directory, and waits until it has rejoined and the cluster is settled (a replica
    /// again synced and streaming). A killed
    /// primary comes back as a replica of the node that took its slots over; with no
    /// persistence it comes back empty and syncs from its primary.
    pub async fn restart(&mut self, port: u16) -> ClusterNode {
        self.server_mut(port).restart();
        let view = self.settle(&format!("after restarting port {port}")).await;
        view.into_iter()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("port {port} is not in the cluster after its restart"))
    }

    /// Moves `slot` and its keys from the primary `from` to the primary `to` while clients
    /// keep working (they get ASK redirections meanwhile): `CLUSTER SETSLOT` IMPORTING on
    /// `to` and MIGRATING on `from`, `MIGRATE ... KEYS` in batches of 100, then `CLUSTER
    /// SETSLOT NODE` on `to`, `from` and every other primary. Waits until the cluster is
    /// settled with `to` serving the slot.
    pub async fn migrate_slot(&self, slot: u16, from: &ClusterNode, to: &ClusterNode) {
        assert!(
            slot < SLOTS,
            "slot {slot} is out of range (0-{})",
            SLOTS - 1
        );
        assert!(
            from.is_primary() && from.serves(slot),
            "{from:?} does not serve slot {slot}"
        );
        assert!(
            to.is_primary() && to.id != from.id,
            "{to:?} cannot take slot {slot}"
        );
        let (from, to) = (from.clone(), to.clone());
        let to_id = to.id.clone();
        let primaries: Vec<u16> = self.primaries().iter().map(|p| p.port).collect();
        let access = self.access().clone();
        let moved =
            tokio::task::spawn_blocking(move || migrate(&access, slot, &from, &to, &primaries))
                .await
                .map_err(|e| e.to_string())
                .and_then(|moved| moved);
        if let Err(e) = moved {
            panic!("migrating slot {slot} failed: {e}");
        }
        let view = self.settle(&format!("after migrating slot {slot}")).await;
        assert!(
            view.iter().any(|n| n.id == to_id && n.serves(slot)),
            "slot {slot} is not on {to_id} after its migration: {view:?}"
        );
    }

    /// Waits (off the async runtime) until the running nodes are settled; answers the view.
    async fn settle(&self, what: &str) -> Vec<ClusterNode> {
        let ports = self.running_ports();
        let access = self.access().clone();
        tokio::task::spawn_blocking(move || wait_settled(&access, &ports, SETTLE_TIMEOUT))
            .await
            .map_err(|e| e.to_string())
            .and_then(|settled| settled)
            .unwrap_or_else(|e| panic!("{what}, the cluster did not settle: {e}"))
    }

    /// How the harness reaches the nodes (every node is secured alike).
    fn access(&self) -> &Access {
        self.servers[0].access()
    }

    fn running(&self) -> impl Iterator<Item = &RedisServer> {
        self.servers.iter().filter(|s| s.pid().is_some())
    }

    fn running_ports(&self) -> Vec<u16> {
        self.running().map(RedisServer::port).collect()
    }

    fn server_mut(&mut self, port: u16) -> &mut RedisServer {
        self.servers
            .iter_mut()
            .find(|s| s.port() == port)
            .unwrap_or_else(|| panic!("port {port} is not a node of this cluster"))
    }

    /// Runs `redis-cli --cluster create` (bounded by [`SETTLE_TIMEOUT`]), its output in
    /// `cluster-create.log` beside the first node's log; with `--tls` and the CA on a TLS
    /// cluster, and the default user's password (in `REDISCLI_AUTH`, off the command line)
    /// when it has one.
    fn create(&self) {
        let cli = cli_binary();
        let log = self.servers[0].dir().join("cluster-create.log");
        let out = File::create(&log)
            .and_then(|f| Ok((f.try_clone()?, f)))
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let mut cmd = Command::new(&cli);
        if self.opts.tls {
            cmd.arg("--tls").arg("--cacert").arg(self.tls_ca_file());
        }
        if let Some(password) = self.access().password() {
            cmd.env("REDISCLI_AUTH", password);
        }
        cmd.arg("--cluster").arg("create");
        for s in &self.servers {
            cmd.arg(format!("127.0.0.1:{}", s.port()));
        }
        cmd.args([
            "--cluster-replicas",
            &self.opts.replicas.to_string(),
            "--cluster-yes",
        ])
        .stdin(Stdio::null())
        .stdout(out.0)
        .stderr(out.1);
        let mut child = cmd.spawn().unwrap_or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                panic!(
                    "redis-cli not found ({}): the cluster tests form their own Redis Cluster with it. \
                     Install it with `sudo apt-get install -y redis-server` on Debian/Ubuntu (it brings \
                     redis-tools; scripts/test.sh does this for you), `brew install redis` on macOS, or \
                     set {REDIS_CLI_ENV} to the binary's path",
                    cli.display()
                )
            }
            panic!("cannot start {}: {e}", cli.display())
        });
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        if !status.is_some_and(|s| s.success()) {
            let output = std::fs::read_to_string(&log).unwrap_or_default();
            let how = status.map_or(format!("did not finish within {SETTLE_TIMEOUT:?}"), |s| {
                format!("failed ({s})")
            });
            panic!(
                "`{} --cluster create` {how}; its output:\n{output}",
                cli.display()
            );
        }
    }
}

/// Node settings beyond [`RedisOptions::cluster`], for quick and sure failovers in tests,
/// and [`ClusterOptions::full_coverage`].
fn node_args(full_coverage: bool) -> Vec<String> {
    let coverage = if full_coverage { "yes" } else { "no" };
    [
        "--cluster-node-timeout",
        &NODE_TIMEOUT_MS.to_string(),
        // A replica takes over however long it has been cut off from its primary.
        "--cluster-replica-validity-factor",
        "0",
        // Replicas sync at once; Redis 7 otherwise waits 5 s for more replicas to join.
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--cluster-require-full-coverage",
        coverage,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn cli_binary() -> PathBuf {
    if let Some(cli) = std::env::var_os(REDIS_CLI_ENV) {
        return PathBuf::from(cli);
    }
    if std::env::var_os(REDIS_SERVER_ENV).is_some() {
        let beside = binary().with_file_name("redis-cli");
        if beside.is_file() {
            return beside;
        }
    }
    PathBuf::from("redis-cli")
}

/// The steps of [`RedisCluster::migrate_slot`], on blocking connections. `MIGRATE` logs in
/// to the destination as the harness does (over TLS when the cluster bus is TLS: Redis does
/// that on its own).
fn migrate(
    access: &Access,
    slot: u16,
    from: &ClusterNode,
    to: &ClusterNode,
    primaries: &[u16],
) -> Result<(), String> {
    let setslot = |port: u16, state: &str, id: &str| -> Result<(), String> {
        on_node(access, port, |c| {
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(id)
                .query(c)
        })
    };
    setslot(to.port, "IMPORTING", &from.id)?;
    setslot(from.port, "MIGRATING", &to.id)?;
    loop {
        let keys: Vec<Vec<u8>> = on_node(access, from.port, |c| {
            redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(MIGRATE_BATCH)
                .query(c)
        })?;
        if keys.is_empty() {
            break;
        }
        // An empty key name with the KEYS option moves the listed keys in one call; it
        // answers NOKEY when traffic deleted them all meanwhile, which is fine.
        let mut cmd = redis::cmd("MIGRATE");
        cmd.arg("127.0.0.1").arg(to.port).arg("").arg(0).arg(5000);
        if let Some(password) = access.password() {
            cmd.arg("AUTH").arg(password);
        }
        cmd.arg("KEYS").arg(keys);
        on_node(access, from.port, |c| cmd.query::<redis::Value>(c))?;
    }
    // The destination first, so it never answers MOVED back to the source.
    setslot(to.port, "NODE", &to.id)?;
    setslot(from.port, "NODE", &to.id)?;
    for &port in primaries
        .iter()
        .filter(|&&p| p != to.port && p != from.port)
    {
        setslot(port, "NODE", &to.id)?;
    }
    Ok(())
}
