//! Push delivery through the binary (issue 20): `delayq destination` and the config file's
//! `[destinations]`, and a forwarding server killed with SIGKILL mid-send: the job is sent
//! again once its lease ran out, by the next server, never lost. The receiver is a plain
//! HTTP/1.1 server in the test (threads over `std::net`), able to hold requests unanswered.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_delayq");
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// One request the receiver took: its headers (lowercase names) and body.
#[derive(Clone, Debug)]
struct Req {
    headers: HashMap<String, String>,
    body: String,
}

impl Req {
    fn job(&self) -> (&str, u32) {
        (
            self.headers["delayq-job-id"].as_str(),
            self.headers["delayq-attempt"].parse().unwrap(),
        )
    }
}

/// A webhook receiver on a free loopback port: records every request, answers 204, or
/// holds requests unanswered while `hold` is set.
struct Receiver {
    addr: SocketAddr,
    got: Arc<Mutex<Vec<Req>>>,
    hold: Arc<AtomicBool>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let got: Arc<Mutex<Vec<Req>>> = Arc::default();
        let hold = Arc::new(AtomicBool::new(false));
        let (g, h) = (got.clone(), hold.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (g, h) = (g.clone(), h.clone());
                std::thread::spawn(move || serve_connection(conn, &g, &h));
            }
        });
        Receiver { addr, got, hold }
    }

    fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    fn got(&self) -> Vec<Req> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (bounded) until it took `n` requests.
    fn wait_for(&self, n: usize, limit: Duration) -> Vec<Req> {
        let start = Instant::now();
        loop {
            let got = self.got();
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < limit,
                "{} of {n} requests: {got:?}",
                got.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn serve_connection(conn: TcpStream, got: &Mutex<Vec<Req>>, hold: &AtomicBool) {
    let mut writer = conn.try_clone().unwrap();
    let mut reader = BufReader::new(conn);
    loop {
        let mut headers = HashMap::new();
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.insert(k.trim().to_lowercase(), v.trim().to_string());
            }
        }
        let len: usize = headers
            .get("content-length")
            .map_or(0, |v| v.parse().unwrap());
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        got.lock().unwrap().push(Req {
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        let start = Instant::now();
        while hold.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if writer
            .write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
            .is_err()
        {
            return;
        }
    }
}

/// A `delayq serve` child on a free port, killed on drop.
struct Server {
    serving: support::Serving,
    url: String,
}

impl Server {
    fn start(data: &Path, extra: &[&str]) -> Server {
        let listen = format!("127.0.0.1:{}", support::free_port());
        let log = data.with_extension(format!("{}.log", support::free_port()));
        let child = support::serve_command(&listen, data, &log)
            .args(extra)
            .spawn()
            .unwrap();
        let s = Server {
            serving: support::Serving { child, log },
            url: format!("http://{listen}"),
        };
        support::wait_listening(&listen, || s.serving.log());
        s
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .args(["--server", &self.url])
            .env_remove("DELAYQ_TOKEN")
            .env_remove("DELAYQ_WEBHOOK_SECRETS")
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "{args:?} failed ({:?}): {}{}\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            self.serving.log()
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn kill(mut self) {
        self.serving.child.kill().unwrap();
        self.serving.child.wait().unwrap();
    }
}

/// `delayq destination set | get | delete`, and `[destinations]` in the config file: both
/// reach the engine and the forwarder; secrets never come back; a bad one is refused with
/// its field, by the command (exit 1, nothing stored) and by `serve` (before it serves).
#[test]
fn destinations_from_the_command_line_and_the_config_file_issue_20() {
    let dir = tempfile::tempdir().unwrap();
    let r = Receiver::start();
    let config = dir.path().join("delayq.toml");
    std::fs::write(
        &config,
        format!(
            "[destinations.\"from-config\"]\ntype = \"webhook\"\nurl = \"{}\"\nsecrets = [\"{SECRET}\"]\nmax_concurrency = 2\n",
            r.url()
        ),
    )
    .unwrap();
    let s = Server::start(
        &dir.path().join("data"),
        &["--config", config.to_str().unwrap()],
    );
    let shown = s.ok(&["destination", "get", "from-config"]);
    assert!(
        shown.contains(&r.url()) && shown.contains("secrets 1"),
        "{shown}"
    );
    // Its topic's unset retry settings follow the receiver schedule, as through the API.
    let settings = s.ok(&["topic", "get", "from-config", "--json"]);
    assert!(settings.contains(r#""max_attempts":10"#), "{settings}");

    // A bad secret: refused naming it, nothing stored.
    let o = s.run(&[
        "destination",
        "set",
        "cli",
        "--webhook",
        &r.url(),
        "--secret",
        "whsec_c2hvcnQ=",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("secrets/0") || err.contains("secrets[0]"),
        "{err}"
    );
    assert_eq!(
        s.run(&["destination", "get", "cli"]).status.code(),
        Some(3),
        "nothing stored"
    );

    let set = s.ok(&[
        "destination",
        "set",
        "cli",
        "--webhook",
        &r.url(),
        "--secret",
        SECRET,
        "--header",
        "x-tenant=t-1",
        "--header",
        "x-api-key=k-1",
        "--content-type",
        "text/plain",
        "--max-concurrency",
        "2",
    ]);
    assert!(
        set.contains("x-tenant") && set.contains("x-api-key") && !set.contains(SECRET),
        "{set}"
    );
    // Only the values of headers that carry credentials are masked (issue 36).
    let json = s.ok(&["destination", "get", "cli", "--json"]);
    assert!(
        json.contains(r#""secret_count":1"#)
            && !json.contains("whsec_")
            && json.contains("t-1")
            && !json.contains("k-1"),
        "{json}"
    );

    s.ok(&["push", "cli", "hello", "--id", "c1"]);
    s.ok(&["push", "from-config", "hi", "--id", "f1"]);
    let got = r.wait_for(2, Duration::from_secs(20));
    let by_job: HashMap<&str, &Req> = got.iter().map(|q| (q.job().0, q)).collect();
    assert_eq!(by_job["c1"].body, "hello");
    assert_eq!(by_job["c1"].headers["x-tenant"], "t-1");
    assert_eq!(by_job["c1"].headers["content-type"], "text/plain");
    assert_eq!(by_job["c1"].headers["delayq-topic"], "cli");
    assert_eq!(by_job["f1"].body, "hi");
    assert!(by_job["f1"].headers["webhook-signature"].starts_with("v1,"));

    let deleted = s.ok(&["destination", "delete", "cli"]);
    assert!(deleted.contains("no destination"), "{deleted}");
    assert_eq!(s.run(&["destination", "get", "cli"]).status.code(), Some(3));
    assert_eq!(
        s.run(&["destination", "delete", "cli"]).status.code(),
        Some(3)
    );

    // A NATS JetStream subject and a RabbitMQ exchange (their sends: crates/push/tests).
    let brokers: [(&[&str], &str); 2] = [
        (
            &["--nats", "nats://127.0.0.1:1", "--subject", "orders.cancel"],
            "nats nats://127.0.0.1:1 subject orders.cancel",
        ),
        (
            &[
                "--rabbitmq",
                "amqp://127.0.0.1:1/%2f",
                "--exchange",
                "orders",
                "--routing-key",
                "order.cancel",
                "--content-type",
                "application/json",
            ],
            r#"rabbitmq amqp://127.0.0.1:1/%2f exchange "orders" routing-key "order.cancel"  content-type application/json"#,
        ),
    ];
    for (flags, line) in brokers {
        let mut args = vec!["destination", "set", "brokered"];
        args.extend_from_slice(flags);
        s.ok(&args);
        let shown = s.ok(&["destination", "get", "brokered"]);
        assert!(shown.contains(line), "{shown}");
    }
    // Sends that fail (nothing listens on port 1) log why, with the password masked; no
    // secret is ever logged.
    s.ok(&[
        "destination",
        "set",
        "brokered",
        "--rabbitmq",
        "amqp://u:hush-hush@127.0.0.1:1/%2f",
        "--routing-key",
        "k",
    ]);
    s.ok(&["push", "brokered", "x", "--id", "b1"]);
    let start = std::time::Instant::now();
    while !s.serving.log().contains("forwarding to RabbitMQ") {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{}",
            s.serving.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = s.serving.log();
    assert!(log.contains("u:***@127.0.0.1:1"), "{log}");
    for secret in ["hush-hush", SECRET, &SECRET["whsec_".len()..]] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
    drop(s);

    // A config file with a bad destination stops `serve` before it serves, naming it.
    std::fs::write(
        &config,
        format!(
            "[destinations.\"bad\"]\ntype = \"webhook\"\nurl = \"{}\"\nsecrets = [\"nope\"]\n",
            r.url()
        ),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{}", support::free_port()),
        ])
        .arg("--data-dir")
        .arg(dir.path().join("data2"))
        .args(["--config", config.to_str().unwrap()])
        .env_remove("DELAYQ_REDIS_URL")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("[destinations.\"bad\"]") && err.contains("secrets[0]"),
        "{err}"
    );
}

/// A server killed (SIGKILL) while its send is in flight loses nothing: the next server on
/// the same store sends the job again once its lease ran out (attempt 2), and acks it when
/// the receiver answers. On the embedded engine (the next server reopens the data
/// directory) and on Redis (a second server already running beside the first).
#[test]
fn a_server_killed_mid_send_loses_nothing_issue_20() {
    for engine in ["embedded", "redis"] {
        let dir = tempfile::tempdir().unwrap();
        let redis = (engine == "redis").then(delayq_testkit::RedisServer::start);
        let extra: Vec<String> = match &redis {
            Some(r) => vec!["--redis".into(), r.url()],
            None => vec![],
        };
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let data = dir.path().join("data");
        let r = Receiver::start();
        r.hold.store(true, Ordering::SeqCst);
        let first = Server::start(&data, &extra);
        first.ok(&[
            "destination",
            "set",
            "k",
            "--webhook",
            &r.url(),
            "--secret",
            SECRET,
        ]);
        first.ok(&["push", "k", "payload", "--id", "k1", "--ttr", "2s"]);
        let got = r.wait_for(1, Duration::from_secs(20));
        assert_eq!(got[0].job(), ("k1", 1), "{engine}");
        // The send is in flight (the receiver holds it): kill the sender.
        let second = match engine {
            "redis" => {
                let second = Server::start(&dir.path().join("data-2"), &extra);
                first.kill();
                second
            }
            _ => {
                first.kill();
                Server::start(&data, &extra)
            }
        };
        r.hold.store(false, Ordering::SeqCst);
        let got = r.wait_for(2, Duration::from_secs(30));
        assert_eq!(
            got[1].job(),
            ("k1", 2),
            "{engine}: sent again after the lease"
        );
        assert_eq!(got[1].body, "payload");
        assert_eq!(
            got[0].headers["webhook-id"], got[1].headers["webhook-id"],
            "one id for every attempt"
        );
        // Acked: the job is gone.
        let start = Instant::now();
        while second.run(&["get", "k", "k1"]).status.code() != Some(3) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{engine}: not acked"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(r.got().len(), 2, "{engine}: sent more than twice");
    }
}
