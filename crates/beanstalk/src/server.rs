//! The listener (TCP, or a Unix domain socket): accepts connections up to a limit, runs each
//! one (read, parse, run, reply) in its own task, and stops on the shutdown future: puts
//! answer `DRAINING`, waiting reserves end, and every connection closes once its current
//! command has answered, giving back the jobs it held.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;

use bytes::BytesMut;
use delayq_core::Store;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tracing::{info, warn};

use crate::proto::{Command, Parser, Reply, Step};
use crate::put::Put;
use crate::session::{Next, Session};
use crate::shared::{Options, Shared};

/// Serves beanstalkd's protocol on `listener` until `shutdown` resolves.
///
/// # Errors
/// When the default tube cannot be mapped to a topic (never), or accepting fails for good.
pub async fn serve(
    listener: TcpListener,
    engine: Arc<dyn Store>,
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
    engine: Arc<dyn Store>,
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
    engine: Arc<dyn Store>,
    options: Options,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared::new(engine, options.clone())?);
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
    shared.drain();
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
