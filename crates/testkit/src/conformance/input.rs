//! Conformance cases of input checks: every invalid argument of every operation is refused
//! with its typed error and leaves the store unchanged, and the body limit is set per
//! engine.

use std::time::Duration;

use delayq_core::limits::MAX_DELAY;
use delayq_core::{
    Backoff, Cursor, Engine, Error, JobState, Limits, Nack, NewJob, Reserve, Schedule, Timestamp,
};

use super::{id, job, ms, new_topic, ok, one_in_each_state};
use crate::Harness;

/// Every invalid argument gets its typed error and leaves the store byte-for-byte unchanged.
pub async fn bad_input_is_refused_and_changes_nothing<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "bad").await;
    let lease = one_in_each_state(&e, &t).await;
    let before = h.snapshot().await;

    let too_long_reason = "x".repeat(4097);
    let far = Timestamp::now()
        .plus(MAX_DELAY)
        .plus(Duration::from_secs(864_000));
    // Runs one refused call: checks its error, then that the store did not change.
    macro_rules! refused {
        ($what:expr, $call:expr, $pat:pat) => {{
            let r = $call.await;
            match r {
                Err(err) => {
                    assert!(matches!(err, $pat), "{}: wrong error {err:?}", $what);
                    assert!(
                        err.is_invalid_input(),
                        "{}: {err:?} is not an input error",
                        $what
                    );
                }
                Ok(v) => panic!("{}: accepted ({v:?})", $what),
            }
            assert_eq!(h.snapshot().await, before, "{} changed the store", $what);
        }};
    }
    refused!(
        "delay over 10 years",
        e.push(job(&t, "n").with_delay(MAX_DELAY + ms(1))),
        Error::InvalidDelay { .. }
    );
    refused!(
        "ttr under 1 s",
        e.push(job(&t, "n").with_ttr(ms(999))),
        Error::InvalidTtr { .. }
    );
    refused!(
        "ttr over 24 h",
        e.push(job(&t, "n").with_ttr(Duration::from_secs(86_401))),
        Error::InvalidTtr { .. }
    );
    refused!(
        "zero attempts",
        e.push(job(&t, "n").with_max_attempts(0)),
        Error::InvalidArgument {
            what: "max_attempts",
            ..
        }
    );
    refused!(
        "bad backoff",
        e.push(job(&t, "n").with_backoff(Backoff::default().with_factor(0))),
        Error::InvalidArgument {
            what: "backoff",
            ..
        }
    );
    refused!(
        "body over 256 KiB",
        e.push(NewJob::new(t.clone(), vec![0u8; 256 * 1024 + 1])),
        Error::BodyTooLarge { .. }
    );
    refused!(
        "absolute before 2000",
        e.push(job(&t, "n").with_ready_at(Timestamp::from_millis(5))),
        Error::InvalidDelay { .. }
    );
    refused!(
        "absolute over 10 years",
        e.push(job(&t, "n").with_ready_at(far)),
        Error::InvalidDelay { .. }
    );
    refused!(
        "one bad job in a batch",
        e.push_batch(vec![job(&t, "n1"), job(&t, "n2").with_ttr(ms(1))]),
        Error::InvalidTtr { .. }
    );
    refused!(
        "empty batch",
        e.push_batch(vec![]),
        Error::InvalidArgument { .. }
    );
    refused!(
        "batch over 1000",
        e.push_batch((0..1001).map(|i| job(&t, &format!("m{i}"))).collect()),
        Error::InvalidArgument { .. }
    );
    refused!(
        "reserve max 0",
        e.reserve(&Reserve::new(t.clone()).max(0)),
        Error::InvalidArgument { what: "max", .. }
    );
    refused!(
        "reserve max 1001",
        e.reserve(&Reserve::new(t.clone()).max(1001)),
        Error::InvalidArgument { what: "max", .. }
    );
    refused!(
        "reserve no topics",
        e.reserve(&Reserve::topics([])),
        Error::InvalidArgument { what: "topics", .. }
    );
    refused!(
        "reserve same topic twice",
        e.reserve(&Reserve::topics([t.clone(), t.clone()])),
        Error::InvalidArgument { what: "topics", .. }
    );
    refused!(
        "reserve wait over 1 h",
        e.reserve(&Reserve::new(t.clone()).wait(Duration::from_secs(3601))),
        Error::InvalidArgument { what: "wait", .. }
    );
    refused!(
        "nack delay over 10 years",
        e.nack(
            &lease,
            Nack {
                delay: Some(MAX_DELAY + ms(1)),
                reason: None
            }
        ),
        Error::InvalidDelay { .. }
    );
    refused!(
        "nack reason over 4 KiB",
        e.nack(
            &lease,
            Nack {
                delay: None,
                reason: Some(too_long_reason.clone())
            }
        ),
        Error::InvalidArgument { what: "reason", .. }
    );
    refused!(
        "bury reason over 4 KiB",
        e.bury(&lease, Some(too_long_reason.clone())),
        Error::InvalidArgument { what: "reason", .. }
    );
    // A NUL character: PostgreSQL's text cannot hold it, so no engine takes it.
    refused!(
        "nack reason with a NUL",
        e.nack(
            &lease,
            Nack {
                delay: None,
                reason: Some("bad\0byte".into())
            }
        ),
        Error::InvalidArgument { what: "reason", .. }
    );
    refused!(
        "bury reason with a NUL",
        e.bury(&lease, Some("\0".into())),
        Error::InvalidArgument { what: "reason", .. }
    );
    refused!(
        "touch ttr 0",
        e.touch(&lease, Some(ms(0))),
        Error::InvalidTtr { .. }
    );
    refused!(
        "empty ack batch",
        e.ack_batch(&[]),
        Error::InvalidArgument { .. }
    );
    refused!(
        "reschedule over 10 years",
        e.reschedule(&t, &id("delayed"), Schedule::Delay(MAX_DELAY + ms(1))),
        Error::InvalidDelay { .. }
    );
    refused!(
        "reschedule absolute far",
        e.reschedule(&t, &id("delayed"), Schedule::At(far)),
        Error::InvalidDelay { .. }
    );
    refused!(
        "reschedule absolute seconds",
        e.reschedule(
            &t,
            &id("delayed"),
            Schedule::At(Timestamp::from_millis(1_700_000_000))
        ),
        Error::InvalidDelay { .. }
    );
    refused!(
        "list bad cursor",
        e.list(&t, JobState::Ready, 10, Some(&Cursor("nope".into()))),
        Error::InvalidArgument { what: "cursor", .. }
    );
    refused!(
        "list limit 0",
        e.list(&t, JobState::Ready, 0, None),
        Error::InvalidArgument { .. }
    );
}

/// The body limit is configurable per engine.
pub async fn body_limit_is_configurable<H: Harness>(h: &H) {
    let e = h.open_with(Limits { max_body: 1024 }).await;
    let t = new_topic(h, "limit").await;
    assert!(
        ok(
            e.push(NewJob::new(t.clone(), vec![7u8; 1024])).await,
            "push"
        )
        .created
    );
    let r = e.push(NewJob::new(t.clone(), vec![7u8; 1025])).await;
    assert!(
        matches!(
            r,
            Err(Error::BodyTooLarge {
                size: 1025,
                limit: 1024
            })
        ),
        "{r:?}"
    );
}
