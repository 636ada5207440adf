//! The listener (TCP, or a Unix domain socket): accepts connections up to a limit, runs each
//! one (read, parse, run, reply) in its own task, and stops on the shutdown future: puts
//! answer `DRAINING`, waiting reserves end, and every connection closes once its current
//! command has answered, giving back the jobs it held.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::BytesMut;
use delayq_core::{Coalescers, Engine, Topic};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tracing::{info, warn};

use crate::line::Lines;
use crate::numbers::Numbers;
use crate::proto::{Command, Parser, Reply, Step};
use crate::put::Put;
use crate::session::{Next, Session};
use crate::stats::Stats;
use crate::tube::Tube;

/// The beanstalkd protocol server's settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// The largest job body a `put` may carry (`max-job-size`); a larger one is answered
    /// `JOB_TOO_BIG`. Default 65,535 bytes, as beanstalkd's.
    pub max_job_size: usize,
    /// The most connections open at once; more are closed as soon as they are accepted.
    /// Default 10,000.
    pub max_connections: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_job_size: 65_535,
            max_connections: 10_000,
        }
    }
}

/// How many connections use, watch and wait on each tube (this server's, for `stats-tube`
/// and `stats`), and the per-tube command counters.
#[derive(Default)]
pub(crate) struct Tubes {
    inner: Mutex<HashMap<Tube, TubeCounts>>,
}

/// One tube's counts in this server.
#[derive(Default, Clone, Copy)]
pub(crate) struct TubeCounts {
    pub(crate) using: u64,
    pub(crate) watching: u64,
    pub(crate) waiting: u64,
    pub(crate) puts: u64,
    pub(crate) deletes: u64,
    pub(crate) pauses: u64,
}

/// Counts a connection as waiting on its watched tubes while it lives.
pub(crate) struct Waiting<'a> {
    tubes: &'a Tubes,
    names: Vec<Tube>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut m = self.tubes.lock();
        for t in &self.names {
            if let Some(c) = m.get_mut(t) {
                c.waiting = c.waiting.saturating_sub(1);
            }
        }
    }
}

impl Tubes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Tube, TubeCounts>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn change(&self, t: &Tube, f: impl FnOnce(&mut TubeCounts)) {
        f(self.lock().entry(t.clone()).or_default());
    }

    pub(crate) fn r#use(&self, t: &Tube) {
        self.change(t, |c| c.using += 1);
    }
    pub(crate) fn unuse(&self, t: &Tube) {
        self.change(t, |c| c.using = c.using.saturating_sub(1));
    }
    pub(crate) fn watch(&self, t: &Tube) {
        self.change(t, |c| c.watching += 1);
    }
    pub(crate) fn unwatch(&self, t: &Tube) {
        self.change(t, |c| c.watching = c.watching.saturating_sub(1));
    }
    pub(crate) fn put(&self, t: &Tube) {
        self.change(t, |c| c.puts += 1);
    }
    pub(crate) fn deleted(&self, t: &Tube) {
        self.change(t, |c| c.deletes += 1);
    }
    pub(crate) fn paused(&self, t: &Tube) {
        self.change(t, |c| c.pauses += 1);
    }
    pub(crate) fn waiting(&self, watched: &[(Tube, Topic)]) -> Waiting<'_> {
        let names: Vec<Tube> = watched.iter().map(|(t, _)| t.clone()).collect();
        for t in &names {
            self.change(t, |c| c.waiting += 1);
        }
        Waiting { tubes: self, names }
    }
    /// One tube's counts (zeros for a tube no one here has touched).
    pub(crate) fn counts(&self, t: &Tube) -> TubeCounts {
        self.lock().get(t).copied().unwrap_or_default()
    }
    /// Tubes some connection here uses or watches.
    pub(crate) fn in_use(&self) -> Vec<Tube> {
        self.lock()
            .iter()
            .filter(|(_, c)| c.using > 0 || c.watching > 0)
            .map(|(t, _)| t.clone())
            .collect()
    }
}

