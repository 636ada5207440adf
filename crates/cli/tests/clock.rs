//! `delayq serve` (embedded engine) while the system clock steps an hour forwards and
//! backwards, under libfaketime: `LD_PRELOAD` of `libfaketime.so.1` with
//! `FAKETIME_TIMESTAMP_FILE` naming a file this test rewrites ("+1h", "-1h"),
//! `FAKETIME_NO_CACHE=1` so each read of the clock sees the file as it is, and
//! `FAKETIME_DONT_FAKE_MONOTONIC=1` so only the wall clock steps, as NTP or `date -s` do.
//!
//! Every time is judged by the test's own monotonic clock: nothing is delivered before its
//! delay has really passed, or much after; jobs due in 40 minutes stay delayed through a
//! step of an hour forwards; a lease lasts its real ttr through both steps. Then the server
//! is killed (SIGKILL) and restarted with the wall clock still an hour behind: the engine's
//! time goes on from where it stopped (its high-water mark) instead of going back an hour,
//! so a job pushed before the restart and a lease granted before it keep their real times,
//! and the log warns that the system clock is behind.
//!
//! Needs libfaketime (Debian: `apt-get install faketime`); budget in CI: about 20 s.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::blocking::Client;
use serde_json::{Value, json};

const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const TOPIC: &str = "clock";
/// How late a delivery or an expiry may be observed, in a debug build on a busy machine.
const SLACK: Duration = Duration::from_millis(1500);

/// Where libfaketime is, or a failure saying how to get it.
fn faketime_lib() -> PathBuf {
    let path = std::env::var_os("DELAYQ_LIBFAKETIME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(FAKETIME_LIB));
    assert!(
        path.exists(),
        "{} is missing: this test steps the system clock of `delayq serve` with libfaketime; install it (Debian: apt-get install faketime) or set DELAYQ_LIBFAKETIME",
        path.display()
    );
    path
}

/// The wall clock offset the faked processes see, rewritten by the test.
struct FakeClock {
    file: PathBuf,
}

impl FakeClock {
    fn set(&self, offset: &str) {
        // Written whole then renamed, so a process reading it never sees half a line.
        let tmp = self.file.with_extension("tmp");
        std::fs::write(&tmp, format!("{offset}\n")).unwrap();
        std::fs::rename(&tmp, &self.file).unwrap();
    }

    fn env<'a>(&'a self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("LD_PRELOAD", faketime_lib())
            .env("FAKETIME_TIMESTAMP_FILE", &self.file)
            .env("FAKETIME_NO_CACHE", "1")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
    }
}

/// A `delayq serve` child under libfaketime, killed (SIGKILL) on drop.
struct Server {
    serving: support::Serving,
    url: String,
}

impl Server {
    fn start(clock: &FakeClock, data: &Path, log: PathBuf) -> Server {
        let listen = format!("127.0.0.1:{}", support::free_port());
        let mut cmd = support::serve_command(&listen, data, &log);
        let child = clock.env(&mut cmd).spawn().unwrap();
        let server = Server {
            serving: support::Serving { child, log },
            url: format!("http://{listen}"),
        };
        support::wait_listening(&listen, || server.log());
        server
    }

    fn log(&self) -> String {
        self.serving.log()
    }
}

/// The HTTP calls of the test, each timed on the test's monotonic clock.
struct Api {
    http: Client,
    url: String,
}

impl Api {
    fn new(server: &Server) -> Api {
        Api {
            http: Client::builder()
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap(),
            url: server.url.clone(),
        }
    }

    fn call(&self, req: reqwest::blocking::RequestBuilder) -> (Value, reqwest::header::HeaderMap) {
        let resp = req.send().unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().unwrap();
        assert!(status.is_success(), "{status}: {text}");
        // Answers are JSON, but for 204s and `/healthz`.
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (body, headers)
    }

    /// Pushes `id` with a delay and a ttr; answers the due time (engine ms) and the
    /// instant the request was sent.
    fn push(&self, id: &str, delay_ms: u64, ttr_ms: u64) -> (u64, Instant) {
        let sent = Instant::now();
        let (v, _) = self.call(
            self.http
                .post(format!("{}/v1/topics/{TOPIC}/jobs", self.url))
                .json(&json!({"id": id, "body": id, "delay_ms": delay_ms, "ttr_ms": ttr_ms})),
        );
        (v["ready_at_ms"].as_u64().unwrap(), sent)
    }

