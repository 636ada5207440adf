//! One complete command line (without its CRLF) to a [`Command`] or an error reply,
//! following beanstalkd 1.12's `dispatch_cmd` (see the `proto` module docs for the quirks).

use super::num::{c_strtol, c_strtoul, strict, strict_last};
use super::{Command, Reply};
use crate::tube::{Tube, is_name_byte};

const U32: u64 = u32::MAX as u64;

/// What one line asks for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// A complete command.
    Command(Command),
    /// A `put` line whose body (`size` bytes, then CRLF) follows.
    Put {
        pri: u32,
        delay: u32,
        ttr: u32,
        size: u32,
    },
    /// A `put` over the job size limit: `size + 2` bytes to discard, then `JOB_TOO_BIG`.
    TooBig { size: u32 },
    /// An error to answer now.
    Error(Reply),
}

/// Parses `line`, a command line without its CRLF.
pub(super) fn parse(line: &[u8], max_job_size: usize) -> Line {
    // beanstalkd works on a NUL-terminated copy and refuses a line with a NUL in it.
    if line.contains(&0) {
        return Line::Error(Reply::BadFormat);
    }
    // The prefixes in beanstalkd's order (`which_cmd`): the first match wins, so
    // `reservex` is `reserve` with garbage (BAD_FORMAT) and `quitx` is `quit`.
    if let Some(rest) = line.strip_prefix(b"put ") {
        return put(rest, max_job_size);
    }
    let command = if let Some(rest) = line.strip_prefix(b"peek ") {
        id(rest).map(Command::Peek)
    } else if line.starts_with(b"peek-ready") {
        exact(line, b"peek-ready", Command::PeekReady)
    } else if line.starts_with(b"peek-delayed") {
        exact(line, b"peek-delayed", Command::PeekDelayed)
    } else if line.starts_with(b"peek-buried") {
        exact(line, b"peek-buried", Command::PeekBuried)
    } else if let Some(rest) = line.strip_prefix(b"reserve-with-timeout ") {
        reserve_with_timeout(rest)
    } else if let Some(rest) = line.strip_prefix(b"reserve-job ") {
        id(rest).map(Command::ReserveJob)
    } else if line.starts_with(b"reserve") {
        exact(line, b"reserve", Command::Reserve)
    } else if let Some(rest) = line.strip_prefix(b"delete ") {
        id(rest).map(Command::Delete)
    } else if let Some(rest) = line.strip_prefix(b"release ") {
        release(rest)
    } else if let Some(rest) = line.strip_prefix(b"bury ") {
        bury(rest)
    } else if let Some(rest) = line.strip_prefix(b"kick ") {
        // `strtoul` into an `unsigned int`: keep the low 32 bits, as beanstalkd does.
        c_strtoul(rest).map(|n| Command::Kick(u64::from(n as u32)))
    } else if let Some(rest) = line.strip_prefix(b"kick-job ") {
        id(rest).map(Command::KickJob)
    } else if let Some(rest) = line.strip_prefix(b"touch ") {
        id(rest).map(Command::Touch)
    } else if let Some(rest) = line.strip_prefix(b"stats-job ") {
        id(rest).map(Command::StatsJob)
    } else if let Some(rest) = line.strip_prefix(b"stats-tube ") {
        tube(rest).map(Command::StatsTube)
    } else if line.starts_with(b"stats") {
        exact(line, b"stats", Command::Stats)
    } else if let Some(rest) = line.strip_prefix(b"use ") {
        tube(rest).map(Command::Use)
    } else if let Some(rest) = line.strip_prefix(b"watch ") {
        tube(rest).map(Command::Watch)
    } else if let Some(rest) = line.strip_prefix(b"ignore ") {
        tube(rest).map(Command::Ignore)
    } else if line.starts_with(b"list-tubes-watched") {
        exact(line, b"list-tubes-watched", Command::ListTubesWatched)
    } else if line.starts_with(b"list-tube-used") {
        exact(line, b"list-tube-used", Command::ListTubeUsed)
    } else if line.starts_with(b"list-tubes") {
        exact(line, b"list-tubes", Command::ListTubes)
    } else if line.starts_with(b"quit") {
        Some(Command::Quit)
    } else if let Some(rest) = line.strip_prefix(b"pause-tube") {
        pause_tube(rest)
    } else {
        return Line::Error(Reply::UnknownCommand);
    };
    match command {
        Some(c) => Line::Command(c),
        None => Line::Error(Reply::BadFormat),
    }
}

