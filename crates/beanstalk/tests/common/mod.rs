//! What the beanstalk tests share: a server on a free loopback port over an engine.

#![allow(dead_code)] // Each test file uses a different part.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use delayq_core::Store;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Serves the beanstalkd protocol over `engine` on 127.0.0.1, until the test ends.
pub async fn serve(engine: Arc<dyn Store>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(delayq_beanstalk::serve(
        listener,
        engine,
        delayq_beanstalk::Options::default(),
        std::future::pending(),
    ));
    addr
}

/// An embedded engine in memory.
pub fn memory_engine() -> Arc<dyn Store> {
    Arc::new(
        delayq_sqlite::SqliteEngine::open(delayq_sqlite::SqliteConfig::memory())
            .expect("in-memory engine"),
    )
}

/// How long one answer may take, a failing engine's included.
pub const BOUND: Duration = Duration::from_secs(20);

/// A client that sends one command at a time and reads its whole answer.
pub struct Client {
    rd: BufReader<OwnedReadHalf>,
    wr: OwnedWriteHalf,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Self {
        let (r, w) = TcpStream::connect(addr)
            .await
            .expect("connect")
            .into_split();
        Client {
            rd: BufReader::new(r),
            wr: w,
        }
    }

    /// Sends one command; answers its first line and, for a reply with a body, the body.
    /// Panics when no answer comes within [`BOUND`] or the server closes the connection.
    pub async fn call(&mut self, cmd: &str) -> (String, Vec<u8>) {
        self.wr.write_all(cmd.as_bytes()).await.expect("write");
        let mut line = String::new();
        let n = tokio::time::timeout(BOUND, self.rd.read_line(&mut line))
            .await
            .unwrap_or_else(|_| panic!("no answer to {cmd:?} within {BOUND:?}"))
            .expect("read");
        assert!(n > 0, "the server closed the connection after {cmd:?}");
        let line = line.trim_end().to_string();
        let len = match line.split(' ').collect::<Vec<_>>()[..] {
            ["RESERVED" | "FOUND", _, n] | ["OK", n] => n.parse::<usize>().expect("length"),
            _ => return (line, Vec::new()),
        };
        let mut body = vec![0; len + 2];
        self.rd.read_exact(&mut body).await.expect("body");
        body.truncate(len);
        (line, body)
    }

    /// Sends one command; answers its first line.
    pub async fn line(&mut self, cmd: &str) -> String {
        self.call(cmd).await.0
    }

    /// Puts `body` (priority 10, no delay, ttr 60) into the used tube; its number.
    pub async fn put(&mut self, body: &str) -> u64 {
        let l = self.line(&put(body)).await;
        l.strip_prefix("INSERTED ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("put answered {l:?}"))
    }
}

/// The `put` command of `body` with priority 10, no delay and ttr 60.
pub fn put(body: &str) -> String {
    format!("put 10 0 60 {}\r\n{body}\r\n", body.len())
}
