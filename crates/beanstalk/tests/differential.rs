//! Differential tests of the beanstalkd protocol: each test plays one scripted session
//! against a real beanstalkd 1.12 (the Debian package, started by the test on a free port:
//! `delayq_testkit::Beanstalkd`) and against delayq's beanstalkd server on the embedded
//! engine and on Redis (each fresh), and compares the answers step by step after the
//! normalisation in `differential/normalise.rs` (job ids by order of first appearance,
//! YAML by key sets and the values delayq promises). Where delayq differs on purpose the
//! session says so with the entry of `differential/differences.rs` that explains it.
//!
//! # What each test covers
//!
//! Every command and every response line of beanstalkd's protocol.txt:
//!
//! | command or response | test |
//! |---|---|
//! | `put`, `INSERTED` (ready, with delay, ttr 0, empty and binary bodies, the largest) | `producer::put_and_its_errors` |
//! | `JOB_TOO_BIG` (the body thrown away, the connection usable; size checked first) | `producer::put_and_its_errors`, `producer::put_with_a_small_job_size_limit` |
//! | `EXPECTED_CRLF` | `producer::put_and_its_errors` |
//! | `BAD_FORMAT`: missing, extra, negative, non-numeric and too large arguments, trailing and double spaces | `producer::put_and_its_errors` and each command's own test |
//! | `DRAINING` | `producer::draining_refuses_puts` |
//! | `use`, `USING`; tube names of 200 and 201 bytes, a leading `-`, every name character | `producer::use_and_tube_names` |
//! | `reserve`, `RESERVED` (ready; by priority, then put order) | `reserve::reserve_returns_a_ready_job` |
//! | `reserve` waiting for a delayed job to fall due | `reserve::reserve_waits_for_a_delayed_job` |
//! | `reserve` over several watched tubes | `reserve::reserve_across_watched_tubes` |
//! | waiting reserves of several connections, served in order (also by one write of several puts) | `reserve::waiting_reserves_are_served_in_order`, `reserve::waiting_reserves_get_a_run_of_puts_in_order` |
//! | `reserve-with-timeout` (0, 1, served by another connection's put, strtol quirks), `TIMED_OUT` | `reserve::reserve_with_timeout_times_out` |
//! | `TIMED_OUT` on a half-closed connection | `reserve::half_closed_connection_times_out` |
//! | `DEADLINE_SOON` (ttr 1 at once, ttr 2 while waiting, not while a job is ready) | `reserve::deadline_soon` |
//! | a ttr that runs out: the job ready again, no longer the holder's | `reserve::ttr_expiry_gives_the_job_back`, `reserve::reserve_after_a_ttr_ran_out` |
//! | `reserve-job` (ready, delayed, buried, held, another's, unknown id) | `reserve::reserve_job_by_id` |
//! | `delete`, `DELETED`, `NOT_FOUND` (own reserved, ready, delayed, buried, unknown, another's) | `worker::delete_in_every_state` |
//! | `release`, `RELEASED` (priority, delay; not held, another's) | `worker::release_with_priority_and_delay` |
//! | `bury`, `BURIED`, `kick`, `KICKED <count>`, `kick-job`, `KICKED`, `peek-buried` | `worker::bury_and_kick`, `worker::kick_more_than_a_thousand` |
//! | `touch`, `TOUCHED` (held, not held, another's; it restarts the ttr) | `worker::touch_held_and_not_held` |
//! | `watch`, `WATCHING`, `ignore`, `NOT_IGNORED` | `worker::watch_and_ignore` |
//! | `peek`, `peek-ready`, `peek-delayed`, `peek-buried`, `FOUND`, on empty and non-empty tubes | `inspect::peek_empty_and_not` |
//! | `stats-job`, `OK` (every state) | `inspect::stats_job_in_every_state` |
//! | `stats-tube` (existing, unknown, emptied) | `inspect::stats_tube_existing_and_unknown` |
//! | `stats` | `inspect::stats_counts_jobs`, `producer::put_with_a_small_job_size_limit`, `inspect::urgent_jobs_beyond_a_thousand` |
//! | `list-tubes`, `list-tube-used`, `list-tubes-watched` | `inspect::list_tubes` |
//! | `pause-tube`, `PAUSED` (holds ready jobs until it ends; 0 ends it; unknown tube) | `inspect::pause_tube_holds_ready_jobs` |
//! | `quit` (also pipelined, and `quit` with anything after it) | `wire::quit_closes_and_gives_back` |
//! | `UNKNOWN_COMMAND` | `wire::unknown_commands` |
//! | a line over the maximum length (224 bytes with CRLF) | `wire::line_over_the_maximum_length` |
//! | commands split across writes, and pipelined (also behind a waiting reserve) | `wire::split_and_pipelined_commands` |
//! | the documented differences that a session can show | `reserve::ready_order_within_a_priority`, `producer::limits_of_tubes_and_times`, `inspect::urgent_jobs_beyond_a_thousand`, `producer::use_and_tube_names`, `producer::draining_refuses_puts`, `reserve::waiting_reserves_get_a_run_of_puts_in_order` |
//!
//! Not compared, since a beanstalkd cannot be made to send them on purpose: `BURIED <id>`
//! (a put when beanstalkd runs out of memory growing a queue), `BURIED` as an answer to
//! `release` (the same; delayq never sends either), `OUT_OF_MEMORY` and `INTERNAL_ERROR`.
//! delayq's own answers of the last two are tested in `failures.rs` (a store at its size
//! cap; Redis killed and back).
//!
//! # Layout
//!
//! - `differential/script.rs`: the session DSL (steps on named connections, reply units).
//! - `differential/run.rs`: starts the three servers, plays a session on each at once,
//!   compares.
//! - `differential/normalise.rs`: what is compared of a reply, in one function.
//! - `differential/differences.rs`: `DIFFERENCES`, delayq's deliberate differences.
//! - `differential/expect.rs`: delayq's normalised answers where a session shows a
//!   difference.
//! - The sessions, one test each: `producer.rs`, `reserve.rs`, `worker.rs`, `inspect.rs`,
//!   `wire.rs` under `differential/`.
//!
//! Run one with `cargo test -p delayq-beanstalk --test differential <name>`; a failure
//! prints every mismatching step and the three transcripts.

mod differential {
    pub mod differences;
    pub mod expect;
    pub mod normalise;
    pub mod run;
    pub mod script;

    mod inspect;
    mod producer;
    mod reserve;
    mod wire;
    mod worker;
}

use differential::differences::DIFFERENCES;

/// Every deliberate difference is listed once, and says what differs and why.
#[test]
fn differences_are_documented() {
    let mut names = std::collections::HashSet::new();
    for d in DIFFERENCES {
        assert!(names.insert(d.name), "{:?} is listed twice", d.name);
        assert!(
            d.what.ends_with('.') && d.why.ends_with('.'),
            "{:?}: say what differs and why, in sentences",
            d.name
        );
    }
}
