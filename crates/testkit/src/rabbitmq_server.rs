//! [`RabbitMqServer`]: a real RabbitMQ node owned by a test, on free loopback ports, with its
//! own `epmd`, node name, database, logs and Erlang cookie in a temporary directory, killed
//! when dropped; the push delivery tests' RabbitMQ destination (crates/push/tests).
//!
//! No test ever connects to a broker it did not start: the machine's own (AMQP on 5672,
//! distribution on 25672, `epmd` on 4369) is never touched, since every port here is a free
//! one and every file lives in the temporary directory. A missing `rabbitmq-server` fails
//! with a message that says what to install; it never skips.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

/// The environment variable that overrides the `rabbitmq-server` script (Debian's, which
/// runs the node as the calling user; /usr/sbin/rabbitmq-server would switch to the
/// `rabbitmq` user and the machine's own settings).
pub const RABBITMQ_SERVER_ENV: &str = "DELAYQ_RABBITMQ_SERVER";

const DEFAULT_SCRIPT: &str = "/usr/lib/rabbitmq/bin/rabbitmq-server";

/// How long a node may take to boot (about 5 s on an idle machine; a busy CI box is slower).
const BOOT_LIMIT: Duration = Duration::from_secs(60);

/// A running RabbitMQ node owned by the test; user `guest`, password `guest`, vhost `/`.
pub struct RabbitMqServer {
    /// The node: the script and the Erlang VM under it, in a process group of their own.
    node: Option<Child>,
    /// The node's own port mapper.
    epmd: Option<Child>,
    port: u16,
    dist_port: u16,
    epmd_port: u16,
    /// Holds the database, the logs, the cookie and `rabbitmq.log` (the script's output).
    dir: TempDir,
}

impl RabbitMqServer {
    /// Starts a node on free ports. Panics with its log if it does not come up.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("delayq-rabbitmq-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory for RabbitMQ: {e}"));
        let mut server = RabbitMqServer {
            node: None,
            epmd: None,
            port: 0,
            dist_port: 0,
            epmd_port: 0,
            dir,
        };
        crate::child::on_a_free_port("epmd", |port| {
            server.epmd_port = port;
            server.spawn_epmd()
        });
        // The last attempt's ports are the ones it listens on.
        crate::child::on_a_free_port("rabbitmq-server", |port| {
            server.port = port;
            server.dist_port = crate::child::free_port();
            server.spawn_and_wait()
        });
        server
    }

    /// `amqp://guest:guest@127.0.0.1:<port>/%2f`.
    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    /// `127.0.0.1:<port>`, the AMQP listener.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The node's output and its log file so far.
    pub fn log(&self) -> String {
        let mut s = std::fs::read_to_string(self.out_path()).unwrap_or_default();
        let node_log = self
            .dir
            .path()
            .join("log")
            .join(format!("{}.log", self.node_name()));
        if let Ok(l) = std::fs::read_to_string(node_log) {
            s.push_str("\n--- node log ---\n");
            s.push_str(&l);
        }
        s
    }

    /// Kills the node with SIGKILL (its whole process group: the script, the Erlang VM and
    /// its helpers); its database stays for [`RabbitMqServer::restart`].
    pub fn kill(&mut self) {
        crate::child::kill_group(&mut self.node);
    }

    /// Starts it again on the same ports and database after [`RabbitMqServer::kill`].
    pub fn restart(&mut self) {
        let port = self.port;
        crate::child::again("RabbitMQ", port, 20, Duration::from_millis(250), || {
            self.spawn_and_wait()
        });
    }

    fn node_name(&self) -> String {
        format!("delayq-test-{}@localhost", self.port)
    }

    fn out_path(&self) -> PathBuf {
        self.dir.path().join("rabbitmq.log")
    }

    fn spawn_epmd(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("epmd.log");
        let file = std::fs::File::create(&log)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let mut cmd = Command::new("epmd");
        cmd.args([
            "-port",
            &self.epmd_port.to_string(),
            "-address",
            "127.0.0.1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(file));
        self.epmd = Some(crate::child::spawn(&mut cmd, "erlang-base", "PATH"));
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.epmd_port));
        if crate::child::wait_until_up(&mut self.epmd, || {
            TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        }) {
            return Ok(());
        }
        crate::child::kill(&mut self.epmd);
        Err(std::fs::read_to_string(log).unwrap_or_default())
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.out_path())
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", self.out_path().display()));
        let err = out
            .try_clone()
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.out_path().display()));
        // Up once its output says the broker started (after a restart: once more than
        // before) and the AMQP port takes connections.
        let booted_before = std::fs::read_to_string(self.out_path())
            .map(|l| l.matches("Starting broker... completed").count())
            .unwrap_or(0);
        let d = self.dir.path();
        let mut cmd = Command::new(crate::child::binary(RABBITMQ_SERVER_ENV, DEFAULT_SCRIPT));
        cmd.env("HOME", d)
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .env("ERL_EPMD_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODENAME", self.node_name())
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            // Distribution on loopback only, like everything else.
            .env(
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
                "-kernel inet_dist_use_interface {127,0,0,1}",
            )
            // None of the machine's files: its environment file, config and plugins.
            .env("RABBITMQ_CONF_ENV_FILE", d.join("rabbitmq-env.conf"))
            .env("RABBITMQ_CONFIG_FILE", d.join("rabbitmq"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", d.join("advanced.config"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d.join("enabled_plugins"))
            .env("RABBITMQ_MNESIA_BASE", d.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", d.join("log"))
            .env("RABBITMQ_PID_FILE", d.join("rabbitmq.pid"))
            .current_dir(d)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        self.node = Some(crate::child::spawn(
            &mut cmd,
            "rabbitmq-server",
            RABBITMQ_SERVER_ENV,
        ));
        let addr = self.addr();
        let out = self.out_path();
        if crate::child::wait_until_up_within(&mut self.node, BOOT_LIMIT, || {
            std::fs::read_to_string(&out)
                .is_ok_and(|l| l.matches("Starting broker... completed").count() > booted_before)
                && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        }) {
            return Ok(());
        }
        self.kill();
        Err(self.log())
    }
}

impl Drop for RabbitMqServer {
    fn drop(&mut self) {
        if std::thread::panicking() && self.node.is_some() {
            eprintln!("--- RabbitMQ log (port {}) ---\n{}", self.port, self.log());
        }
        self.kill();
        crate::child::kill(&mut self.epmd);
    }
}