/// `put`: four strict numbers; the size is checked against the limit before the rest of
/// the line, so `put 0 0 0 99999 junk` is JOB_TOO_BIG, not BAD_FORMAT.
fn put(rest: &[u8], max_job_size: usize) -> Line {
    let header = (|| {
        let (pri, rest) = strict(rest, U32)?;
        let (delay, rest) = strict(rest, U32)?;
        let (ttr, rest) = strict(rest, U32)?;
        let (size, rest) = strict(rest, U32)?;
        Some((pri as u32, delay as u32, ttr as u32, size as u32, rest))
    })();
    let Some((pri, delay, ttr, size, rest)) = header else {
        return Line::Error(Reply::BadFormat);
    };
    if !usize::try_from(size).is_ok_and(|size| size <= max_job_size) {
        return Line::TooBig { size };
    }
    if !rest.is_empty() {
        return Line::Error(Reply::BadFormat);
    }
    Line::Put {
        pri,
        delay,
        ttr,
        size,
    }
}

/// The whole line must be `name` (no trailing space or garbage).
fn exact(line: &[u8], name: &[u8], command: Command) -> Option<Command> {
    (line == name).then_some(command)
}

/// A job id, then the end of the line.
fn id(rest: &[u8]) -> Option<u64> {
    strict_last(rest, u64::MAX)
}

/// The rest of the line is the tube name, exactly (`use  foo` and `use foo ` are refused).
fn tube(rest: &[u8]) -> Option<Tube> {
    Tube::new(std::str::from_utf8(rest).ok()?).ok()
}

/// `reserve-with-timeout`: `strtol` into an `int`, garbage after it ignored, no digits
/// meaning 0; a negative timeout (after truncation to 32 bits) waits without a limit.
fn reserve_with_timeout(rest: &[u8]) -> Option<Command> {
    let timeout = c_strtol(rest).ok()? as i32;
    Some(match u32::try_from(timeout) {
        Ok(t) => Command::ReserveWithTimeout(t),
        Err(_) => Command::Reserve,
    })
}

fn release(rest: &[u8]) -> Option<Command> {
    let (id, rest) = strict(rest, u64::MAX)?;
    let (pri, rest) = strict(rest, U32)?;
    let delay = strict_last(rest, U32)?;
    Some(Command::Release {
        id,
        pri: pri as u32,
        delay: delay as u32,
    })
}

fn bury(rest: &[u8]) -> Option<Command> {
    let (id, rest) = strict(rest, u64::MAX)?;
    let pri = strict_last(rest, U32)?;
    Some(Command::Bury {
        id,
        pri: pri as u32,
    })
}

/// `pause-tube`: matched without a space, then spaces, the longest run of name
/// characters, a strict number and the end of the line (`pause-tubefoo 5` pauses `foo`).
fn pause_tube(rest: &[u8]) -> Option<Command> {
    let start = rest.iter().take_while(|&&b| b == b' ').count();
    let rest = &rest[start..];
    let len = rest.iter().take_while(|&&b| is_name_byte(b)).count();
    if len == 0 {
        return None;
    }
    let delay = strict_last(&rest[len..], U32)?;
    let tube = tube(&rest[..len])?;
    Some(Command::PauseTube {
        tube,
        delay: delay as u32,
    })
}