/// What every connection of one server shares.
pub(crate) struct Shared {
    pub(crate) engine: Arc<dyn Engine>,
    pub(crate) numbers: Numbers,
    pub(crate) coalescers: Coalescers,
    pub(crate) lines: Lines,
    pub(crate) stats: Stats,
    pub(crate) tubes: Tubes,
    pub(crate) options: Options,
    pub(crate) default_tube: (Tube, Topic),
    pub(crate) started: Instant,
    /// `stats`' `id` (random per process, as beanstalkd's) and `hostname`.
    pub(crate) server_id: String,
    pub(crate) hostname: String,
    draining: AtomicBool,
}

impl Shared {
    pub(crate) fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// A tube and its topic, or `None` when its name maps to no topic (too long once
    /// mapped): the client gets `BAD_FORMAT`.
    pub(crate) fn tube(&self, tube: &Tube) -> Option<(Tube, Topic)> {
        tube.topic().ok().map(|topic| (tube.clone(), topic))
    }

    /// Whether a tube exists as beanstalkd counts them: it is `default`, some connection
    /// here uses or watches it, or its topic holds a job (waiting, reserved or buried).
    pub(crate) async fn tube_exists(&self, tube: &Tube, topic: &Topic) -> bool {
        let here = self.tubes.counts(tube);
        if *tube == self.default_tube.0 || here.using > 0 || here.watching > 0 {
            return true;
        }
        match self.engine.stats(topic).await {
            Ok(s) => holds_jobs(&s),
            Err(_) => true,
        }
    }

    /// The tubes that exist (as [`Shared::tube_exists`]), sorted: `default`, those in use
    /// here, and those of the engine's topics (at most [`LISTED_TOPICS`] looked at) that
    /// hold a job. The topics' counts are read together (`Engine::stats_each`): a topic
    /// whose counts could not be read (a Redis Cluster primary dead or hung, found out
    /// within the slot timeout) is listed, as [`Shared::tube_exists`] takes it to exist.
    pub(crate) async fn tubes(&self) -> delayq_core::Result<Vec<Tube>> {
        let topics = self.engine.topics().await?;
        let mut tubes = vec![self.default_tube.0.clone()];
        tubes.extend(self.tubes.in_use());
        let listed: Vec<(Topic, Tube)> = topics
            .into_iter()
            .take(LISTED_TOPICS)
            .filter_map(|t| Tube::from_topic(&t).map(|tube| (t, tube)))
            .filter(|(_, tube)| !tubes.contains(tube))
            .collect();
        let (topics, listed): (Vec<Topic>, Vec<Tube>) = listed.into_iter().unzip();
        for (tube, stats) in listed
            .into_iter()
            .zip(self.engine.stats_each(&topics).await)
        {
            if stats.as_ref().map_or(true, holds_jobs) {
                tubes.push(tube);
            }
        }
        tubes.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        tubes.dedup();
        Ok(tubes)
    }
}

/// The most topics `list-tubes` and `stats` look at (one engine call each).
pub(crate) const LISTED_TOPICS: usize = 1000;

/// Whether a topic holds a job that beanstalkd would count (done jobs aside).
fn holds_jobs(s: &delayq_core::TopicStats) -> bool {
    s.delayed + s.ready + s.reserved + s.dead > 0
}

/// Serves beanstalkd's protocol on `listener` until `shutdown` resolves.
///
/// # Errors
/// When the default tube cannot be mapped to a topic (never), or accepting fails for good.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<dyn Engine>,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    run(Listener::Tcp(listener), engine, options, shutdown).await
}

/// Serves beanstalkd's protocol on a Unix domain socket (beanstalkd's `-l unix:/path`)
/// until `shutdown` resolves, then removes the socket's file once every connection has
/// drained.
///
/// # Errors
/// As [`serve`].
#[cfg(unix)]
pub async fn serve_unix(
    socket: crate::UnixSocket,
    engine: Arc<dyn Engine>,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    run(Listener::Unix(socket), engine, options, shutdown).await
}

