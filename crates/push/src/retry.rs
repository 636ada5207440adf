//! How a topic with a destination retries, beyond the job's own settings:
//!
//! - **The receiver schedule.** A receiver is a service that is down for a deploy or a
//!   restart now and then, so webhook senders retry for hours (Standard Webhooks and Svix:
//!   5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; Stripe: up to three days). The built-in job
//!   defaults (3 attempts, 1 s then 2 s) send a job to dead when its receiver is down for
//!   3 s. So [`put_destination`] fills the topic's *unset* `max_attempts` and `backoff` with
//!   [`RECEIVER_MAX_ATTEMPTS`] and [`receiver_backoff`]: 10 attempts, from 5 s growing
//!   fourfold to at most 10 h, over about 27 hours in all. A setting the topic has is kept,
//!   and a push's own settings win as always.
//! - **Retry-After waited in place.** A receiver answering `429` or `503` with
//!   `Retry-After` is alive and says when to come back: the send waits that long and is
//!   made again within the same attempt (its lease), so such answers use up no attempt
//!   ([`waits_in_place`] bounds it).

use std::time::Duration;

use delayq_core::{Backoff, Store, Topic, TopicConfig};

use crate::destination::Destination;

/// The attempts of a job on a topic with a destination, when neither the job nor the topic
/// says.
pub const RECEIVER_MAX_ATTEMPTS: u32 = 10;

/// The back-off of a job on a topic with a destination, when neither the job nor the topic
/// says: 5 s before the second attempt, then 20 s, 80 s, 5 min 20 s, 21 min, 85 min, 5 h
/// 41 min, then 10 h, each less up to 10 % of jitter. With [`RECEIVER_MAX_ATTEMPTS`] a job
/// is sent for about 27.6 hours before it goes to dead (the total of Standard Webhooks'
/// schedule).
pub fn receiver_backoff() -> Backoff {
    Backoff::exponential(Duration::from_secs(5), Duration::from_secs(10 * 3600))
        .with_factor(4)
        .with_jitter(0.1)
}

/// Stores `destination` as the destination of `topic`, then fills the topic's settings
/// that are unset (`max_attempts`, `backoff`) with the receiver schedule. Answers the
/// topic's settings now. Jobs pushed from then on without their own settings get them;
/// jobs pushed before keep theirs.
///
/// Every put fills them, so a put retried after a failed settings write completes it; a
/// setting the topic has (however it got it) is never changed here.
pub async fn put_destination(
    engine: &dyn Store,
    topic: &Topic,
    destination: &Destination,
) -> delayq_core::Result<TopicConfig> {
    engine
        .put_destination(topic, &destination.to_json())
        .await?;
    let config = engine.topic_config(topic).await?;
    let filled = with_receiver_defaults(config);
    if filled != config {
        engine.set_topic_config(topic, &filled).await?;
        tracing::info!(%topic, max_attempts = ?filled.max_attempts, backoff = ?filled.backoff, "push: the topic's unset retry settings now follow the receiver schedule");
    }
    Ok(filled)
}

/// `config` with its unset `max_attempts` and `backoff` set to the receiver schedule.
pub fn with_receiver_defaults(config: TopicConfig) -> TopicConfig {
    TopicConfig {
        max_attempts: config.max_attempts.or(Some(RECEIVER_MAX_ATTEMPTS)),
        backoff: config.backoff.or(Some(receiver_backoff())),
        ..config
    }
}

/// The most sends of one attempt after a `Retry-After` waited in place.
pub const MAX_WAITS: u32 = 5;

/// Whether a send answered with `Retry-After: after` waits it out and is made again in the
/// same attempt: when this attempt has waited fewer than [`MAX_WAITS`] times, its waits add
/// up to at most half of the job's `ttr`, and the send after the wait still has at least a
/// tenth of the `ttr` before the lease's end (`left` is what the lease leaves the sends
/// now). Otherwise the job is retried after `after` as its next attempt.
pub(crate) fn waits_in_place(
    after: Duration,
    waits: u32,
    waited: Duration,
    ttr: Duration,
    left: Duration,
) -> bool {
    waits < MAX_WAITS && waited + after <= ttr / 2 && left.saturating_sub(after) >= ttr / 10
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receiver_schedule_spans_about_a_day() {
        let b = receiver_backoff();
        b.validate().unwrap_or_else(|e| panic!("{e}"));
        let delays: Vec<Duration> = (1..RECEIVER_MAX_ATTEMPTS)
            .map(|n| b.delay(n, 0.0))
            .collect();
        assert_eq!(delays[0], Duration::from_secs(5));
        assert_eq!(delays[3], Duration::from_secs(320));
        assert_eq!(delays[8], Duration::from_secs(36_000));
        let total: Duration = delays.iter().sum();
        assert_eq!(total, Duration::from_secs(99_305), "about 27.6 h");
    }

    #[test]
    fn only_unset_settings_are_filled() {
        let none = with_receiver_defaults(TopicConfig::default());
        assert_eq!(none.max_attempts, Some(RECEIVER_MAX_ATTEMPTS));
        assert_eq!(none.backoff, Some(receiver_backoff()));
        let own = TopicConfig {
            max_attempts: Some(2),
            ttr: Some(Duration::from_secs(9)),
            ..TopicConfig::default()
        };
        let filled = with_receiver_defaults(own);
        assert_eq!(
            (filled.max_attempts, filled.ttr, filled.backoff),
            (
                Some(2),
                Some(Duration::from_secs(9)),
                Some(receiver_backoff())
            )
        );
        assert_eq!(with_receiver_defaults(filled), filled);
    }

    #[test]
    fn waits_in_place_within_half_the_ttr_five_times_at_most() {
        let s = Duration::from_secs;
        let ttr = s(30);
        assert!(waits_in_place(s(1), 0, s(0), ttr, s(29)));
        assert!(waits_in_place(s(15), 0, s(0), ttr, s(29)));
        // Half the ttr in all.
        assert!(!waits_in_place(s(16), 0, s(0), ttr, s(29)));
        assert!(!waits_in_place(s(2), 2, s(14), ttr, s(15)));
        // Five waits.
        assert!(waits_in_place(s(1), 4, s(4), ttr, s(25)));
        assert!(!waits_in_place(s(1), 5, s(5), ttr, s(24)));
        // The send after the wait keeps a tenth of the ttr.
        assert!(!waits_in_place(s(1), 0, s(0), ttr, s(3)));
        assert!(waits_in_place(s(1), 0, s(0), ttr, s(4)));
    }
}
