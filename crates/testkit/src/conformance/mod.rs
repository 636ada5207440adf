//! The engine conformance suite: every clause of the contract as one async function, generic
//! over the [`Harness`], instantiated per engine by [`crate::conformance_suite!`].
//!
//! Time is the engine's real clock (Redis `TIME` cannot be paused), so timing cases use short
//! real delays with bounded waits and tolerances, never fixed sleeps as assertions.
//!
//! # Layout
//!
//! One module per part of the contract, each re-exported here: `push` (push, push_batch,
//! push_each, push_new, idempotency), `lease` (reserve's lease, ack, nack, release, touch,
//! stale tokens, lease expiry), `bury` (bury, kick, kick_all, bury without a lease),
//! `delay` (due times, delays, absolute times, reschedule), `reserve` (order, at-most-once,
//! several topics, waiting, concurrent reservers), `wake` (waiting reserves woken, a new
//! instance picking up), `admin` (stats, listing, delete), `topics` (the topic list, purge),
//! `input` (refused arguments, the body limit), `refusal` (why a lease operation is
//! refused), `settle` (settle-and-reserve), `config` (topic settings), `conflict` (replace
//! and debounce), `expiry`, `pause`, `retention`, `schedules`, `destinations`, and
//! `beanstalk_ops` (what the beanstalkd protocol needs).
//!
//! This file keeps what the cases share: their helpers, the lock that runs the timing cases
//! alone ([`guard`]), and the [`crate::conformance_suite!`] macro, whose list must name every
//! case (a test in `coverage` checks that, and that every engine runs the suite).

use std::time::Duration;

use delayq_core::{
    Delivery, Engine, Job, JobId, JobState, Lease, Nack, NewJob, Reserve, Result, Timestamp, Topic,
    TopicConfig,
};

use crate::Harness;

mod admin;
mod beanstalk_ops;
mod bury;
mod config;
mod conflict;
#[cfg(test)]
mod coverage;
mod delay;
mod destinations;
mod expiry;
mod input;
mod lease;
mod pause;
mod push;
mod refusal;
mod reserve;
mod retention;
mod schedules;
mod settle;
mod topics;
mod wake;
pub use admin::*;
pub use beanstalk_ops::*;
pub use bury::*;
pub use config::*;
pub use conflict::*;
pub use delay::*;
pub use destinations::*;
pub use expiry::*;
pub use input::*;
pub use lease::*;
pub use pause::*;
pub use push::*;
pub use refusal::*;
pub use reserve::*;
pub use retention::*;
pub use schedules::*;
pub use settle::*;
pub use topics::*;
pub use wake::*;

fn topic(name: &str) -> Topic {
    Topic::new(name).expect("test topic is valid")
}

/// A topic for a case: `name`, given the harness's partition count ([`Harness::partitions`])
/// while it is still empty, before the case looks at the store.
async fn new_topic<H: Harness>(h: &H, name: &str) -> Topic {
    let t = topic(name);
    if let Some(n) = h.partitions() {
        let e = h.open().await;
        ok(
            e.set_topic_config(&t, &with_partitions(h, TopicConfig::default()))
                .await,
            &format!("giving {t} {n} partitions"),
        );
    }
    t
}

/// Asserts that `got` (job ids) are the jobs of `want`, in `want`'s order: the whole order
/// on a topic of one partition, the order within each partition on a topic of several (the
/// contract's order holds within a partition, [`TopicConfig::partitions`]).
fn in_order<H: Harness>(h: &H, got: &[String], want: &[&str], what: &str) {
    let n = h.partitions().unwrap_or(1);
    for p in 0..n {
        let of = |ids: Vec<&str>| -> Vec<String> {
            ids.into_iter()
                .filter(|i| delayq_core::partition_of(&id(i), n) == p)
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            of(got.iter().map(String::as_str).collect()),
            of(want.to_vec()),
            "{what}: the order of partition {p} of {n} (all: {got:?})"
        );
    }
    let (mut a, mut b) = (got.to_vec(), want.to_vec());
    a.sort();
    b.sort();
    assert_eq!(a, b, "{what}: the jobs");
}

/// Settings `c` with the harness's partition count, so that a case that sets a topic's
/// settings keeps its partitions.
fn with_partitions<H: Harness>(h: &H, c: TopicConfig) -> TopicConfig {
    TopicConfig {
        partitions: h.partitions(),
        ..c
    }
}

fn id(name: &str) -> JobId {
    JobId::new(name).expect("test id is valid")
}

