//! The wait-replicas option ([`crate::RedisConfig::wait_replicas`]): which calls change
//! state, the `WAIT` that follows them in the same pipeline on the same node, and what its
//! answer means.
//!
//! `WAIT` counts the replicas that acknowledged the offset of the connection's own last
//! write, so it must travel on the connection that wrote, after the write: sent on its own
//! through a cluster connection it would go to every primary and wait for nothing of ours.
//! On a multiplexed connection the last write may be another caller's later one, which
//! only makes the wait cover more.

use std::time::Duration;

use delayq_core::{Error, Result};
use redis::{Cmd, Value};

use crate::RedisConfig;
use crate::library;

/// The functions that change nothing a failover must keep: they read, and at most redo
/// bookkeeping (due jobs, expired leases) that any later call redoes the same way.
const READS: [&str; 4] = [library::GET, library::LIST, library::STATS, library::CONFIG];

/// How many replicas must acknowledge a state-changing call, and how long to wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Replicas {
    wanted: usize,
    timeout_ms: u64,
}

impl Replicas {
    /// The option of `config`: `None` when it asks for no replica. Refuses a timeout under
    /// 1 ms or not under the response timeout (the call would time out first).
    pub(crate) fn from_config(config: &RedisConfig) -> Result<Option<Replicas>> {
        if config.wait_replicas == 0 {
            return Ok(None);
        }
        let timeout = config.wait_timeout;
        if timeout < Duration::from_millis(1) || timeout >= config.response_timeout {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "wait timeout {timeout:?}: it must be at least 1 ms and less than the response timeout ({:?}); lower the wait timeout or raise the response timeout",
                    config.response_timeout
                ),
            });
        }
        Ok(Some(Replicas {
            wanted: config.wait_replicas,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        }))
    }

    /// `WAIT <wanted> <timeout ms>`.
    pub(crate) fn wait_cmd(&self) -> Cmd {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(self.wanted).arg(self.timeout_ms);
        cmd
    }

    /// What `WAIT` answered: enough acknowledgements, or [`Error::NotReplicated`].
    pub(crate) fn check(&self, answer: &Value) -> Result<()> {
        let acked = match answer {
            Value::Int(n) => usize::try_from(*n).unwrap_or(0),
            Value::ServerError(e) => {
                return Err(Error::unavailable(
                    format!(
                        "waiting for {} replicas to acknowledge the write: Redis answered {} {}",
                        self.wanted,
                        e.code(),
                        e.details().unwrap_or("")
                    ),
                    std::io::Error::other("WAIT failed"),
                ));
            }
            other => {
                return Err(Error::Internal(format!(
                    "WAIT answered {other:?} instead of a count"
                )));
            }
        };
        if acked < self.wanted {
            return Err(Error::NotReplicated {
                acked,
                wanted: self.wanted,
            });
        }
        Ok(())
    }
}

/// True when `cmd` changes state a failover must keep: a delayq function call other than
/// the [`READS`]. Plain commands are the caller's to mark (`Conn::write`).
pub(crate) fn writes(cmd: &Cmd) -> bool {
    let mut args = cmd.args_iter().filter_map(|a| match a {
        redis::Arg::Simple(b) => Some(b),
        _ => None,
    });
    match (args.next(), args.next()) {
        (Some(name), Some(function)) if name.eq_ignore_ascii_case(b"FCALL") => {
            !READS.iter().any(|r| r.as_bytes() == function)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fcall(function: &str) -> Cmd {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(function).arg(1).arg("delayq:{t}:jobs");
        cmd
    }

    #[test]
    fn every_function_but_the_reads_changes_state() {
        for f in [
            library::PUSH,
            library::RESERVE,
            library::ACK,
            library::NACK,
            library::RELEASE,
            library::TOUCH,
            library::BURY,
            library::KICK,
            library::BURY_WAITING,
            library::RESCHEDULE,
            library::DELETE,
            library::PURGE,
            library::HANDBACK,
            library::CONFIGURE,
        ] {
            assert!(writes(&fcall(f)), "{f}");
        }
        for f in READS {
            assert!(!writes(&fcall(f)), "{f}");
        }
        assert!(!writes(&redis::cmd("TIME")));
        assert!(!writes(redis::cmd("SMEMBERS").arg("delayq:topics")));
    }

    #[test]
    fn the_option_is_off_by_default_and_its_timeout_checked() {
        let config = RedisConfig::new("redis://127.0.0.1:1");
        assert_eq!(Replicas::from_config(&config).ok(), Some(None));
        let on = config
            .clone()
            .with_wait_replicas(2, Duration::from_millis(250));
        let r = Replicas::from_config(&on).ok().flatten();
        assert_eq!(
            r,
            Some(Replicas {
                wanted: 2,
                timeout_ms: 250
            })
        );
        for bad in [
            Duration::ZERO,
            Duration::from_secs(10),
            Duration::from_secs(60),
        ] {
            match Replicas::from_config(&config.clone().with_wait_replicas(1, bad)) {
                Err(Error::InvalidConfig { reason }) => {
                    assert!(reason.contains("wait timeout"), "{reason}")
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn fewer_acknowledgements_answer_not_replicated() {
        let r = Replicas {
            wanted: 2,
            timeout_ms: 100,
        };
        assert!(r.check(&Value::Int(2)).is_ok());
        assert!(r.check(&Value::Int(3)).is_ok());
        match r.check(&Value::Int(1)) {
            Err(Error::NotReplicated { acked, wanted }) => assert_eq!((acked, wanted), (1, 2)),
            other => panic!("{other:?}"),
        }
        assert!(matches!(r.check(&Value::Nil), Err(Error::Internal(_))));
    }
}
