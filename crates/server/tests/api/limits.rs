//! The server's own limits on requests and connections: `--concurrency` bounds the whole
//! server while long-polls count apart, and an idle connection stays open as long as every
//! answer announces (`keep-alive: timeout=N`).

use std::time::{Duration, Instant};

use crate::common::{self, TestServer, code};
use crate::sqlite;
use delayq_core::Limits;
use delayq_server::ServerConfig;
use serde_json::json;

/// Holds a request in flight: its headers are sent, its body never ends, so the server has
/// taken the request's permit and waits in the handler.
fn request_in_flight(s: &common::TestServer, path: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(s.addr).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{",
        s.addr
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.flush().unwrap();
    stream
}

/// True when the server has answered a request sent with [`request_in_flight`].
fn answered(stream: &std::net::TcpStream) -> bool {
    let mut buf = [0u8; 1];
    stream.set_nonblocking(true).unwrap();
    let got = matches!(stream.peek(&mut buf), Ok(n) if n > 0);
    stream.set_nonblocking(false).unwrap();
    got
}

/// `--concurrency` bounds the requests of the whole server, not of each route; reserves
/// (long-polls) count against their own limit, so an open long-poll does not starve pushes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_bounds_the_whole_server_issue_12() {
    // See: issue 12
    let setup = sqlite(Limits::default()).await;
    let s = TestServer::start(
        setup.engine,
        ServerConfig {
            concurrency: 1,
            max_long_polls: 1,
            ..ServerConfig::default()
        },
    )
    .await;
    let mut held = request_in_flight(&s, "/v1/topics/a/jobs");
    // Wait (bounded) until the held request has its permit. The held request and a probe
    // race for the one permit: when the probe won, the held request was answered 503 at
    // once (and holds nothing), so it is sent again.
    let start = Instant::now();
    loop {
        let (st, v) = s.get("/v1/topics/b/stats").await;
        if st == 503 {
            assert_eq!(code(&v), "overloaded", "{v}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "never shed: {st} {v}"
        );
        if answered(&held) {
            held = request_in_flight(&s, "/v1/topics/a/jobs");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Another route is refused too: the limit is the server's.
    let (st, v) = s.get("/v1/topics").await;
    assert_eq!((st, code(&v)), (503, "overloaded"), "{v}");
    // Health is never shed.
    assert_eq!(s.text("/healthz").await.0, 200);
    // A long-poll takes its own permit, not the one the held request holds...
    let client = s.client.clone();
    let url = s.url("/v1/reserve");
    let poll = tokio::spawn(async move {
        client
            .post(url)
            .json(&json!({"topics": ["lp"], "wait_ms": 1500}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    drop(held);
    // ...and pushes go through while it is open.
    let start = Instant::now();
    loop {
        let (st, v) = s
            .post(
                "/v1/topics/a/jobs",
                json!({"body": "x", "delay_ms": 60_000}),
            )
            .await;
        if st == 201 {
            break;
        }
        assert_eq!((st, code(&v)), (503, "overloaded"), "{v}");
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the held request never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A second long-poll finds the long-poll limit reached (unless the first already ended).
    let (st, v) = s
        .post("/v1/reserve", json!({"topics": ["lp"], "wait_ms": 0}))
        .await;
    if poll.is_finished() {
        assert_eq!(st, 200, "{v}");
    } else {
        assert_eq!((st, code(&v)), (503, "overloaded"), "{v}");
    }
    assert_eq!(poll.await.unwrap(), 200);
}

/// Reads one answer with a `content-length` from `stream`: its head, lowercased, and body.
fn read_answer(stream: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    use std::io::Read;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + len {
                return (head, buf[end + 4..end + 4 + len].to_vec());
            }
        }
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before a whole answer: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Every HTTP/1 answer, errors included, announces how long the server keeps the connection
/// idle (`keep-alive: timeout=N`, the request timeout in whole seconds), and the server
/// keeps it that long: a client that honours the hint (Node's `fetch`) drops the connection
/// first instead of sending a request into the server's close. Before, with a request
/// timeout shorter than the client's own idle timeout, such a request failed now and then
/// with "other side closed".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_announce_how_long_an_idle_connection_stays_open() {
    use std::io::Write;
    let setup = sqlite(Limits::default()).await;
    let config = ServerConfig {
        request_timeout: Duration::from_millis(3_900),
        max_wait: Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let s = TestServer::start(setup.engine, config).await;
    let r = s.client.get(s.url("/v1/topics")).send().await.unwrap();
    assert_eq!(r.headers()["keep-alive"], "timeout=3", "rounded down");
    let r = s.client.get(s.url("/no/such/route")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(r.headers()["keep-alive"], "timeout=3", "errors say it too");

    let addr = s.addr;
    tokio::task::spawn_blocking(move || {
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        let request = format!("GET /healthz HTTP/1.1\r\nhost: {addr}\r\n\r\n");
        conn.write_all(request.as_bytes()).unwrap();
        let (head, body) = read_answer(&mut conn);
        assert!(head.contains("\r\nkeep-alive: timeout=3"), "{head}");
        assert_eq!(body, b"ok\n");
        // Idle well within the announced time: the connection still serves a request.
        std::thread::sleep(Duration::from_secs(1));
        conn.write_all(request.as_bytes()).unwrap();
        let (head, _) = read_answer(&mut conn);
        assert!(head.starts_with("http/1.1 200"), "{head}");
        // Idle past the request timeout: the server closes it (bounded for a busy machine).
        let idle = Instant::now();
        conn.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut rest = Vec::new();
        let closed = std::io::Read::read_to_end(&mut conn, &mut rest);
        assert!(closed.is_ok() && rest.is_empty(), "{closed:?} {rest:?}");
        assert!(
            idle.elapsed() >= Duration::from_secs(3),
            "closed before the announced {:?}",
            idle.elapsed()
        );
    })
    .await
    .unwrap();
}
