//! Server limits (issue 17): the real `delayq serve` (embedded engine) under 2,000 idle
//! connections, 600 slow clients (half a request head, then nothing; a head trickled a byte
//! at a time; a whole head and half a body) and 1,000 concurrent long-polls, all at once.
//!
//! Throughout, `/healthz` answers within 100 ms (probed every 50 ms from a connection of its
//! own, on a thread of its own, so the load's tasks do not delay the probe; the 99th
//! percentile always, the slowest probe unless other processes keep the machine's cores
//! busy), the server's
//! memory and file descriptors stay bounded and fall back when the clients leave, a job
//! pushed under the load reaches exactly one of the waiting long-polls, and every connection
//! that does not finish its request is cut by the server within its request timeout (plus a
//! margin), whatever the client does.
//!
//! The whole load runs three times (`DELAYQ_LIMITS_ROUNDS` for more). The allocator keeps
//! most of what a round freed, so the resident size stays near its peak rather than falling
//! back to the start, and the heap's fragmentation makes each round's peak a little higher
//! than the last, by less each time (measured: +12, +4.6, +2.2, +1.1 MiB on a first peak of
//! 71 MiB): from the third round on, a round may add at most a tenth of the first round's
//! peak, which a leak of a kilobyte per connection or request would exceed.
//!
//! Bounded: about 40 s. The figures of the run are printed (`--nocapture`).

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connections that connect and send nothing.
const IDLE: usize = 2000;
/// Slow clients of each of the three kinds.
const SLOW_EACH: usize = 200;
/// Concurrent long-polls (below the server's default limit of 1024 open reserves).
const LONG_POLLS: usize = 1000;
/// The server's `--request-timeout`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(4);
/// The long-polls' waits: 2 to 2.9 s (the server's `--max-wait` is 3 s, under the request
/// timeout). Like real workers, the pollers do not all ask at the same instant: their
/// first asks are spread over a second and their waits differ.
const WAIT_MS: std::ops::Range<u64> = 2000..3000;
/// How late after the request timeout a stalled connection may still be open: the server
/// accepts thousands of connections in a burst, so its timer of the last starts a little
/// after the client's.
const CUT_MARGIN: Duration = Duration::from_secs(2);
/// How long the long-polls keep asking (each asks again as soon as it is answered).
const LOAD: Duration = Duration::from_secs(8);
/// The load runs three times (`DELAYQ_LIMITS_ROUNDS` for more): the memory a round takes
/// must be reused by the next.
fn round_count() -> usize {
    std::env::var("DELAYQ_LIMITS_ROUNDS")
        .ok()
        .map(|v| v.parse().expect("DELAYQ_LIMITS_ROUNDS is a number"))
        .unwrap_or(3)
        .max(3)
}
/// The slowest `/healthz` answer allowed.
const HEALTHZ_MAX: Duration = Duration::from_millis(100);
const MIB: u64 = 1024 * 1024;

/// A `delayq serve` child process on the embedded engine, killed (by its pid) on drop.
struct Server {
    serving: support::Serving,
    addr: SocketAddr,
    _dir: TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", support::free_port())
            .parse()
            .unwrap();
        let log = dir.path().join("serve.log");
        let child = support::serve_command(&addr.to_string(), &dir.path().join("data"), &log)
            .args([
                "--request-timeout",
                &format!("{}ms", REQUEST_TIMEOUT.as_millis()),
            ])
            .args(["--max-wait", "3s"])
            .spawn()
            .unwrap();
        let server = Server {
            serving: support::Serving { child, log },
            addr,
            _dir: dir,
        };
        support::wait_listening(&addr.to_string(), || server.log());
        server
    }

    fn log(&self) -> String {
        self.serving.log()
    }

    /// The server's resident memory in bytes (VmRSS) and its open file descriptors.
    fn usage(&self) -> (u64, usize) {
        usage(self.serving.child.id())
    }
}

/// The resident memory in bytes (VmRSS) and the open file descriptors of process `pid`.
fn usage(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
    (kib * 1024, fds)
}

/// The status and the length of a whole HTTP/1.1 response at the start of `buf`, once it
/// is all there (a `content-length` body).
fn parse_response(buf: &[u8]) -> Option<(u16, usize)> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..end]).expect("a text response head");
    let status = head.get(9..12)?.parse().expect("a status code");
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().expect("a content length"))
        })
        .unwrap_or(0);
    (buf.len() >= end + length).then_some((status, end + length))
}

