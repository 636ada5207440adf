//! [`Command`]: one beanstalkd request, as the parser hands it to the connection handler,
//! and its canonical wire form (for clients and tests).

use bytes::{BufMut, Bytes, BytesMut};

use crate::tube::Tube;

/// A well-formed beanstalkd request.
///
/// Numbers are as sent; the handler applies beanstalkd's own adjustments (`ttr 0` means 1,
/// `pause-tube <tube> 0` pauses for 1 s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `put <pri> <delay> <ttr> <bytes>` and its body.
    Put {
        /// Priority, 0 most urgent.
        pri: u32,
        /// Seconds before the job is ready.
        delay: u32,
        /// Seconds to run, as sent (beanstalkd treats 0 as 1).
        ttr: u32,
        /// The job body, without its trailing CRLF.
        body: Bytes,
    },
    /// `use <tube>`.
    Use(Tube),
    /// `reserve`, or `reserve-with-timeout` with a negative timeout (beanstalkd then waits
    /// without a limit).
    Reserve,
    /// `reserve-with-timeout <seconds>`.
    ReserveWithTimeout(u32),
    /// `reserve-job <id>`.
    ReserveJob(u64),
    /// `delete <id>`.
    Delete(u64),
    /// `release <id> <pri> <delay>`.
    Release {
        /// The job.
        id: u64,
        /// Its new priority.
        pri: u32,
        /// Seconds before it is ready again.
        delay: u32,
    },
    /// `bury <id> <pri>`.
    Bury {
        /// The job.
        id: u64,
        /// Its new priority.
        pri: u32,
    },
    /// `touch <id>`.
    Touch(u64),
    /// `watch <tube>`.
    Watch(Tube),
    /// `ignore <tube>`.
    Ignore(Tube),
    /// `peek <id>`.
    Peek(u64),
    /// `peek-ready`.
    PeekReady,
    /// `peek-delayed`.
    PeekDelayed,
    /// `peek-buried`.
    PeekBuried,
    /// `kick <bound>` (beanstalkd keeps the bound in 32 bits, so it is below 2^32).
    Kick(u64),
    /// `kick-job <id>`.
    KickJob(u64),
    /// `stats-job <id>`.
    StatsJob(u64),
    /// `stats-tube <tube>`.
    StatsTube(Tube),
    /// `stats`.
    Stats,
    /// `list-tubes`.
    ListTubes,
    /// `list-tube-used`.
    ListTubeUsed,
    /// `list-tubes-watched`.
    ListTubesWatched,
    /// `pause-tube <tube> <delay>`.
    PauseTube {
        /// The tube.
        tube: Tube,
        /// Seconds to pause, as sent (beanstalkd treats 0 as 1).
        delay: u32,
    },
    /// `quit`: the handler closes the connection.
    Quit,
}

impl Command {
    /// Appends the command's canonical form (single spaces, CRLF, then the body for `put`),
    /// which [`Parser`](super::Parser) reads back as the same command.
    pub fn encode(&self, out: &mut BytesMut) {
        let line = match self {
            Command::Put {
                pri,
                delay,
                ttr,
                body,
            } => format!("put {pri} {delay} {ttr} {}", body.len()),
            Command::Use(t) => format!("use {t}"),
            Command::Reserve => "reserve".to_owned(),
            Command::ReserveWithTimeout(s) => format!("reserve-with-timeout {s}"),
            Command::ReserveJob(id) => format!("reserve-job {id}"),
            Command::Delete(id) => format!("delete {id}"),
            Command::Release { id, pri, delay } => format!("release {id} {pri} {delay}"),
            Command::Bury { id, pri } => format!("bury {id} {pri}"),
            Command::Touch(id) => format!("touch {id}"),
            Command::Watch(t) => format!("watch {t}"),
            Command::Ignore(t) => format!("ignore {t}"),
            Command::Peek(id) => format!("peek {id}"),
            Command::PeekReady => "peek-ready".to_owned(),
            Command::PeekDelayed => "peek-delayed".to_owned(),
            Command::PeekBuried => "peek-buried".to_owned(),
            Command::Kick(n) => format!("kick {n}"),
            Command::KickJob(id) => format!("kick-job {id}"),
            Command::StatsJob(id) => format!("stats-job {id}"),
            Command::StatsTube(t) => format!("stats-tube {t}"),
            Command::Stats => "stats".to_owned(),
            Command::ListTubes => "list-tubes".to_owned(),
            Command::ListTubeUsed => "list-tube-used".to_owned(),
            Command::ListTubesWatched => "list-tubes-watched".to_owned(),
            Command::PauseTube { tube, delay } => format!("pause-tube {tube} {delay}"),
            Command::Quit => "quit".to_owned(),
        };
        out.put_slice(line.as_bytes());
        out.put_slice(b"\r\n");
        if let Command::Put { body, .. } = self {
            out.put_slice(body);
            out.put_slice(b"\r\n");
        }
    }
}
