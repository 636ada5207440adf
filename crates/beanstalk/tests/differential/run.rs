//! Plays a [`Script`] against a real beanstalkd and against delayq's beanstalkd server on
//! the embedded engine and on Redis (each fresh: its own process, database or
//! `redis-server`), all three at once, and compares the normalised replies step by step.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use delayq_core::Store;
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_sqlite::{SqliteConfig, SqliteEngine};
use delayq_testkit::{Beanstalkd, BeanstalkdOptions, RedisServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::normalise::{Ids, Unit, has_body, normalise, show};
use super::script::{Action, DEFAULT_WAIT, Expect, PIECE_GAP, Script};

/// How a server is told to drain.
enum Drain {
    Beanstalkd(Arc<Beanstalkd>),
    Delayq(watch::Sender<bool>),
}

/// One server under test.
struct Server {
    label: &'static str,
    addr: SocketAddr,
    drain: Drain,
}

impl Server {
    fn drain(&self) {
        match &self.drain {
            Drain::Beanstalkd(b) => b.drain(),
            Drain::Delayq(tx) => {
                let _ = tx.send(true);
            }
        }
    }
}

/// The normalised replies of each step, as one server answered them.
struct Transcript {
    label: &'static str,
    steps: Vec<Vec<String>>,
    /// Each connection's answer to one more `list-tube-used` after the last step.
    sync: Vec<String>,
}

/// Starts delayq's beanstalkd server on `engine`, on a free loopback port; it stops when
/// the returned sender says so or is dropped.
async fn delayq(
    label: &'static str,
    engine: Arc<dyn Store>,
    max_job_size: Option<usize>,
) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("cannot bind a loopback port for {label}: {e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("local address of {label}: {e}"));
    let mut options = delayq_beanstalk::Options::default();
    if let Some(z) = max_job_size {
        options.max_job_size = z;
    }
    let (tx, mut rx) = watch::channel(false);
    let shutdown = async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    tokio::spawn(async move {
        if let Err(e) = delayq_beanstalk::serve(listener, engine, options, shutdown).await {
            panic!("{label}: serve failed: {e}");
        }
    });
    Server {
        label,
        addr,
        drain: Drain::Delayq(tx),
    }
}

/// One connection of a session and the bytes read ahead on it.
struct Conn {
    stream: TcpStream,
    buf: BytesMut,
    closed: bool,
}

impl Conn {
    /// Reads one unit, waiting at most `wait`.
    async fn unit(&mut self, wait: Duration) -> Unit {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(unit) = self.take() {
                return unit;
            }
            if self.closed {
                return Unit::Closed {
                    partial: self.buf.split().to_vec(),
                };
            }
            match tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => self.closed = true,
                Ok(Ok(_)) => {}
                Err(_) => {
                    return Unit::NoAnswer {
                        waited: wait,
                        partial: self.buf.split().to_vec(),
                    };
                }
            }
        }
    }

    /// A complete unit from the front of the buffer, if there is one.
    fn take(&mut self) -> Option<Unit> {
        let end = self.buf.windows(2).position(|w| w == b"\r\n")?;
        let line = self.buf[..end].to_vec();
        if !has_body(&line) {
            let _ = self.buf.split_to(end + 2);
            return Some(Unit::Reply { line, body: None });
        }
        let len: usize = std::str::from_utf8(&line)
            .ok()
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        if self.buf.len() < end + 2 + len + 2 {
            return None;
        }
        let unit = self.buf.split_to(end + 2 + len + 2);
        let body = unit[end + 2..end + 2 + len].to_vec();
        Some(Unit::Reply {
            line,
            body: Some(body),
        })
    }

    /// Waits at most `wait` for the server to close the connection.
    async fn close(&mut self, wait: Duration) -> String {
        match self.unit(wait).await {
            Unit::Closed { partial } if partial.is_empty() => "<closed>".into(),
            Unit::NoAnswer { partial, .. } if partial.is_empty() => {
                format!("<still open after {:.1} s>", wait.as_secs_f64())
            }
            other => format!("<not closed: {other:?}>"),
        }
    }
}

