//! Clients that misbehave cannot hurt the others (issue 19): one that sends garbage, one that
//! never sends a line end, one that announces a huge body, and a crowd of connections past
//! the server's limit. Meanwhile a well-behaved client keeps putting, reserving and deleting,
//! each round trip bounded; after the crowd leaves, new clients connect again.

use std::sync::Arc;
use std::time::Duration;

use delayq_core::Store;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;

/// How long one command of the good client may take while others misbehave.
const BOUND: Duration = Duration::from_secs(5);

struct Server {
    addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    async fn start(options: delayq_beanstalk::Options) -> Self {
        let engine: Arc<dyn Store> = Arc::new(
            delayq_sqlite::SqliteEngine::open(delayq_sqlite::SqliteConfig::memory())
                .expect("in-memory engine"),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(delayq_beanstalk::serve(
            listener,
            engine,
            options,
            async move {
                let _ = stopped.await;
            },
        ));
        Server {
            addr,
            stop: Some(stop),
            task: Some(task),
        }
    }

    async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), t)
                .await
                .expect("the server stops within 10 s")
                .expect("server task")
                .expect("serve");
        }
    }
}

/// A well-behaved client.
struct Client {
    rd: BufReader<OwnedReadHalf>,
    wr: OwnedWriteHalf,
}

impl Client {
    async fn connect(addr: std::net::SocketAddr) -> Self {
        let s = TcpStream::connect(addr).await.expect("connect");
        let (r, w) = s.into_split();
        Client {
            rd: BufReader::new(r),
            wr: w,
        }
    }

    async fn line(&mut self) -> String {
        let mut l = String::new();
        tokio::time::timeout(BOUND, self.rd.read_line(&mut l))
            .await
            .expect("an answer within the bound")
            .expect("read");
        l.trim_end().to_string()
    }

    async fn send(&mut self, b: &[u8]) -> String {
        self.wr.write_all(b).await.expect("write");
        self.line().await
    }

    /// put, reserve, delete: one job's whole life, each answer checked.
    async fn round(&mut self, body: &str) {
        let put = format!("put 0 0 30 {}\r\n{body}\r\n", body.len());
        let inserted = self.send(put.as_bytes()).await;
        let id = inserted
            .strip_prefix("INSERTED ")
            .unwrap_or_else(|| panic!("put answered {inserted:?}"))
            .to_string();
        let reserved = self.send(b"reserve-with-timeout 1\r\n").await;
        assert_eq!(reserved, format!("RESERVED {id} {}", body.len()));
        let mut data = vec![0; body.len() + 2];
        tokio::time::timeout(BOUND, self.rd.read_exact(&mut data))
            .await
            .expect("the body within the bound")
            .expect("read body");
        assert_eq!(&data[..body.len()], body.as_bytes());
        assert_eq!(
            self.send(format!("delete {id}\r\n").as_bytes()).await,
            "DELETED"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_no_line_end_and_huge_bodies_do_not_hurt_another_client() {
    let server = Server::start(delayq_beanstalk::Options::default()).await;
    let mut good = Client::connect(server.addr).await;
    good.round("before").await;

    // Garbage: 256 KiB of bytes of every value, in one stream, then a line end (as in
    // beanstalkd, an over-long line is answered once, when a line end finally comes).
    let mut garbage = Client::connect(server.addr).await;
    let mut bytes: Vec<u8> = (0..262_144u32).map(|i| (i * 7919 % 251) as u8).collect();
    bytes.extend_from_slice(b"\r\n");
    garbage.wr.write_all(&bytes).await.expect("garbage");
    // Never a line end: 8 MiB of one letter. The server answers BAD_FORMAT per 224-byte
    // window and keeps none of it; the client reads nothing, so the server's writes to it
    // stall once the socket buffer fills, which must not stall anyone else.
    let mut endless = Client::connect(server.addr).await;
    let endless_task = tokio::spawn(async move {
        let chunk = vec![b'a'; 65_536];
        for _ in 0..128 {
            if endless.wr.write_all(&chunk).await.is_err() {
                break;
            }
        }
        endless
    });
    // A huge body announced, then only a little of it sent: as beanstalkd, the server
    // discards what arrives of it and answers JOB_TOO_BIG after its end, which never comes.
    let mut huge = Client::connect(server.addr).await;
    huge.wr
        .write_all(b"put 0 0 10 4294967295\r\nxxxx")
        .await
        .expect("huge put");
    let mut big = Client::connect(server.addr).await;
    let over = vec![b'b'; 65_536];
    big.wr
        .write_all(format!("put 0 0 10 {}\r\n", over.len()).as_bytes())
        .await
        .expect("big put");
    big.wr.write_all(&over).await.expect("big body");
    big.wr.write_all(b"\r\n").await.expect("crlf");
    assert_eq!(big.line().await, "JOB_TOO_BIG");
    // The connection goes on after a refused body.
    big.round("after a refused body").await;

    for i in 0..20 {
        good.round(&format!("during {i}")).await;
    }
    let garbage_answer = garbage.line().await;
    assert!(
        [
            "BAD_FORMAT",
            "UNKNOWN_COMMAND",
            "EXPECTED_CRLF",
            "JOB_TOO_BIG"
        ]
        .contains(&garbage_answer.as_str()),
        "garbage is answered with an error line, not {garbage_answer:?}"
    );
    endless_task.abort();
    drop(garbage);
    drop(huge);
    good.round("after").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_connections_past_the_limit_do_not_hurt_another_client() {
    let server = Server::start(delayq_beanstalk::Options {
        max_connections: 1000,
        ..delayq_beanstalk::Options::default()
    })
    .await;
    let mut good = Client::connect(server.addr).await;
    good.round("before").await;
    // 3,000 connections, idle: the first 999 are kept, the rest closed at once.
    let mut crowd = Vec::new();
    for _ in 0..3000 {
        match TcpStream::connect(server.addr).await {
            Ok(s) => crowd.push(s),
            Err(e) => panic!("connecting the crowd: {e}"),
        }
    }
    for i in 0..20 {
        good.round(&format!("during {i}")).await;
    }
    // Connections past the limit were closed: reading one of the last gives EOF.
    let mut last = crowd.pop().expect("a crowd");
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(BOUND, last.read(&mut b))
        .await
        .expect("a closed connection answers EOF at once")
        .unwrap_or(0);
    assert_eq!(n, 0, "a connection past the limit is closed");
    drop(crowd);
    // Once the crowd has left, new clients are served again.
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let mut fresh = Client::connect(server.addr).await;
        fresh
            .wr
            .write_all(b"list-tube-used\r\n")
            .await
            .expect("write");
        let mut l = String::new();
        let got = tokio::time::timeout(Duration::from_millis(500), fresh.rd.read_line(&mut l))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(0);
        if got > 0 {
            assert_eq!(l.trim_end(), "USING default");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a new client is served once the crowd has left"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    good.round("after").await;
    server.stop().await;
}