/// Where connections come from.
enum Listener {
    Tcp(TcpListener),
    #[cfg(unix)]
    Unix(crate::UnixSocket),
}

/// An accepted connection.
enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(tokio::net::UnixStream),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<Stream> {
        match self {
            Listener::Tcp(l) => l.accept().await.map(|(s, _)| Stream::Tcp(s)),
            #[cfg(unix)]
            Listener::Unix(u) => u.listener.accept().await.map(|(s, _)| Stream::Unix(s)),
        }
    }
}

/// [`serve`] and [`serve_unix`]: the accept loop, then the drain.
async fn run(
    listener: Listener,
    engine: Arc<dyn Engine>,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let default = Tube::default_tube();
    let default_topic = default
        .topic()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let shared = Arc::new(Shared {
        numbers: Numbers::new(engine.clone()),
        coalescers: Coalescers::new(engine.clone()),
        lines: Lines::default(),
        engine,
        stats: Stats::default(),
        tubes: Tubes::default(),
        default_tube: (default, default_topic),
        started: Instant::now(),
        server_id: format!("{:016x}", rand_id()),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into()),
        draining: AtomicBool::new(false),
        options: options.clone(),
    });
    let slots = Arc::new(Semaphore::new(options.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    let mut refused_logged = false;
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, go on.
                    warn!(error = %e, "beanstalk: accepting a connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            if !refused_logged {
                warn!(
                    max = options.max_connections,
                    "beanstalk: connection limit reached; closing new connections"
                );
                refused_logged = true;
            }
            drop(stream);
            continue;
        };
        refused_logged = false;
        let shared = shared.clone();
        let stop = stop_rx.clone();
        tokio::spawn(async move {
            match stream {
                Stream::Tcp(mut s) => {
                    let _ = s.set_nodelay(true);
                    let (rd, wr) = s.split();
                    connection(rd, wr, shared, stop).await;
                }
                #[cfg(unix)]
                Stream::Unix(mut s) => {
                    let (rd, wr) = s.split();
                    connection(rd, wr, shared, stop).await;
                }
            }
            drop(permit);
        });
    }
    info!("beanstalk: draining");
    shared.draining.store(true, Ordering::Relaxed);
    let _ = stop_tx.send(true);
    // Let every connection finish its command and give back what it holds.
    let _ = slots
        .acquire_many(u32::try_from(options.max_connections).unwrap_or(u32::MAX))
        .await;
    // A Unix socket's file goes with it, now that no connection is left.
    drop(listener);
    Ok(())
}

/// The most bytes read ahead while a command runs (a client pipelining more than this waits).
const READ_AHEAD: usize = 1 << 20;