/// Plays `script` against one server.
async fn play(script: &Script, server: &Server) -> Transcript {
    let mut conns: HashMap<usize, Conn> = HashMap::new();
    let mut ids = Ids::default();
    let mut steps = Vec::with_capacity(script.steps.len());
    for step in &script.steps {
        let mut out = Vec::new();
        if let Action::Send(_) | Action::Nothing | Action::HalfClose = step.action
            && !conns.contains_key(&step.conn)
        {
            let stream = TcpStream::connect(server.addr).await.unwrap_or_else(|e| {
                panic!(
                    "{}: {} cannot connect to {}: {e}",
                    script.name, server.label, server.addr
                )
            });
            let _ = stream.set_nodelay(true);
            conns.insert(
                step.conn,
                Conn {
                    stream,
                    buf: BytesMut::new(),
                    closed: false,
                },
            );
        }
        match &step.action {
            Action::Pause(d) => tokio::time::sleep(*d).await,
            Action::Drain => {
                server.drain();
                // Both servers act on the signal asynchronously.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Action::Nothing => {}
            Action::HalfClose => {
                let conn = conns.get_mut(&step.conn).unwrap_or_else(|| unreachable!());
                let _ = conn.stream.shutdown().await;
            }
            Action::Send(pieces) => {
                let conn = conns.get_mut(&step.conn).unwrap_or_else(|| unreachable!());
                for (i, piece) in pieces.iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(PIECE_GAP).await;
                    }
                    // A write to a connection the server closed may fail or not (the
                    // reads that follow tell what happened); either is no answer. A server
                    // that stops reading would block it: bounded like the reads.
                    let bytes = ids.substitute(piece);
                    let _ = tokio::time::timeout(step.wait, conn.stream.write_all(&bytes)).await;
                }
            }
        }
        if let Some(conn) = conns.get_mut(&step.conn) {
            for _ in 0..step.units {
                out.push(normalise(&conn.unit(step.wait).await, &mut ids));
            }
            if step.closed {
                out.push(conn.close(step.wait).await);
            }
        }
        let stuck = out.iter().any(|u| u.starts_with("<no answer"));
        steps.push(out);
        // A server that did not answer would only time out again on every later step.
        if stuck {
            return Transcript {
                label: server.label,
                steps,
                sync: Vec::new(),
            };
        }
    }
    // Every connection still open must have answered exactly what the script read: one more
    // command on each shows a reply the script did not count (or one that was missing).
    let mut order: Vec<usize> = conns.keys().copied().collect();
    order.sort_unstable();
    let mut sync = Vec::new();
    for c in order {
        let conn = conns.get_mut(&c).unwrap_or_else(|| unreachable!());
        let unit = if conn.closed {
            Unit::Closed {
                partial: Vec::new(),
            }
        } else {
            let write = conn.stream.write_all(b"list-tube-used\r\n");
            let _ = tokio::time::timeout(DEFAULT_WAIT, write).await;
            conn.unit(DEFAULT_WAIT).await
        };
        sync.push(format!("conn {c}: {}", normalise(&unit, &mut ids)));
    }
    Transcript {
        label: server.label,
        steps,
        sync,
    }
}

/// Compares delayq's transcript with beanstalkd's; the mismatching steps, described.
fn compare(script: &Script, reference: &Transcript, delayq: &Transcript) -> Vec<String> {
    let mut bad = Vec::new();
    for (i, step) in script.steps.iter().enumerate() {
        let theirs = reference.steps.get(i).cloned().unwrap_or_default();
        let ours = delayq.steps.get(i).cloned().unwrap_or_default();
        let problem = match &step.expect {
            Expect::Same if ours == theirs => continue,
            Expect::Same => "differs".to_owned(),
            Expect::Differs { delayq: want, .. } if ours == *want && theirs != *want => continue,
            Expect::Differs {
                difference,
                delayq: want,
            } if ours != *want => format!(
                "should differ as documented ({:?}) with delayq answering {want:?}",
                difference.name
            ),
            Expect::Differs { difference, .. } => format!(
                "was documented as a difference ({:?}) but beanstalkd answers the same: \
                 drop the expectation",
                difference.name
            ),
        };
        bad.push(format!(
            "step {i} (conn {}, {}) {problem}:\n    beanstalkd: {theirs:?}\n    {}: {ours:?}",
            step.conn,
            describe(&step.action),
            delayq.label
        ));
    }
    if bad.is_empty() && reference.sync != delayq.sync {
        bad.push(format!(
            "after the last step, one more list-tube-used on each connection differs:\n    \
             beanstalkd: {:?}\n    {}: {:?}",
            reference.sync, delayq.label, delayq.sync
        ));
    }
    bad
}

