//! beanstalkd 1.12, in memory or with its binlog (`-b`, fsync at most every 50 ms, the
//! default), driven by a pipelined client written here: a producer writes a whole batch of
//! `put`s before reading the answers; each consumer connection sends `delete` and its next
//! `reserve-with-timeout` in one write. The server's CPU is reported beside the figures, to
//! show whether the server or this client is the bottleneck.
//!
//! The client, its fill, drain and delayed run ([`Pipelined`]) take only a port: the same
//! code drives the delayq server's beanstalkd port (`delayq_beanstalk`).
//!
//! beanstalkd takes delays in whole seconds: a job asked for `d` ms is put with
//! `ceil(d / 1000)` s (never early), and its lateness is measured against the asked time
//! (`host`) and against the whole second it was given (`own`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use async_trait::async_trait;
use delayq_bench::clock;
use delayq_bench::driver::{DelayedSpec, Delays, DrainReport};
use delayq_testkit::RedisServer;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::{DelayedRun, Env, Footprint, Kind, Pids, System, Tally};
use crate::suite::procs;

/// A beanstalkd server.
pub(crate) struct Beanstalk {
    binlog: Option<TempDir>,
    server: procs::Owned,
    pub(crate) port: u16,
}

impl Beanstalk {
    /// Starts beanstalkd on a free port, with a binlog in a fresh directory when asked.
    pub(crate) async fn start(env: &Env, binlog: bool) -> anyhow::Result<Self> {
        let port = procs::free_port()?;
        let mut args = vec![
            "-l".to_string(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ];
        let dir = if binlog {
            let d = tempfile::Builder::new()
                .prefix("beanstalkd-")
                .tempdir_in(&env.work)?;
            args.push("-b".into());
            args.push(d.path().display().to_string());
            Some(d)
        } else {
            None
        };
        let server = procs::Owned::spawn("beanstalkd", &env.beanstalkd, &args, None, None)?;
        procs::wait_for_port(port, Duration::from_secs(10), "beanstalkd").await?;
        Ok(Beanstalk {
            binlog: dir,
            server,
            port,
        })
    }
}

/// One connection speaking the beanstalkd protocol.
pub(crate) struct BeanstalkClient {
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    line: String,
}

/// A reserved job: its id and body.
pub(crate) type Reserved = (u64, Vec<u8>);

impl BeanstalkClient {
    /// Connects to 127.0.0.1:`port`.
    pub(crate) async fn connect(port: u16) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .context("connecting to beanstalkd")?;
        stream.set_nodelay(true)?;
        let (r, w) = stream.into_split();
        Ok(BeanstalkClient {
            read: BufReader::with_capacity(1 << 16, r),
            write: w,
            line: String::new(),
        })
    }

    async fn read_line(&mut self) -> anyhow::Result<&str> {
        self.line.clear();
        if self.read.read_line(&mut self.line).await? == 0 {
            bail!("beanstalkd closed the connection");
        }
        Ok(self.line.trim_end())
    }

    /// Puts every `(delay in s, body)` in one write, then reads every answer.
    pub(crate) async fn put_all(&mut self, jobs: &[(u64, Vec<u8>)]) -> anyhow::Result<()> {
        let mut buf = Vec::with_capacity(jobs.len() * 140);
        for (delay, body) in jobs {
            buf.extend_from_slice(format!("put 0 {delay} 60 {}\r\n", body.len()).as_bytes());
            buf.extend_from_slice(body);
            buf.extend_from_slice(b"\r\n");
        }
        self.write.write_all(&buf).await?;
        for _ in jobs {
            let l = self.read_line().await?;
            if !l.starts_with("INSERTED") {
                bail!("beanstalkd answered a put with {l:?}");
            }
        }
        Ok(())
    }

    /// Sends `delete <id>` (when given) and `reserve-with-timeout <s>` in one write.
    pub(crate) async fn send_next(
        &mut self,
        delete: Option<u64>,
        wait_s: u64,
    ) -> anyhow::Result<()> {
        let mut cmd = String::new();
        if let Some(id) = delete {
            cmd.push_str(&format!("delete {id}\r\n"));
        }
        cmd.push_str(&format!("reserve-with-timeout {wait_s}\r\n"));
        self.write.write_all(cmd.as_bytes()).await?;
        Ok(())
    }

    /// Sends a `reserve` with no timeout (an idle worker's wait).
    pub(crate) async fn send_reserve_blocking(&mut self) -> anyhow::Result<()> {
        self.write.write_all(b"reserve\r\n").await?;
        Ok(())
    }

