//! [`RedisServer`]: a `redis-server` process owned by a test, on a free loopback port, in
//! its own temporary directory, killed when dropped.
//!
//! No test ever connects to a Redis it did not start. A missing binary fails with a message
//! that says what to install; it never skips.
//!
//! `access` owns what secures a server (TLS files, the ACL user) and how the harness itself
//! gets in.

mod access;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tempfile::TempDir;

pub(crate) use crate::tls::TlsFiles;
pub(crate) use access::Access;
pub use access::{ACL_RULES, AclUser};

/// The environment variable that overrides the `redis-server` binary.
pub const REDIS_SERVER_ENV: &str = "DELAYQ_REDIS_SERVER";

/// How the server persists data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Persistence {
    /// Nothing on disk (`--save "" --appendonly no`): the default for tests.
    #[default]
    None,
    /// An append-only file fsynced after every write (`appendfsync always`).
    AofAlways,
    /// An append-only file fsynced once a second (`appendfsync everysec`).
    AofEverySec,
}

/// Options of a test server.
#[derive(Clone, Debug, Default)]
pub struct RedisOptions {
    /// Persistence mode.
    pub persistence: Persistence,
    /// Extra `--name value` arguments, e.g. `["--hz", "100"]`.
    pub extra_args: Vec<String>,
    /// Also listen with TLS on a second port, with a certificate for `127.0.0.1` signed by a
    /// CA generated for this server ([`RedisServer::tls_url`], [`RedisServer::tls_ca_file`]).
    /// A cluster node ([`Self::cluster`]) with TLS speaks nothing else: no plain port
    /// (`--port 0`, so [`RedisServer::port`] is its TLS port), TLS on the cluster bus
    /// (`tls-cluster`) and to its primary (`tls-replication`).
    pub tls: bool,
    /// An ACL user for the application, holding [`ACL_RULES`]; the default user then needs a
    /// password that only the harness knows (its own connections, `redis-cli`, and replicas,
    /// with `masterauth`, use it).
    pub acl: Option<AclUser>,
    /// Start as a Redis Cluster node (`--cluster-enabled yes`), its cluster state in
    /// `nodes.conf` in its own directory and its cluster bus on a second free port
    /// (`--cluster-port`, since the default, port + 10000, may be taken or out of range). It
    /// serves no slot until a cluster is formed: [`crate::RedisCluster`] does that.
    pub cluster: bool,
}

/// A running `redis-server` owned by the test.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    tls_port: u16,
    bus_port: u16,
    dir: TempDir,
    opts: RedisOptions,
    access: Access,
}

impl RedisServer {
    /// Starts a server with no persistence. Panics with the server log if it does not come up.
    pub fn start() -> Self {
        Self::start_with(RedisOptions::default())
    }

    /// Starts a server with options.
    pub fn start_with(opts: RedisOptions) -> Self {
        Self::start_with_tls_files(opts, None)
    }