/// One connection (its two halves): read, parse, run, reply, until the client quits or goes
/// away, or the server stops.
async fn connection(
    mut rd: impl AsyncRead + Unpin,
    mut wr: impl AsyncWrite + Unpin,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    shared.stats.connected();
    let mut session = Session::new(shared.clone());
    shared.tubes.r#use(&session.used.0);
    shared.tubes.watch(&session.used.0);
    let mut parser = Parser::new(shared.options.max_job_size);
    let mut buf = BytesMut::with_capacity(4096);
    let mut out = BytesMut::with_capacity(4096);
    // Whole commands (and error replies) parsed and not yet run, in order.
    let mut pending: VecDeque<Step> = VecDeque::new();
    'conn: loop {
        while let Some(step) = parser.next(&mut buf) {
            pending.push_back(step);
        }
        if pending.is_empty() {
            // Nothing to run: write the replies at once, then wait for more.
            if !out.is_empty() {
                if wr.write_all(&out).await.is_err() {
                    break;
                }
                out.clear();
            }
            if *stop.borrow() {
                break;
            }
            tokio::select! {
                read = rd.read_buf(&mut buf) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                },
                _ = stop.changed() => {}
            }
            continue;
        }
        while let Some(step) = pending.pop_front() {
            let cmd = match step {
                Step::Command(cmd) => cmd,
                Step::Error(reply) => {
                    if matches!(reply, Reply::JobTooBig | Reply::ExpectedCrlf) {
                        shared.stats.refused_put();
                    }
                    reply.encode(&mut out);
                    continue;
                }
                Step::Close => break 'conn,
            };
            let cmd = match batched(&mut session, cmd, &mut pending, &mut out).await {
                Some(cmd) => cmd,
                None => continue,
            };
            // A command that may wait (reserve): write what is due first, and watch for the
            // client going away or the server stopping meanwhile. A waiting reserve ends
            // when the server stops (its client sees the connection close); other commands
            // finish first.
            let waits = matches!(cmd, Command::Reserve | Command::ReserveWithTimeout(_));
            if waits && !out.is_empty() {
                if wr.write_all(&out).await.is_err() {
                    break 'conn;
                }
                out.clear();
            }
            let run = session.run(cmd);
            tokio::pin!(run);
            let mut eof = false;
            let next = loop {
                tokio::select! {
                    next = &mut run => break Some(next),
                    _ = stop.changed(), if waits => {}
                    read = rd.read_buf(&mut buf), if !eof && buf.len() < READ_AHEAD => match read {
                        Ok(0) | Err(_) => eof = true,
                        Ok(_) => {}
                    },
                }
                // A client that half-closed its connection is answered TIMED_OUT at once (as
                // protocol.txt says); a stopping server closes it.
                if waits && *stop.borrow() {
                    break None;
                }
                if waits && eof {
                    break Some(Next::Reply(Reply::TimedOut));
                }
            };
            match next {
                Some(Next::Reply(reply)) => reply.encode(&mut out),
                Some(Next::Close) | None => {
                    // The replies before a `quit` are still sent.
                    let _ = wr.write_all(&out).await;
                    break 'conn;
                }
            }
        }
    }
    let _ = wr.shutdown().await;
    session.give_back().await;
    shared.stats.disconnected();
}

/// Runs `cmd` together with the commands after it when one engine call can serve them: a
/// run of `put`s (one push of the whole run), or a `delete` of a held job followed by a
/// reserve (the ack and a first look for the next job in one call, as a worker's pipelined
/// `delete` + `reserve-with-timeout`). Answers `None` when it ran them (their replies are in
/// `out`), or `cmd` back to be run alone.
async fn batched(
    session: &mut Session,
    cmd: Command,
    pending: &mut VecDeque<Step>,
    out: &mut BytesMut,
) -> Option<Command> {
    match cmd {
        Command::Put {
            pri,
            delay,
            ttr,
            body,
        } => {
            let mut run = vec![Put {
                pri,
                delay,
                ttr,
                body,
            }];
            while let Some(Step::Command(Command::Put { .. })) = pending.front() {
                if let Some(Step::Command(Command::Put {
                    pri,
                    delay,
                    ttr,
                    body,
                })) = pending.pop_front()
                {
                    run.push(Put {
                        pri,
                        delay,
                        ttr,
                        body,
                    });
                }
            }
            for _ in &run {
                session.shared.stats.count_put();
            }
            for reply in session.put_batch(run).await {
                reply.encode(out);
            }
            None
        }
        // Over several tubes a reserve looks for the most urgent job first (`reserve.rs`).
        Command::Delete(n)
            if session.holds(n)
                && session.watched.len() == 1
                && matches!(
                    pending.front(),
                    Some(Step::Command(
                        Command::Reserve | Command::ReserveWithTimeout(_)
                    ))
                ) =>
        {
            session.shared.stats.count(&Command::Delete(n));
            let (deleted, reserved) = session.delete_then_reserve(n).await;
            deleted.encode(out);
            if let Some(reserved) = reserved
                && let Some(Step::Command(next)) = pending.pop_front()
            {
                session.shared.stats.count(&next);
                reserved.encode(out);
            }
            None
        }
        cmd => Some(cmd),
    }
}

/// A per-process id: the clock's nanoseconds mixed with the process id.
fn rand_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}