    /// One long-poll reserve: (id, attempts, token) of each job, and when it came back.
    fn reserve(&self, wait_ms: u64) -> (Vec<(String, u64, u64)>, Instant) {
        let (v, _) = self.call(
            self.http
                .post(format!("{}/v1/reserve", self.url))
                .json(&json!({"topics": [TOPIC], "max": 50, "wait_ms": wait_ms})),
        );
        let at = Instant::now();
        let jobs = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["job"]["id"].as_str().unwrap().to_string(),
                    d["job"]["attempts"].as_u64().unwrap(),
                    d["token"].as_u64().unwrap(),
                )
            })
            .collect();
        (jobs, at)
    }

    fn settle(&self, id: &str, token: u64, what: &str) {
        self.call(
            self.http
                .post(format!("{}/v1/topics/{TOPIC}/jobs/{id}/{what}", self.url))
                .json(&json!({"token": token})),
        );
    }

    fn state(&self, id: &str) -> String {
        let (v, _) = self.call(
            self.http
                .get(format!("{}/v1/topics/{TOPIC}/jobs/{id}", self.url)),
        );
        v["state"].as_str().unwrap().to_string()
    }

    fn stats(&self) -> Value {
        self.call(
            self.http
                .get(format!("{}/v1/topics/{TOPIC}/stats", self.url)),
        )
        .0
    }

    /// The server's wall clock minus the real one, in seconds modulo a day, from the
    /// `date` header hyper stamps on each answer ("Sun, 06 Nov 1994 08:49:37 GMT").
    fn wall_offset_s(&self) -> i64 {
        let (_, headers) = self.call(self.http.get(format!("{}/healthz", self.url)));
        let date = headers["date"].to_str().unwrap().to_string();
        let hms: Vec<i64> = date
            .split_whitespace()
            .nth(4)
            .unwrap()
            .split(':')
            .map(|p| p.parse().unwrap())
            .collect();
        let theirs = hms[0] * 3600 + hms[1] * 60 + hms[2];
        let ours = (SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            % 86_400) as i64;
        let d = (theirs - ours).rem_euclid(86_400);
        if d > 43_200 { d - 86_400 } else { d }
    }
}

/// Asserts the server's wall clock is `offset_s` from the real one (a second either way).
fn assert_wall(api: &Api, offset_s: i64) {
    let seen = api.wall_offset_s();
    assert!(
        (seen - offset_s).abs() <= 2,
        "the server's wall clock is {seen} s off, not {offset_s}: is libfaketime working?"
    );
}