    /// Sends `stats` and sums the `cmd-*` counters: every command the server has answered.
    pub(crate) async fn commands(&mut self) -> anyhow::Result<u64> {
        self.write.write_all(b"stats\r\n").await?;
        let l = self.read_line().await?.to_string();
        let len: usize = l
            .strip_prefix("OK ")
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("beanstalkd answered stats with {l:?}"))?;
        let mut yaml = vec![0; len + 2];
        self.read.read_exact(&mut yaml).await?;
        Ok(String::from_utf8_lossy(&yaml)
            .lines()
            .filter_map(|l| l.strip_prefix("cmd-"))
            .filter_map(|l| l.split_once(": "))
            .filter_map(|(_, v)| v.trim().parse::<u64>().ok())
            .sum())
    }

    /// Reads the answer of a `delete` sent by [`Self::send_next`].
    pub(crate) async fn read_deleted(&mut self) -> anyhow::Result<()> {
        let l = self.read_line().await?;
        if l != "DELETED" {
            bail!("beanstalkd answered a delete with {l:?}");
        }
        Ok(())
    }

    /// Reads the answer of a reserve: a job, or `None` on timeout.
    pub(crate) async fn read_reserved(&mut self) -> anyhow::Result<Option<Reserved>> {
        let l = self.read_line().await?.to_string();
        if l == "TIMED_OUT" || l == "DEADLINE_SOON" {
            return Ok(None);
        }
        let mut parts = l.split(' ');
        let (Some("RESERVED"), Some(id), Some(len)) = (parts.next(), parts.next(), parts.next())
        else {
            bail!("beanstalkd answered a reserve with {l:?}");
        };
        let id: u64 = id.parse().context("job id")?;
        let len: usize = len.parse().context("job size")?;
        let mut body = vec![0; len + 2];
        self.read.read_exact(&mut body).await?;
        body.truncate(len);
        Ok(Some((id, body)))
    }
}

/// A body asked to be due at `due_ms` and given the whole-second due `given_ms`.
fn body(due_ms: u64, given_ms: u64, size: usize) -> Vec<u8> {
    let mut b = format!("{due_ms}:{given_ms}:").into_bytes();
    if b.len() < size {
        b.resize(size, b'x');
    }
    b
}

fn given_ms(body: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(body).ok()?;
    s.split(':').nth(1)?.parse().ok()
}

/// `n` jobs for a put: whole-second delays, bodies stamped with both due times.
fn jobs(n: usize, delays: Delays, size: usize) -> Vec<(u64, Vec<u8>)> {
    let now = clock::now_ms();
    let mut rng = rand::rng();
    (0..n)
        .map(|_| {
            let d = delays.draw(&mut rng).as_millis() as u64;
            let secs = d.div_ceil(1000);
            (secs, body(now + d, now + secs * 1000, size))
        })
        .collect()
}

/// How long a `reserve-with-timeout 1` may go unanswered before its connection is dropped.
const STALL: Duration = Duration::from_secs(3);

/// Reserves beanstalkd left unanswered (see [`consume`]), over the whole run.
pub(crate) static STALLS: AtomicU64 = AtomicU64::new(0);