fn describe(action: &Action) -> String {
    match action {
        Action::Send(pieces) => {
            let shown: Vec<String> = pieces
                .iter()
                .map(|p| {
                    let s = show(p);
                    if s.len() > 120 {
                        format!("{}...({} bytes)", &s[..120], p.len())
                    } else {
                        s
                    }
                })
                .collect();
            format!("sent {shown:?}")
        }
        Action::Nothing => "read".into(),
        Action::Pause(d) => format!("paused {} ms", d.as_millis()),
        Action::Drain => "drained".into(),
        Action::HalfClose => "half-closed".into(),
    }
}

fn dump(t: &Transcript) -> String {
    let mut s = format!("--- {} ---\n", t.label);
    for (i, units) in t.steps.iter().enumerate() {
        if units.len() > 12 {
            let (head, rest) = units.split_at(5);
            s.push_str(&format!("{i:3}: {head:?} and {} more\n", rest.len()));
        } else {
            s.push_str(&format!("{i:3}: {units:?}\n"));
        }
    }
    s.push_str(&format!("end: {:?}\n", t.sync));
    s
}

/// Plays `script` against beanstalkd, delayq on the embedded engine and delayq on Redis, at
/// once, and panics with every mismatching step when delayq's answers are not beanstalkd's
/// (after normalisation, and apart from the documented differences the script names).
pub async fn check(script: Script) {
    let started = Instant::now();
    let beanstalkd = Arc::new(Beanstalkd::start_with(BeanstalkdOptions {
        max_job_size: script.max_job_size,
    }));
    let redis = RedisServer::start();
    let sqlite = SqliteEngine::open(SqliteConfig::memory())
        .unwrap_or_else(|e| panic!("cannot open an in-memory embedded engine: {e}"));
    let redis_engine = RedisEngine::connect(RedisConfig::new(redis.url()))
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the test redis-server: {e}"));
    let servers = [
        Server {
            label: "beanstalkd",
            addr: beanstalkd.addr(),
            drain: Drain::Beanstalkd(beanstalkd.clone()),
        },
        delayq("delayq (embedded)", Arc::new(sqlite), script.max_job_size).await,
        delayq(
            "delayq (redis)",
            Arc::new(redis_engine),
            script.max_job_size,
        )
        .await,
    ];
    let (reference, embedded, on_redis) = tokio::join!(
        play(&script, &servers[0]),
        play(&script, &servers[1]),
        play(&script, &servers[2]),
    );
    let steps_played = reference.steps.len();
    assert!(
        steps_played == script.steps.len()
            && !reference
                .steps
                .iter()
                .flatten()
                .any(|u| u.starts_with("<no answer")),
        "{}: the script does not fit beanstalkd (fix the script: a step reads more units \
         than beanstalkd sends, or waits too little):\n{}\nbeanstalkd log:\n{}",
        script.name,
        dump(&reference),
        beanstalkd.log()
    );
    assert!(
        reference
            .sync
            .iter()
            .all(|u| u.contains(": USING ") || u.ends_with(": <closed>")),
        "{}: after the script, beanstalkd still had replies the script did not read (fix the \
         unit counts):\n{}",
        script.name,
        dump(&reference)
    );
    let mut report = String::new();
    for delayq in [&embedded, &on_redis] {
        let bad = compare(&script, &reference, delayq);
        if !bad.is_empty() {
            report.push_str(&format!(
                "\n{} differs from beanstalkd at {} step(s):\n{}\n",
                delayq.label,
                bad.len(),
                bad.join("\n")
            ));
        }
    }
    if !report.is_empty() {
        panic!(
            "session {}:{report}\nfull transcripts:\n{}{}{}",
            script.name,
            dump(&reference),
            dump(&embedded),
            dump(&on_redis)
        );
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "session {} took {:.1} s: keep every session within a few seconds",
        script.name,
        took.as_secs_f64()
    );
}
