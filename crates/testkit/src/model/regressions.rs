//! Sequences that once made an engine and the model disagree, shrunk by hand from what
//! proptest found, replayed by name in every engine's model test ([`REGRESSIONS`]).

use super::op::{JobSpec, LeasePick, Op};

fn job(topic: u8, id: u8, delay_ms: u32) -> JobSpec {
    JobSpec {
        topic,
        id,
        delay_ms,
        priority: 0,
        max_attempts: 3,
        bad_ttr: false,
    }
}

/// A job fallen due that no reserve or read has moved out of the Redis engine's delayed set
/// yet is ready: a kick refuses it as ready, a push of its id answers ready, a lease
/// operation on it refuses it as ready (the Redis engine answered "delayed").
fn due_job_not_yet_moved_is_ready() -> Vec<Op> {
    vec![
        Op::Push(job(1, 0, 10)),
        Op::Sleep(30),
        Op::Kick(1, 0),
        Op::Push(job(1, 0, 0)),
        Op::Ack(LeasePick::Forged(1, 0)),
        Op::Release(LeasePick::Forged(1, 0)),
    ]
}

/// A named sequence: (name, the function that builds it).
pub type Regression = (&'static str, fn() -> Vec<Op>);

/// Every regression.
pub const REGRESSIONS: &[Regression] = &[(
    "due_job_not_yet_moved_is_ready",
    due_job_not_yet_moved_is_ready,
)];