/// Waits (bounded) until `id` is no longer reserved; answers when that was first seen.
fn lease_end(api: &Api, id: &str, limit: Duration) -> Instant {
    let start = Instant::now();
    loop {
        let state = api.state(id);
        let at = Instant::now();
        if state != "reserved" {
            return at;
        }
        assert!(start.elapsed() < limit, "the lease of {id} never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn clock_steps_fire_nothing_early_and_a_restart_keeps_engine_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = FakeClock {
        file: dir.path().join("faketime"),
    };
    clock.set("+0");
    let data = dir.path().join("data");
    let server = Server::start(&clock, &data, dir.path().join("serve-1.log"));
    let api = Api::new(&server);
    assert_wall(&api, 0);

    // Jobs due in 2 to 5 s, three due in 40 minutes, and a lease of 6 s.
    let mut short = Vec::new();
    for (i, delay) in [2000u64, 2500, 3000, 4000, 5000].into_iter().enumerate() {
        let id = format!("short-{i}");
        let (_, sent) = api.push(&id, delay, 30_000);
        short.push((id, Duration::from_millis(delay), sent));
    }
    for i in 0..3 {
        api.push(&format!("far-{i}"), 40 * 60_000, 30_000);
    }
    api.push("lease", 0, 6_000);
    let (got, _) = api.reserve(1000);
    assert_eq!(
        got.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(),
        ["lease"]
    );
    let lease_taken = Instant::now();
    let lease_token = got[0].2;
    assert_eq!(faked_offset_s(&clock), 0);

    // An hour forwards now: the lease is still live, and a touch gives it 6 s from now.
    clock.set("+1h");
    assert_wall(&api, 3600);
    let touched = Instant::now();
    api.settle("lease", lease_token, "touch");
    // An hour back (from the real time) 2.5 s after the start. (The server's `date`
    // header cannot show it: hyper caches it until its wall clock passes the next second.)
    let mut stepped_back = false;
    let mut delivered = Vec::new();
    while delivered.len() < short.len() {
        assert!(
            lease_taken.elapsed() < Duration::from_secs(15),
            "only {delivered:?} were delivered"
        );
        if !stepped_back && lease_taken.elapsed() > Duration::from_millis(2500) {
            clock.set("-1h");
            assert_eq!(faked_offset_s(&clock), -3600);
            stepped_back = true;
        }
        let (got, at) = api.reserve(300);
        for (id, attempts, token) in got {
            let (_, delay, sent) = short
                .iter()
                .find(|s| s.0 == id)
                .unwrap_or_else(|| panic!("{id} was delivered early"));
            let waited = at - *sent;
            assert!(
                waited >= *delay,
                "{id} came after {waited:?}, before its {delay:?}"
            );
            assert!(
                waited <= *delay + SLACK,
                "{id} came after {waited:?}, late for {delay:?}"
            );
            assert_eq!(attempts, 1, "{id}");
            api.settle(&id, token, "ack");
            delivered.push(id);
        }
    }
    assert!(stepped_back);
    // The lease, touched (6 s more) right after the step forwards, ends 6 s after that,
    // through both steps.
    let ended = lease_end(&api, "lease", Duration::from_secs(15));
    let lease_lasted = ended - touched;
    assert!(
        lease_lasted >= Duration::from_secs(6) && lease_lasted <= Duration::from_secs(6) + SLACK,
        "the 6 s lease lasted {lease_lasted:?}"
    );
    for i in 0..3 {
        assert_eq!(api.state(&format!("far-{i}")), "delayed", "far-{i}");
    }

    // Before the restart: a job due in 3 s and a lease of 8 s, then SIGKILL with the wall
    // clock an hour behind, and a restart at once.
    let (engine_before, _) = api.push("probe-1", 0, 30_000);
    let (_, due_sent) = api.push("after-restart", 3000, 30_000);
    api.push("held", 0, 8_000);
    let mut held = None;
    for _ in 0..5 {
        let (got, at) = api.reserve(500);
        for (id, _, token) in got {
            match id.as_str() {
                "held" => held = Some((token, at)),
                "probe-1" | "lease" => api.settle(&id, token, "ack"),
                other => panic!("{other} was delivered early"),
            }
        }
        if held.is_some() {
            break;
        }
    }
    let (_, held_at) = held.expect("the 8 s job was delivered");
    drop(api);
    let down = Instant::now();
    drop(server);
    let server = Server::start(&clock, &data, dir.path().join("serve-2.log"));
    // The engine's time does not count the time it was down (the wall clock is behind its
    // mark): what was due or leased ends up to that much later, never earlier.
    let downtime = down.elapsed();
    let api = Api::new(&server);
    assert_wall(&api, -3600);
    let (engine_after, _) = api.push("probe-2", 0, 30_000);
    assert!(
        engine_after >= engine_before,
        "the engine's time went back across the restart: {engine_after} < {engine_before}"
    );
    assert!(
        server.log().contains("the system clock is behind"),
        "no warning about the clock:\n{}",
        server.log()
    );
    // The job due 3 s after its push comes then, not an hour later; the 8 s lease granted
    // before the restart ends 8 s after it was granted.
    let mut came = None;
    while came.is_none() {
        assert!(
            due_sent.elapsed() < Duration::from_secs(10),
            "after-restart never came"
        );
        let (got, at) = api.reserve(300);
        for (id, _, token) in got {
            api.settle(&id, token, "ack");
            if id == "after-restart" {
                came = Some(at);
            }
        }
    }
    let waited = came.unwrap() - due_sent;
    assert!(
        waited >= Duration::from_secs(3) && waited <= Duration::from_secs(3) + downtime + SLACK,
        "the 3 s job came after {waited:?} across a restart of {downtime:?}"
    );
    let ended = lease_end(&api, "held", Duration::from_secs(15));
    let held_lasted = ended - held_at;
    assert!(
        held_lasted >= Duration::from_secs(8)
            && held_lasted <= Duration::from_secs(8) + downtime + SLACK,
        "the 8 s lease lasted {held_lasted:?} across a restart of {downtime:?}"
    );
    // Nothing lost: the far jobs still wait, the job whose lease ended waits for its retry.
    for i in 0..3 {
        assert_eq!(api.state(&format!("far-{i}")), "delayed", "far-{i}");
    }
    assert_ne!(api.state("held"), "reserved");
    let stats = api.stats();
    assert_eq!(stats["reserved"], 0, "{stats}");
    eprintln!(
        "clock: {} jobs of 2-5 s on time through +1h and -1h, 3 jobs of 40 min still delayed; a 6 s lease lasted {lease_lasted:?}; restart (SIGKILL, down {downtime:?}) with the wall clock 1 h behind: engine time {engine_before} -> {engine_after} ms, a 3 s job came after {waited:?}, an 8 s lease lasted {held_lasted:?}",
        delivered.len()
    );
}

/// The offset a process under this fake clock sees, in seconds: `date +%s` run with it.
fn faked_offset_s(clock: &FakeClock) -> i64 {
    let out = clock
        .env(&mut Command::new("date"))
        .arg("+%s")
        .output()
        .unwrap();
    let theirs: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let ours = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    // Rounded to the minute: the two reads are a moment apart.
    (theirs - ours + 30).div_euclid(60) * 60
}