/// Runs `consumers` connections until the tally says stop, counting every job; a reserve
/// left unanswered for [`STALL`] is counted in `stalls`.
async fn consume(
    port: u16,
    consumers: usize,
    tally: Arc<Tally>,
    stalls: &'static AtomicU64,
) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..consumers {
        let tally = tally.clone();
        tasks.spawn(async move {
            let mut c = BeanstalkClient::connect(port).await?;
            c.send_next(None, 1).await?;
            loop {
                // beanstalkd 1.12 sometimes never answers a `reserve-with-timeout 1` (its
                // stats then show the connection still waiting): give up on such a
                // connection after 3 s and open a new one.
                let Ok(answer) = tokio::time::timeout(STALL, c.read_reserved()).await else {
                    stalls.fetch_add(1, Ordering::Relaxed);
                    if tally.stop() {
                        return Ok(());
                    }
                    c = BeanstalkClient::connect(port).await?;
                    c.send_next(None, 1).await?;
                    continue;
                };
                match answer? {
                    Some((id, b)) => {
                        let at = tally.seen(&b);
                        if let Some(given) = given_ms(&b) {
                            tally.own().record(given * 1000, at);
                        }
                        if tally.stop() {
                            // Delete it and stop: nothing more is asked for.
                            c.write
                                .write_all(format!("delete {id}\r\n").as_bytes())
                                .await?;
                            c.read_deleted().await?;
                            return anyhow::Ok(());
                        }
                        c.send_next(Some(id), 1).await?;
                        c.read_deleted().await?;
                    }
                    None if tally.stop() => return Ok(()),
                    None => c.send_next(None, 1).await?,
                }
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(())
}

/// The pipelined client's side of a system: a server speaking beanstalkd's protocol on
/// 127.0.0.1:`port` (beanstalkd, or the delayq server's beanstalkd port), and where the
/// reserves it leaves unanswered are counted. The system owning the server reports its
/// processes' CPU ([`System::pids`]).
#[derive(Clone, Copy)]
pub(crate) struct Pipelined {
    port: u16,
    stalls: &'static AtomicU64,
}

impl Pipelined {
    /// The server on 127.0.0.1:`port`; unanswered reserves counted in `stalls`.
    pub(crate) fn new(port: u16, stalls: &'static AtomicU64) -> Self {
        Pipelined { port, stalls }
    }

    /// Puts `n` jobs over two connections, batches of 1000 on each.
    pub(crate) async fn fill(self, n: usize, delays: Delays, size: usize) -> anyhow::Result<()> {
        let mut a = BeanstalkClient::connect(self.port).await?;
        let mut b = BeanstalkClient::connect(self.port).await?;
        let mut left = n;
        while left > 0 {
            let x = left.min(1000);
            let y = (left - x).min(1000);
            let (ja, jb) = (jobs(x, delays, size), jobs(y, delays, size));
            let (ra, rb) = tokio::join!(a.put_all(&ja), b.put_all(&jb));
            ra?;
            rb?;
            left -= x + y;
        }
        Ok(())
    }

    /// `consumers` connections take ready jobs until `n` were handled or `cap` passed.
    pub(crate) async fn drain(
        self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        let tally = Tally::new(n, Instant::now(), cap);
        consume(self.port, consumers, tally.clone(), self.stalls).await?;
        Ok(tally.drain())
    }

    /// Consumers run while one producer puts delayed jobs in batches.
    pub(crate) async fn delayed(self, spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        let tally = Tally::new(
            spec.jobs,
            Instant::now() + Duration::from_millis(200),
            spec.cap,
        );
        let consumers = tokio::spawn(consume(
            self.port,
            spec.consumers,
            tally.clone(),
            self.stalls,
        ));
        tokio::time::sleep_until(tally.start().into()).await;
        let mut producer = BeanstalkClient::connect(self.port).await?;
        let mut pushed = 0;
        while pushed < spec.jobs && !tally.stop() {
            let n = spec.batch.min(spec.jobs - pushed);
            producer
                .put_all(&jobs(n, Delays::Uniform(spec.spread), spec.body))
                .await?;
            pushed += n;
        }
        let push_elapsed = tally.start().elapsed();
        consumers.await??;
        Ok(tally.delayed(pushed, push_elapsed, true))
    }
}

impl Beanstalk {
    /// Its pipelined client.
    fn client(&self) -> Pipelined {
        Pipelined::new(self.port, &STALLS)
    }
}

#[async_trait]
impl System for Beanstalk {
    fn kind(&self) -> Kind {
        if self.binlog.is_some() {
            Kind::BeanstalkdBinlog
        } else {
            Kind::Beanstalkd
        }
    }

    fn pids(&self) -> Pids {
        Pids {
            store: Some(procs::Proc::One(self.server.pid())),
            queue: self.server.pid(),
            client: Some(procs::own_pid()),
        }
    }

    fn redis(&self) -> Option<&RedisServer> {
        None
    }

    async fn fill(&mut self, n: usize, delays: Delays, size: usize) -> anyhow::Result<()> {
        self.client().fill(n, delays, size).await
    }

    async fn drain(
        &mut self,
        n: usize,
        consumers: usize,
        cap: Duration,
    ) -> anyhow::Result<DrainReport> {
        self.client().drain(n, consumers, cap).await
    }

    async fn delayed(&mut self, spec: DelayedSpec) -> anyhow::Result<DelayedRun> {
        self.client().delayed(spec).await
    }

    fn endpoint(&self) -> String {
        self.port.to_string()
    }

    async fn footprint(&mut self) -> anyhow::Result<Footprint> {
        Ok(Footprint {
            memory: procs::rss_bytes(self.server.pid()),
            disk: self.binlog.as_ref().map(|d| procs::disk_bytes(d.path())),
        })
    }
}

/// The version `beanstalkd -v` prints.
pub(crate) fn version(bin: &Path) -> String {
    std::process::Command::new(bin)
        .arg("-v")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().trim_start_matches("beanstalkd ").to_string())
        .unwrap_or_else(|| "unknown".into())
}
