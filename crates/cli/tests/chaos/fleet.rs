//! The processes the chaos run owns and breaks: `delayq serve` children (one on the embedded
//! engine's data directory, or two sharing one `redis-server` with AOF `appendfsync always`),
//! killed with SIGKILL and restarted, and the list of their addresses that the clients read.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use delayq_testkit::{Persistence, RedisOptions, RedisServer};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_delayq");

/// The base URLs of the servers, one per slot; a restarted server may come back on a new
/// port, and the clients read this list before every try.
#[derive(Default)]
pub struct Endpoints(RwLock<Vec<String>>);

impl Endpoints {
    /// The URL of slot `i % len`.
    pub fn get(&self, i: usize) -> String {
        let urls = self.0.read().expect("endpoints lock");
        urls[i % urls.len()].clone()
    }

    fn set(&self, slot: usize, url: String) {
        let mut urls = self.0.write().expect("endpoints lock");
        if slot == urls.len() {
            urls.push(url);
        } else {
            urls[slot] = url;
        }
    }
}

/// Which engine the servers run.
pub enum Engine {
    /// One server on a data directory.
    Embedded,
    /// Two servers sharing one Redis with AOF fsync always.
    Redis(RedisServer),
}

/// A `delayq serve` child process of one slot.
struct Serve {
    child: Option<Child>,
    port: u16,
}

/// The servers (and the Redis) of one run, all killed on drop.
pub struct Fleet {
    engine: Engine,
    serves: Vec<Serve>,
    dir: TempDir,
    /// Where clients find the servers.
    pub endpoints: std::sync::Arc<Endpoints>,
}

impl Fleet {
    /// Starts the servers of `engine` and waits until each answers `/healthz`.
    pub fn start(redis: bool) -> Fleet {
        let engine = if redis {
            Engine::Redis(RedisServer::start_with(RedisOptions {
                persistence: Persistence::AofAlways,
                ..RedisOptions::default()
            }))
        } else {
            Engine::Embedded
        };
        let count = if redis { 2 } else { 1 };
        let mut fleet = Fleet {
            engine,
            serves: Vec::new(),
            dir: tempfile::Builder::new()
                .prefix("delayq-chaos-")
                .tempdir()
                .expect("a temporary directory for the chaos run"),
            endpoints: Default::default(),
        };
        for slot in 0..count {
            fleet.serves.push(Serve {
                child: None,
                port: free_port(),
            });
            fleet.spawn(slot);
        }
        fleet
    }

    /// How many `delayq serve` slots there are.
    pub fn slots(&self) -> usize {
        self.serves.len()
    }

    /// True when the servers share a Redis.
    pub fn has_redis(&self) -> bool {
        matches!(self.engine, Engine::Redis(_))
    }

    /// SIGKILLs the server of `slot`.
    pub fn kill_serve(&mut self, slot: usize) {
        if let Some(mut c) = self.serves[slot].child.take() {
            let _ = c.kill();
            let _ = c.wait();
            self.note(slot, "killed with SIGKILL");
        }
    }

    /// Starts the server of `slot` again, on a new port when `new_port` (or when its port
    /// was taken meanwhile), and waits until it answers.
    pub fn restart_serve(&mut self, slot: usize, new_port: bool) {
        self.kill_serve(slot);
        if new_port {
            self.serves[slot].port = free_port();
        }
        self.spawn(slot);
    }

    /// SIGKILLs the Redis (a crash: only what AOF fsynced survives).
    pub fn kill_redis(&mut self) {
        if let Engine::Redis(r) = &mut self.engine {
            r.kill();
        }
    }

    /// Starts the Redis again on its port and directory; it reloads its AOF.
    pub fn restart_redis(&mut self) {
        if let Engine::Redis(r) = &mut self.engine {
            r.restart();
        }
    }

    /// Every server's log, and the Redis log's tail, for a failure message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for slot in 0..self.serves.len() {
            let log = std::fs::read_to_string(self.log_path(slot)).unwrap_or_default();
            out += &format!("--- delayq serve slot {slot} ---\n{}\n", tail(&log, 60));
        }
        if let Engine::Redis(r) = &self.engine {
            out += &format!("--- redis-server ---\n{}\n", tail(&r.log(), 40));
        }
        out
    }

    fn log_path(&self, slot: usize) -> PathBuf {
        self.dir.path().join(format!("serve-{slot}.log"))
    }

    /// Appends a line of the harness to a slot's log, so kills show between server lines.
    fn note(&self, slot: usize, what: &str) {
        if let Ok(mut f) = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(slot))
        {
            let _ = writeln!(f, "=== chaos: {what}");
        }
    }

    /// Spawns the slot's server and waits (bounded) until it answers `/healthz`; a port
    /// taken since it was probed gets a new one.
    fn spawn(&mut self, slot: usize) {
        let start = Instant::now();
        loop {
            let port = self.serves[slot].port;
            let listen = format!("127.0.0.1:{port}");
            let log = OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.log_path(slot))
                .expect("the server's log file");
            let mut cmd = Command::new(BIN);
            cmd.args(["serve", "--listen", &listen])
                .env_remove("DELAYQ_REDIS_URL")
                .env_remove("DELAYQ_TOKENS")
                .env_remove("DELAYQ_CONFIG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(log));
            match &self.engine {
                Engine::Embedded => {
                    cmd.arg("--data-dir").arg(self.dir.path().join("data"));
                }
                Engine::Redis(r) => {
                    cmd.args(["--redis", &r.url(), "--connect-timeout", "30s"]);
                }
            }
            let mut child = cmd.spawn().expect("spawn delayq serve");
            self.note(slot, &format!("started pid {} on {listen}", child.id()));
            match wait_healthy(&mut child, &listen) {
                Ok(()) => {
                    self.serves[slot].child = Some(child);
                    self.endpoints.set(slot, format!("http://{listen}"));
                    return;
                }
                Err(why) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    assert!(
                        start.elapsed() < Duration::from_secs(60),
                        "delayq serve (slot {slot}) did not come up: {why}\n{}",
                        self.logs()
                    );
                    self.note(slot, &format!("{why}; trying a new port"));
                    self.serves[slot].port = free_port();
                }
            }
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.logs());
        }
        for slot in 0..self.serves.len() {
            self.kill_serve(slot);
        }
    }
}

/// Waits until the server answers `GET /healthz` (it binds before it opens the engine, so
/// a connect alone says nothing), or it exits (a port in use).
fn wait_healthy(child: &mut Child, listen: &str) -> Result<(), String> {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("an HTTP client");
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("it exited ({status})"));
        }
        if let Ok(r) = client.get(format!("http://{listen}/healthz")).send()
            && r.status().is_success()
        {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(40) {
            return Err("no answer to /healthz within 40 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

fn tail(s: &str, lines: usize) -> String {
    let all: Vec<&str> = s.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