/// Sends `request` and reads one response: its status and body.
async fn exchange(stream: &mut TcpStream, request: &[u8]) -> std::io::Result<(u16, String)> {
    stream.write_all(request).await?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((status, len)) = parse_response(&buf) {
            let body = buf[..len]
                .split(|&b| b == b'\n')
                .next_back()
                .unwrap_or_default();
            return Ok((status, String::from_utf8_lossy(body).into_owned()));
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: delayq\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// What the `/healthz` prober saw.
#[derive(Default)]
struct Probes {
    latencies: Vec<Duration>,
    /// The slow ones (over 50 ms): when, since the first probe, and how long.
    slow: Vec<(Duration, Duration)>,
    failures: Vec<String>,
}

/// Probes `/healthz` every 50 ms on one keep-alive connection (a new one if the server
/// closed it, its connect counted in the probe) until `stop`.
fn probe(addr: SocketAddr, stop: Arc<AtomicBool>) -> Probes {
    let mut probes = Probes::default();
    let mut conn: Option<std::net::TcpStream> = None;
    let first = Instant::now();
    let mut next = first;
    while !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        match healthz(&mut conn, addr) {
            Ok(()) => {
                let took = start.elapsed();
                probes.latencies.push(took);
                if took > Duration::from_millis(50) {
                    probes.slow.push((start - first, took));
                }
            }
            Err(e) => {
                conn = None;
                probes.failures.push(e);
            }
        }
        next += Duration::from_millis(50);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    probes
}

fn healthz(conn: &mut Option<std::net::TcpStream>, addr: SocketAddr) -> Result<(), String> {
    if conn.is_none() {
        let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .map_err(|e| format!("connect: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        s.set_nodelay(true).unwrap();
        *conn = Some(s);
    }
    let s = conn.as_mut().expect("a connection");
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: delayq\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        if let Some((status, len)) = parse_response(&buf) {
            return match (status, buf[..len].ends_with(b"ok\n")) {
                (200, true) => Ok(()),
                _ => Err(format!("answer {:?}", String::from_utf8_lossy(&buf))),
            };
        }
        match s.read(&mut chunk) {
            Ok(0) => return Err("closed".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

/// How a slow client behaves.
#[derive(Clone, Copy, Debug)]
enum Slow {
    /// Connects and sends nothing.
    Idle,
    /// Sends half a request head, then nothing.
    HalfHead,
    /// Sends a request head one byte every 500 ms (the classic slowloris).
    Trickle,
    /// Sends a whole head announcing a 100-byte body, 10 bytes of it, then nothing.
    HalfBody,
}

/// What happened to a slow client: how long after it connected the server closed the
/// connection, and the status of the answer it got first, if any.
type Cut = Result<(Duration, Option<u16>), String>;

/// Opens `n` connections, 50 every 25 ms (each batch connected before the next starts): at
/// most 2,000 new connections a second, so that the server's accept queue never overflows
/// (a connection the kernel holds unaccepted would start its timeout late). Arriving all in
/// the same millisecond, 3,600 connections keep a debug build's threads busy for a while,
/// `/healthz` included (up to 400 ms on two busy cores), and so do their timeouts, which
/// then all fire together.
async fn connect_all(addr: SocketAddr, n: usize) -> Vec<(TcpStream, Instant)> {
    const BATCH: usize = 50;
    let mut all = Vec::with_capacity(n);
    while all.len() < n {
        let mut batch = tokio::task::JoinSet::new();
        for _ in 0..BATCH.min(n - all.len()) {
            batch.spawn(async move {
                let s = TcpStream::connect(addr).await.expect("connect");
                (s, Instant::now())
            });
        }
        all.extend(batch.join_all().await);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    all
}

async fn slow_client(mut s: TcpStream, connected: Instant, kind: Slow) -> Cut {
    let head = "POST /v1/topics/limits/jobs HTTP/1.1\r\nhost: delayq\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n";
    let deadline = REQUEST_TIMEOUT + CUT_MARGIN + Duration::from_secs(5);
    let mut received = Vec::new();
    let mut chunk = [0u8; 1024];
    let mut sent = 0;
    let sending = match kind {
        Slow::Idle => 0,
        Slow::HalfHead => head.len() / 2,
        Slow::Trickle => head.len(),
        Slow::HalfBody => head.len() + 10,
    };
    let bytes = format!("{head}{{\"body\":\"xxxxxxxxxxxxxxxxxxxxxxxxx").into_bytes();
    if !matches!(kind, Slow::Trickle) {
        s.write_all(&bytes[..sending])
            .await
            .map_err(|e| format!("{kind:?}: write: {e}"))?;
        sent = sending;
    }
    loop {
        let step = if matches!(kind, Slow::Trickle) && sent < sending {
            Duration::from_millis(500)
        } else {
            deadline
        };
        match tokio::time::timeout(step, s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => received.extend_from_slice(&chunk[..n]),
            Err(_) if connected.elapsed() >= deadline => {
                return Err(format!(
                    "{kind:?}: still open {} s after it connected",
                    deadline.as_secs()
                ));
            }
            Err(_) => {
                // A trickling client's next byte; a write to a closed connection ends it.
                if s.write_all(&bytes[sent..sent + 1]).await.is_err() {
                    break;
                }
                sent += 1;
            }
        }
    }
    let status = parse_response(&received).map(|(status, _)| status);
    Ok((connected.elapsed(), status))
}

/// One long-poll client: asks first after `start`, then again as soon as it is answered,
/// until `until`; the number of answers and the jobs it got.
async fn long_poller(
    mut s: TcpStream,
    start: Duration,
    wait_ms: u64,
    until: Instant,
) -> Result<(usize, usize), String> {
    tokio::time::sleep(start).await;
    let request = post(
        "/v1/reserve",
        &format!(r#"{{"topics":["limits"],"wait_ms":{wait_ms}}}"#),
    );
    let (mut answers, mut jobs) = (0, 0);
    while Instant::now() < until {
        let (status, body) = exchange(&mut s, &request)
            .await
            .map_err(|e| format!("reserve: {e}"))?;
        if status != 200 {
            return Err(format!("reserve answered {status}: {body}"));
        }
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        let got = v["jobs"].as_array().map_or(0, Vec::len);
        if got > 0 {
            // Acked at once, on the same connection.
            let receipt = v["jobs"][0]["receipt"].as_str().unwrap_or_default();
            let ack = post("/v1/ack", &format!(r#"{{"receipts":["{receipt}"]}}"#));
            let (status, body) = exchange(&mut s, &ack)
                .await
                .map_err(|e| format!("ack: {e}"))?;
            if status != 200 || !body.contains(r#""ok":true"#) {
                return Err(format!("ack answered {status}: {body}"));
            }
        }
        answers += 1;
        jobs += got;
    }
    Ok((answers, jobs))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// The server's resident memory and open descriptors, sampled every 100 ms until `stop`.
fn sample(pid: u32, stop: Arc<AtomicBool>) -> Vec<(Instant, u64, usize)> {
    let mut samples = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let (rss, fds) = usage(pid);
        samples.push((Instant::now(), rss, fds));
        std::thread::sleep(Duration::from_millis(100));
    }
    samples
}

/// What one round of load saw.
struct Round {
    start: Instant,
    end: Instant,
    cuts: Vec<(Slow, Duration, Option<u16>)>,
    cut_failures: Vec<String>,
    answers: usize,
    delivered: usize,
    poll_failures: Vec<String>,
}

/// One round: the long-polls, then the idle and slow connections, then (2 s in) a push
/// that one of the long-polls must get; returns when every client is done.
async fn round(addr: SocketAddr, n: usize) -> Round {
    let start = Instant::now();
    let until = start + LOAD;
    let pollers: Vec<_> = connect_all(addr, LONG_POLLS)
        .await
        .into_iter()
        .enumerate()
        .map(|(i, (s, _))| {
            let first = Duration::from_millis(i as u64 % 1000);
            let wait = WAIT_MS.start + (i as u64 * 100) % (WAIT_MS.end - WAIT_MS.start);
            tokio::spawn(long_poller(s, first, wait, until))
        })
        .collect();
    let mut slow = Vec::new();
    for (i, (s, connected)) in connect_all(addr, IDLE + 3 * SLOW_EACH)
        .await
        .into_iter()
        .enumerate()
    {
        let kind = match i {
            i if i < IDLE => Slow::Idle,
            i if i < IDLE + SLOW_EACH => Slow::HalfHead,
            i if i < IDLE + 2 * SLOW_EACH => Slow::Trickle,
            _ => Slow::HalfBody,
        };
        slow.push((kind, tokio::spawn(slow_client(s, connected, kind))));
    }

    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let push = format!(r#"{{"id":"under-load-{n}","body":"x"}}"#);
    let (st, body) = exchange(&mut s, &post("/v1/topics/limits/jobs", &push))
        .await
        .unwrap();
    assert_eq!(st, 201, "{body}");
    drop(s);

    let (mut cuts, mut cut_failures) = (Vec::new(), Vec::new());
    for (kind, task) in slow {
        match task.await.unwrap() {
            Ok((after, status)) => cuts.push((kind, after, status)),
            Err(e) => cut_failures.push(e),
        }
    }
    let (mut answers, mut delivered, mut poll_failures) = (0, 0, Vec::new());
    for task in pollers {
        match task.await.unwrap() {
            Ok((a, j)) => {
                answers += a;
                delivered += j;
            }
            Err(e) => poll_failures.push(e),
        }
    }
    Round {
        start,
        end: Instant::now(),
        cuts,
        cut_failures,
        answers,
        delivered,
        poll_failures,
    }
}

impl Round {
    /// The longest a connection of `kind` stayed open.
    fn worst(&self, kind: fn(&Slow) -> bool) -> f64 {
        let worst = self.cuts.iter().filter(|c| kind(&c.0)).map(|c| c.1).max();
        worst.unwrap_or_default().as_secs_f64()
    }

    fn check(&self, n: usize) {
        // Every connection that did not finish its request was cut by the server in time.
        assert!(
            self.cut_failures.is_empty(),
            "round {n}: {} of {} slow connections were not cut, e.g. {:?}",
            self.cut_failures.len(),
            IDLE + 3 * SLOW_EACH,
            &self.cut_failures[..self.cut_failures.len().min(3)]
        );
        for (kind, after, status) in &self.cuts {
            assert!(
                *after >= REQUEST_TIMEOUT - Duration::from_millis(100)
                    && *after <= REQUEST_TIMEOUT + CUT_MARGIN,
                "round {n}: a {kind:?} connection was cut after {after:?}, the request \
                 timeout is {REQUEST_TIMEOUT:?} (+ {CUT_MARGIN:?})"
            );
            // A head that never ends is answered 408 (or not at all) as the connection is
            // closed; a half-sent body is the handler's to wait for: 503 `timeout`.
            let expected = match kind {
                Slow::HalfBody => matches!(status, None | Some(503)),
                _ => matches!(status, None | Some(408)),
            };
            assert!(expected, "round {n}: {kind:?} got an answer {status:?}");
        }
        // Every long-poll was answered (200) each time it asked, and the job pushed under
        // the load went to exactly one of them.
        assert!(
            self.poll_failures.is_empty(),
            "round {n}: {} long-polls failed, e.g. {:?}",
            self.poll_failures.len(),
            &self.poll_failures[..self.poll_failures.len().min(3)]
        );
        assert!(
            self.answers >= LONG_POLLS * 2,
            "round {n}: only {} long-poll answers",
            self.answers
        );
        assert_eq!(
            self.delivered, 1,
            "round {n}: the job pushed under the load"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_slow_and_long_polling_clients_do_not_hurt_the_server_issue_17() {
    // See: issue 17 (server limits).
    let needed = (IDLE + 3 * SLOW_EACH + LONG_POLLS) as u64 * 2 + 256;
    let limit = rlimit::increase_nofile_limit(needed).expect("raise RLIMIT_NOFILE");
    assert!(
        limit >= needed,
        "this test needs {needed} open files (its clients and, inherited, the server's \
         connections); the hard limit is {limit}: raise it (ulimit -Hn)"
    );

    let server = Server::start();
    let addr = server.addr;
    // Warm up: one push and one reserve, so the engine has its pages in memory.
    {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let (st, _) = exchange(&mut s, &post("/v1/topics/warm/jobs", r#"{"body":"x"}"#))
            .await
            .unwrap();
        assert_eq!(st, 201);
        let (st, body) = exchange(&mut s, &post("/v1/reserve", r#"{"topics":["warm"]}"#))
            .await
            .unwrap();
        assert_eq!(st, 200, "{body}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_before, fds_before) = server.usage();

    let stop = Arc::new(AtomicBool::new(false));
    let prober = {
        let stop = stop.clone();
        std::thread::spawn(move || probe(addr, stop))
    };
    let sampler = {
        let (stop, pid) = (stop.clone(), server.serving.child.id());
        std::thread::spawn(move || sample(pid, stop))
    };
    let probing = Instant::now();
    let mut rounds = Vec::new();
    for n in 1..=round_count() {
        rounds.push(round(addr, n).await);
        // The clients left: wait (bounded) until the server's descriptors are back.
        let settle = Instant::now();
        while server.usage().1 > fds_before + 2 && settle.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let probes = prober.join().unwrap();
    let samples = sampler.join().unwrap();
    let (rss_after, fds_after) = server.usage();
    let probed = probing.elapsed();

    let peak = |r: &Round| {
        let window = samples.iter().filter(|s| s.0 >= r.start && s.0 <= r.end);
        window.fold((0, 0), |(rss, fds), s| (s.1.max(rss), s.2.max(fds)))
    };
    let mut latencies = probes.latencies.clone();
    latencies.sort();
    let mib = |b: u64| b as f64 / MIB as f64;
    for (i, r) in rounds.iter().enumerate() {
        let (rss, fds) = peak(r);
        println!(
            "limits round {}: {IDLE} idle + {} slow connections ({SLOW_EACH} each: half head, \
             trickle, half body) + {LONG_POLLS} long-polls ({} answers, {} job) for {:.1} s; \
             open the longest: idle {:.2} s, half head {:.2} s, trickle {:.2} s, half body \
             {:.2} s (request timeout {} s); peak RSS {:.1} MiB, peak fds {fds}",
            i + 1,
            3 * SLOW_EACH,
            r.answers,
            r.delivered,
            (r.end - r.start).as_secs_f64(),
            r.worst(|k| matches!(k, Slow::Idle)),
            r.worst(|k| matches!(k, Slow::HalfHead)),
            r.worst(|k| matches!(k, Slow::Trickle)),
            r.worst(|k| matches!(k, Slow::HalfBody)),
            REQUEST_TIMEOUT.as_secs(),
            mib(rss),
        );
    }
    println!(
        "limits: healthz {} probes in {:.1} s, {} failed, p50 {:.1} ms, p99 {:.1} ms, max \
         {:.1} ms (over 50 ms at, since the first probe: {:?}); RSS before {:.1} MiB, after \
         {:.1} MiB; fds before {fds_before}, after {fds_after}",
        latencies.len(),
        probed.as_secs_f64(),
        probes.failures.len(),
        percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
        percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
        latencies.last().unwrap().as_secs_f64() * 1000.0,
        probes.slow,
        mib(rss_before),
        mib(rss_after),
    );

    for (i, r) in rounds.iter().enumerate() {
        r.check(i + 1);
    }
    // /healthz answered every 50 ms within 100 ms throughout.
    assert!(
        probes.failures.is_empty(),
        "/healthz failed: {:?}",
        probes.failures
    );
    assert!(
        latencies.len() as f64 >= probed.as_secs_f64() * 1000.0 / 50.0 * 0.8,
        "only {} probes in {probed:?}",
        latencies.len()
    );
    // The slowest probe is held to 100 ms unless other processes kept the machine's
    // cores busy (a load average over twice the cores: a developer's machine running
    // builds); the 99th percentile always is.
    let worst = *latencies.last().unwrap();
    let p99 = percentile(&latencies, 0.99);
    assert!(
        p99 <= HEALTHZ_MAX,
        "/healthz p99 {p99:?}, over {HEALTHZ_MAX:?}"
    );
    let cpus = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let load: f64 = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    if worst > HEALTHZ_MAX && load > 2.0 * cpus {
        eprintln!(
            "limits: NOT ASSERTED: /healthz max {worst:?} (limit {HEALTHZ_MAX:?}), the machine \
             is busy with other work (load average {load:.1} on {cpus} cores)"
        );
    } else {
        assert!(
            worst <= HEALTHZ_MAX,
            "/healthz took {worst:?} (p99 {p99:?}), over {HEALTHZ_MAX:?} (load average \
             {load:.1} on {cpus} cores)"
        );
    }
    // Memory stayed bounded, and each round reused what the previous one took; every
    // connection's descriptor was given back.
    let peaks: Vec<(u64, usize)> = rounds.iter().map(peak).collect();
    let first = peaks[0];
    assert!(
        first.1 >= fds_before + IDLE + LONG_POLLS,
        "the server never held the connections ({} descriptors at the peak)",
        first.1
    );
    for (n, pair) in peaks.windows(2).enumerate().skip(1) {
        assert!(
            pair[1].0 <= pair[0].0 + first.0 / 10,
            "round {} took {:.1} MiB, round {} {:.1} MiB: more than a tenth of the first \
             round's peak ({:.1} MiB) again",
            n + 2,
            mib(pair[1].0),
            n + 1,
            mib(pair[0].0),
            mib(first.0)
        );
    }
    let highest = peaks.iter().map(|p| p.0).max().unwrap_or_default();
    assert!(highest < 200 * MIB, "peak RSS {:.1} MiB", mib(highest));
    assert!(
        rss_after <= highest,
        "RSS after the clients left {:.1} MiB, over the peak",
        mib(rss_after)
    );
    assert!(
        fds_after <= fds_before + 2,
        "the server holds {fds_after} descriptors after the clients left, {fds_before} before"
    );
}