    /// Starts a server with options; with TLS, with `tls` (the files every node of a cluster
    /// shares) or else files generated for this server.
    pub(crate) fn start_with_tls_files(opts: RedisOptions, tls: Option<&TlsFiles>) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("delayq-redis-")
            .tempdir()
            .unwrap_or_else(|e| {
                panic!("cannot create a temporary directory for redis-server: {e}")
            });
        let tls = opts
            .tls
            .then(|| tls.cloned().unwrap_or_else(TlsFiles::generate));
        if let Some(files) = &tls {
            files.write(dir.path());
        }
        let tls_only = opts.tls && opts.cluster;
        let access = Access::new(tls.as_ref().filter(|_| tls_only), opts.acl.is_some());
        let mut server = RedisServer {
            child: None,
            port: 0,
            tls_port: 0,
            bus_port: 0,
            dir,
            opts,
            access,
        };
        let mut last_log = String::new();
        // The port is free when probed but may be taken before redis binds it: retry.
        for _ in 0..10 {
            server.port = crate::child::free_port();
            if server.opts.tls {
                server.tls_port = if tls_only {
                    server.port
                } else {
                    crate::child::free_port()
                };
            }
            if server.opts.cluster {
                server.bus_port = crate::child::free_port();
            }
            match server.spawn_and_wait() {
                Ok(()) => return server,
                Err(log) => last_log = log,
            }
        }
        panic!("redis-server did not start after 10 attempts; last log:\n{last_log}");
    }

    /// `redis://127.0.0.1:<port>` (`rediss://` on a TLS cluster node, which has no plain
    /// port), without credentials.
    pub fn url(&self) -> String {
        let scheme = if self.tls_only() { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// `rediss://127.0.0.1:<tls port>` (only with [`RedisOptions::tls`]).
    pub fn tls_url(&self) -> String {
        assert!(self.opts.tls, "this server was started without TLS");
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }

    /// The PEM file of the CA that signed the server's TLS certificate.
    pub fn tls_ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The port clients connect to: the plain one, or on a TLS cluster node its TLS port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// How the harness itself gets in (TLS, the default user's password).
    pub(crate) fn access(&self) -> &Access {
        &self.access
    }

    /// A cluster node with TLS has no plain port.
    fn tls_only(&self) -> bool {
        self.opts.tls && self.opts.cluster
    }

    /// The server's data directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server with SIGKILL (a crash: nothing is flushed beyond what the
    /// persistence mode already wrote).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port and directory (after [`Self::kill`], or
    /// kills it first), so it reloads what it persisted.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(log) = self.spawn_and_wait() {
            panic!(
                "redis-server did not restart on port {}; log:\n{log}",
                self.port
            );
        }
    }

    /// A new async connection (for assertions in tests), as the default user: over TLS on
    /// a TLS cluster node, with the harness's password when the server has an ACL user.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        let client = self
            .access
            .client(self.port)
            .unwrap_or_else(|e| panic!("bad test URL {}: {e}", self.url()));
        client
            .get_multiplexed_async_connection()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "cannot connect to the test redis-server: {e}\nlog:\n{}",
                    self.log()
                )
            })
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let bin = binary();
        let mut cmd = Command::new(&bin);
        let plain_port = if self.tls_only() { 0 } else { self.port };
        cmd.arg("--port")
            .arg(plain_port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg("redis.log")
            .arg("--daemonize")
            .arg("no")
            .arg("--save")
            .arg("");
        match self.opts.persistence {
            Persistence::None => {
                cmd.arg("--appendonly").arg("no");
            }
            Persistence::AofAlways => {
                cmd.arg("--appendonly")
                    .arg("yes")
                    .arg("--appendfsync")
                    .arg("always");
            }
            Persistence::AofEverySec => {
                cmd.arg("--appendonly")
                    .arg("yes")
                    .arg("--appendfsync")
                    .arg("everysec");
            }
        }
        if self.opts.tls {
            cmd.arg("--tls-port")
                .arg(self.tls_port.to_string())
                .arg("--tls-cert-file")
                .arg("server.pem")
                .arg("--tls-key-file")
                .arg("server.key")
                .arg("--tls-ca-cert-file")
                .arg("ca.pem")
                .arg("--tls-auth-clients")
                .arg("no");
        }
        if self.tls_only() {
            cmd.args(["--tls-cluster", "yes", "--tls-replication", "yes"]);
        }
        if let Some(user) = &self.opts.acl {
            cmd.args(user.server_args());
        }
        if self.opts.cluster {
            cmd.arg("--cluster-enabled")
                .arg("yes")
                .arg("--cluster-config-file")
                .arg("nodes.conf")
                .arg("--cluster-port")
                .arg(self.bus_port.to_string());
        }
        cmd.args(&self.opts.extra_args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn().unwrap_or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                panic!(
                    "redis-server not found ({}): the tests start their own Redis servers. Install it with \
                     `sudo apt-get install -y redis-server` on Debian/Ubuntu (scripts/test.sh does this for you), \
                     `brew install redis` on macOS, or set {REDIS_SERVER_ENV} to the binary's path",
                    bin.display()
                )
            }
            panic!("cannot start {}: {e}", bin.display())
        });
        self.child = Some(child);
        let (access, port) = (&self.access, self.port);
        if crate::child::wait_until_up(&mut self.child, || access.ping(port)) {
            return Ok(());
        }
        self.kill();
        Err(self.log())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- redis-server log (port {}) ---\n{}",
                self.port,
                self.log()
            );
        }
        self.kill();
    }
}

pub(crate) fn binary() -> PathBuf {
    std::env::var_os(REDIS_SERVER_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("redis-server"))
}

impl RedisServer {
    /// Every key and its `DUMP`, sorted by key: equal snapshots mean the data did not change.
    /// Wake keys (`*:wake`) are left out: they carry hints for blocked waiters, not job
    /// data, and a waiter process may pop one and hand it back at any moment.
    pub async fn snapshot(&self) -> Vec<u8> {
        self.snapshot_of("*").await
    }

    /// [`Self::snapshot`] of the keys that match `pattern` (a `KEYS` pattern, e.g. one
    /// prefix's keys on a server that several tests share).
    pub async fn snapshot_of(&self, pattern: &str) -> Vec<u8> {
        let mut conn = self.connection().await;
        let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS")
            .arg(pattern)
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("KEYS failed: {e}"));
        keys.retain(|k| !k.ends_with(b":wake"));
        keys.sort();
        let mut out = Vec::new();
        for k in keys {
            let dump: Option<Vec<u8>> = redis::cmd("DUMP")
                .arg(&k)
                .query_async(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("DUMP failed: {e}"));
            out.extend_from_slice(&(k.len() as u64).to_le_bytes());
            out.extend_from_slice(&k);
            let dump = dump.unwrap_or_default();
            out.extend_from_slice(&(dump.len() as u64).to_le_bytes());
            out.extend_from_slice(&dump);
        }
        out
    }
}

/// How many commands the server of `conn` has run: the sum of `calls` over `INFO
/// commandstats`, calls made inside functions included (the `INFO` that reads it is counted
/// by the next one).
pub async fn commands_run(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap_or_else(|e| panic!("INFO commandstats: {e}"));
    info.lines()
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|rest| rest.split(',').next())
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}