fn ok<T>(r: Result<T>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// The due times a job asked for `delay` by an operation whose engine time falls in the
/// millisecond `at` may have: the operation's now, in µs, rounded up to the millisecond plus
/// the delay rounded up (so `at` + the delay, or 1 ms more when the operation came after
/// the start of its millisecond); a delay of 0 is due at `at` itself. See: issue 36.
fn due_after(at: Timestamp, delay: Duration) -> std::ops::RangeInclusive<Timestamp> {
    let exact = Timestamp::from_millis(at.as_millis() + delayq_core::limits::delay_ms_ceil(delay));
    if delay.is_zero() {
        exact..=exact
    } else {
        exact..=exact.plus(Duration::from_millis(1))
    }
}

/// Asserts that `due` is a due time a delay of `delay` asked at engine times from the
/// millisecond `from` to the millisecond `to` gives ([`due_after`]): never before `from` +
/// the delay, never after `to` + the delay + the millisecond the rounding up may add.
fn assert_due_after(what: &str, due: Timestamp, from: Timestamp, to: Timestamp, delay: Duration) {
    let (low, high) = (*due_after(from, delay).start(), *due_after(to, delay).end());
    assert!(
        low <= due && due <= high,
        "{what}: due at {due:?}, not the delay of {delay:?} after the operation's time \
         ({from:?} to {to:?}), rounded up: {low:?} to {high:?}"
    );
}

fn job(t: &Topic, name: &str) -> NewJob {
    NewJob::new(t.clone(), format!("body of {name}")).with_id(id(name))
}

async fn get<E: Engine>(e: &E, t: &Topic, name: &str) -> Job {
    ok(e.get(t, &id(name)).await, "get").unwrap_or_else(|| panic!("job {name} should exist"))
}

async fn state<E: Engine>(e: &E, t: &Topic, name: &str) -> Option<JobState> {
    ok(e.get(t, &id(name)).await, "get").map(|j| j.state)
}

/// Reserves one job from `t`, waiting up to `wait`; panics when none comes.
async fn reserve_one<E: Engine>(e: &E, t: &Topic, wait: Duration) -> Delivery {
    let mut got = ok(
        e.reserve(&Reserve::new(t.clone()).wait(wait)).await,
        "reserve",
    );
    assert_eq!(
        got.len(),
        1,
        "expected one delivery from {t} within {wait:?}"
    );
    got.remove(0)
}

fn lease_of(d: &Delivery) -> Lease {
    d.lease.clone().expect("at-least-once delivery has a lease")
}

async fn nothing_ready<E: Engine>(e: &E, t: &Topic) {
    let got = ok(e.reserve(&Reserve::new(t.clone())).await, "reserve");
    assert!(
        got.is_empty(),
        "expected nothing ready in {t}, got {:?}",
        got.iter().map(|d| &d.job.id).collect::<Vec<_>>()
    );
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Pushes one job into each state: `delayed`, `ready`, `reserved` (returned), `dead`.
pub(super) async fn one_in_each_state<E: Engine>(e: &E, t: &Topic) -> Lease {
    ok(e.push(job(t, "dead").with_max_attempts(1)).await, "push");
    let d = reserve_one(e, t, ms(0)).await;
    ok(e.nack(&lease_of(&d), Nack::default()).await, "nack");
    ok(e.push(job(t, "reserved")).await, "push");
    let d = reserve_one(e, t, ms(0)).await;
    assert_eq!(d.job.id, id("reserved"));
    ok(e.push(job(t, "ready")).await, "push");
    ok(
        e.push(job(t, "delayed").with_delay(Duration::from_secs(3600)))
            .await,
        "push",
    );
    assert_eq!(state(e, t, "dead").await, Some(JobState::Dead));
    assert_eq!(state(e, t, "reserved").await, Some(JobState::Reserved));
    assert_eq!(state(e, t, "ready").await, Some(JobState::Ready));
    assert_eq!(state(e, t, "delayed").await, Some(JobState::Delayed));
    lease_of(&d)
}

/// Cases that measure time tightly run alone (see [`guard`]).
pub const TIMING_CASES: &[&str] = &[
    "blocked_reserve_wakes_on_due_time",
    "blocked_reserve_wakes_on_push",
];

static SERIAL: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// A guard that lets timing cases run alone while the others share the machine: timing
/// cases take it exclusively, the others shared.
pub async fn guard(case: &str) -> Box<dyn std::any::Any + Send> {
    if TIMING_CASES.contains(&case) {
        Box::new(SERIAL.write().await)
    } else {
        Box::new(SERIAL.read().await)
    }
}

/// Expands to one `#[tokio::test]` per conformance case, each with a fresh harness from
/// `$setup` (an async expression evaluating to a [`Harness`]).
#[macro_export]
macro_rules! conformance_suite {
    ($setup:expr) => {
        $crate::conformance_suite!(@cases $setup;
            push_and_get_round_trip,
            push_due_now_is_ready,
            push_is_idempotent_in_every_state,
            push_batch_answers_in_order_with_duplicates,
            push_each_answers_each_job_and_refuses_bad_input_whole,
            push_new_refuses_existing,
            reserve_leases_and_counts_attempts,
            ack_removes_the_job,
            ack_batch_answers_each,
            nack_with_delay_retries_later,
            nack_without_delay_uses_backoff,
            nack_after_last_attempt_goes_dead,
            bury_sends_to_dead,
            kick_brings_dead_back,
            kick_all_kicks_every_dead_job,
            release_gives_back_without_counting,
            touch_extends_the_lease,
            stale_token_is_lease_lost_and_changes_nothing,
            lease_expiry_redelivers_with_next_attempt,
            lease_expiry_after_last_attempt_goes_dead,
            expired_lease_cannot_be_acked,
            ordering_priority_then_due_then_push,
            never_delivered_before_due,
            delays_from_zero_to_ten_years,
            a_delayed_job_is_never_due_before_the_callers_clock_plus_its_delay_issue_36,
            absolute_times,
            reschedule_in_every_state,
            delete_in_every_state,
            purge_removes_everything,
            stats_counts_and_overdue_age,
            list_pages_in_order,
            topics_are_listed,
            at_most_once_removes_on_reserve,
            reserve_across_topics,
            reserve_waits_and_times_out,
            concurrent_reservers_deliver_each_job_once,
            blocked_reserve_wakes_on_due_time,
            blocked_reserve_wakes_on_push,
            next_reserve_wakes_for_the_following_due_job,
            new_instance_picks_up_delayed_and_expired,
            bad_input_is_refused_and_changes_nothing,
            body_limit_is_configurable,
            settle_and_reserve_acks_then_delivers,
            settle_and_reserve_stale_lease_does_not_block,
            settle_and_reserve_applies_each_kind_first,
            settle_and_reserve_max_zero_settles_only,
            settle_and_reserve_settles_before_waiting,
            settle_and_reserve_bad_input_changes_nothing,
            reserve_dropped_mid_call_strands_no_job,
            token_beyond_any_issued_is_lease_lost,
            refusals_say_why_issue_12,
            purge_takes_the_topic_off_the_list_issue_12,
            a_paused_topic_is_listed_with_or_without_jobs_issue_36,
            topic_settings_fill_what_a_push_leaves_unset,
            topic_body_limit_refuses_before_writing,
            bad_topic_settings_are_refused_and_change_nothing,
            retention_keeps_acked_jobs_as_done,
            retention_forgets_done_jobs_after_their_age,
            schedules_are_stored_shared_and_replaced_issue_14,
            bad_schedules_are_refused_and_change_nothing_issue_14,
            a_paused_topic_delivers_nothing_until_resumed_issue_14,
            a_timed_pause_ends_by_itself_issue_14,
            a_pause_too_far_ahead_is_refused_issue_14,
            replace_rewrites_a_waiting_job_only_issue_14,
            debounce_moves_the_due_time_back_within_its_max_wait_issue_14,
            expired_jobs_are_not_delivered_issue_14,
            an_expiry_bounds_retries_not_running_deliveries_issue_14,
            an_expiry_one_ms_after_the_delay_is_checked_against_the_rounded_due_time_issue_36,
            bad_expiries_are_refused_and_change_nothing_issue_14,
            bury_waiting_sends_a_waiting_job_to_dead_issue_15,
            partitions_change_only_while_the_topic_is_empty_issue_18,
            release_with_a_delay_and_a_priority_waits_then_runs_first,
            bury_with_a_priority_keeps_it_after_a_kick,
            reserve_job_leases_a_delayed_ready_or_dead_job_by_id,
            claimed_numbers_never_repeat_and_name_their_topic,
            release_with_a_delay_over_ten_years_is_refused_and_keeps_the_lease,
            destinations_are_shared_replaced_and_deleted_issue_20,
            bad_destinations_are_refused_and_change_nothing_issue_20,
        );
    };
    (@cases $setup:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let _guard = $crate::conformance::guard(stringify!($case)).await;
                let harness = $setup.await;
                $crate::conformance::$case(&harness).await;
            }
        )*
    };
}
