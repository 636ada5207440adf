//! Conformance cases of a topic's settings ([`TopicConfig`]): the defaults of the jobs
//! pushed without their own, the topic's body limit, and their checks.

use std::time::Duration;

use delayq_core::{Backoff, Engine, Error, Limits, NackOutcome, NewJob, Topic, TopicConfig};

use super::{
    assert_due_after, get, id, job, lease_of, ms, new_topic, ok, reserve_one, topic,
    with_partitions,
};
use crate::Harness;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The settings of these cases: every job default set (and the harness's partition count).
fn defaults<H: Harness>(h: &H) -> TopicConfig {
    with_partitions(
        h,
        TopicConfig {
            ttr: Some(secs(45)),
            max_attempts: Some(5),
            backoff: Some(Backoff::fixed(secs(2))),
            max_body: None,
            retention: None,
            partitions: None,
        },
    )
}

/// What a job was stored with: (ttr, max attempts, back-off).
async fn settings_of<E: Engine>(e: &E, t: &Topic, name: &str) -> (Duration, u32, Backoff) {
    let j = get(e, t, name).await;
    (j.ttr, j.max_attempts, j.backoff)
}

/// A job pushed without ttr, max attempts or back-off takes its topic's settings, else the
/// built-in defaults; a push's own fields win. Settings are shared by every instance, apply
/// to later pushes only, survive a purge, and do not put a topic on the topic list.
pub async fn topic_settings_fill_what_a_push_leaves_unset<H: Harness>(h: &H) {
    let (e, other_instance) = (h.open().await, h.open().await);
    let (t, plain) = (new_topic(h, "cfg").await, new_topic(h, "cfg-plain").await);
    let built_in = (secs(30), 3, Backoff::default());
    assert_eq!(
        ok(e.topic_config(&t).await, "config"),
        with_partitions(h, TopicConfig::default())
    );

    ok(e.push(job(&t, "before")).await, "push");
    ok(e.set_topic_config(&t, &defaults(h)).await, "set config");
    assert_eq!(
        ok(other_instance.topic_config(&t).await, "config"),
        defaults(h)
    );
    assert_eq!(settings_of(&e, &t, "before").await, built_in);

    let own = Backoff::exponential(Duration::from_millis(100), secs(9));
    ok(
        other_instance
            .push_batch(vec![
                job(&t, "unset"),
                job(&t, "own")
                    .with_ttr(secs(10))
                    .with_max_attempts(2)
                    .with_backoff(own),
                job(&plain, "elsewhere"),
            ])
            .await,
        "push",
    );
    assert_eq!(
        settings_of(&e, &t, "unset").await,
        (secs(45), 5, Backoff::fixed(secs(2)))
    );
    assert_eq!(settings_of(&e, &t, "own").await, (secs(10), 2, own));
    assert_eq!(settings_of(&e, &plain, "elsewhere").await, built_in);

    // Only what is set is taken: one default set, the others built in.
    let only_ttr = TopicConfig {
        ttr: Some(secs(90)),
        ..with_partitions(h, TopicConfig::default())
    };
    ok(e.set_topic_config(&t, &only_ttr).await, "set config");
    ok(e.push(job(&t, "ttr-only")).await, "push");
    assert_eq!(
        settings_of(&e, &t, "ttr-only").await,
        (secs(90), 3, Backoff::default())
    );

    // The job's back-off is the topic's: a nack without a delay retries after it.
    let retry = new_topic(h, "cfg-retry").await;
    ok(e.set_topic_config(&retry, &defaults(h)).await, "set config");
    ok(e.push(job(&retry, "retry")).await, "push");
    let d = reserve_one(&e, &retry, Duration::ZERO).await;
    let before = ok(e.now().await, "now");
    let out = ok(e.nack(&lease_of(&d), Default::default()).await, "nack");
    let after = ok(e.now().await, "now");
    match out {
        NackOutcome::Retry { ready_at } => {
            assert_due_after("the retry", ready_at, before, after, secs(2));
        }
        NackOutcome::Dead => panic!("a job with 5 attempts died at its first"),
    }

    // A purge keeps the settings; settings alone do not list a topic.
    ok(e.purge(&t).await, "purge");
    assert_eq!(ok(e.topic_config(&t).await, "config"), only_ttr);
    let fresh = new_topic(h, "cfg-only").await;
    ok(e.set_topic_config(&fresh, &defaults(h)).await, "set config");
    let listed = ok(e.topics().await, "topics");
    assert!(
        !listed.contains(&fresh) && !listed.contains(&t),
        "{listed:?}"
    );

    // Setting them whole: the default settings put every field back to built in.
    ok(
        other_instance
            .set_topic_config(&t, &with_partitions(h, TopicConfig::default()))
            .await,
        "reset",
    );
    assert_eq!(
        ok(e.topic_config(&t).await, "config"),
        with_partitions(h, TopicConfig::default())
    );
    ok(e.push(job(&t, "after-reset")).await, "push");
    assert_eq!(settings_of(&e, &t, "after-reset").await, built_in);
}

/// A topic's body limit refuses a larger body before anything is written, in a batch too
/// (a large one the Redis engine sends in several calls); the engine's own limit stays in
/// force when the topic's is higher.
pub async fn topic_body_limit_refuses_before_writing<H: Harness>(h: &H) {
    let e = h.open_with(Limits { max_body: 16 }).await;
    let (t, other) = (new_topic(h, "small").await, new_topic(h, "small-not").await);
    let limit = |n| TopicConfig {
        max_body: Some(n),
        ..with_partitions(h, TopicConfig::default())
    };
    ok(e.set_topic_config(&t, &limit(8)).await, "set config");
    ok(
        e.push(NewJob::new(t.clone(), "8 bytes!").with_id(id("fits")))
            .await,
        "push",
    );
    let before = h.snapshot().await;
    let too_big = || NewJob::new(t.clone(), "9 bytes!!").with_id(id("big"));
    let r = e.push(too_big()).await;
    assert!(
        matches!(r, Err(Error::BodyTooLarge { size: 9, limit: 8 })),
        "{r:?}"
    );
    let r = e
        .push_batch(vec![
            NewJob::new(t.clone(), "x").with_id(id("small")),
            too_big(),
        ])
        .await;
    assert!(matches!(r, Err(Error::BodyTooLarge { .. })), "{r:?}");
    let mut many: Vec<NewJob> = (0..150)
        .map(|i| NewJob::new(t.clone(), "x").with_id(id(&format!("m{i}"))))
        .collect();
    many.push(NewJob::new(other.clone(), "x").with_id(id("other")));
    many.push(too_big());
    let r = e.push_batch(many).await;
    assert!(matches!(r, Err(Error::BodyTooLarge { .. })), "{r:?}");
    assert!(
        before == h.snapshot().await,
        "a refused push changed the store"
    );

    // Another topic has the engine's limit; a topic's higher limit does not raise it.
    ok(
        e.push(NewJob::new(other.clone(), "sixteen bytes!!!")).await,
        "push",
    );
    ok(e.set_topic_config(&t, &limit(1000)).await, "set config");
    let r = e.push(NewJob::new(t.clone(), "seventeen bytes!!")).await;
    assert!(
        matches!(
            r,
            Err(Error::BodyTooLarge {
                size: 17,
                limit: 16
            })
        ),
        "{r:?}"
    );
}

/// Settings out of range are refused with the field's error and change nothing.
pub async fn bad_topic_settings_are_refused_and_change_nothing<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "cfg-bad").await;
    ok(e.set_topic_config(&t, &defaults(h)).await, "set config");
    let before = h.snapshot().await;
    let bad = [
        TopicConfig {
            ttr: Some(Duration::from_millis(999)),
            ..defaults(h)
        },
        TopicConfig {
            ttr: Some(Duration::from_secs(24 * 3600 + 1)),
            ..defaults(h)
        },
        TopicConfig {
            max_attempts: Some(0),
            ..defaults(h)
        },
        TopicConfig {
            max_attempts: Some(10_001),
            ..defaults(h)
        },
        TopicConfig {
            backoff: Some(Backoff::exponential(secs(2), secs(1))),
            ..defaults(h)
        },
        TopicConfig {
            max_body: Some(0),
            ..defaults(h)
        },
        TopicConfig {
            retention: Some(delayq_core::Retention {
                max_jobs: 0,
                max_age: secs(60),
            }),
            ..defaults(h)
        },
        TopicConfig {
            retention: Some(delayq_core::Retention {
                max_jobs: 100_001,
                max_age: secs(60),
            }),
            ..defaults(h)
        },
        TopicConfig {
            retention: Some(delayq_core::Retention {
                max_jobs: 10,
                max_age: secs(31 * 24 * 3600),
            }),
            ..defaults(h)
        },
        TopicConfig {
            partitions: Some(0),
            ..defaults(h)
        },
        TopicConfig {
            partitions: Some(1025),
            ..defaults(h)
        },
    ];
    for config in bad {
        let r = e.set_topic_config(&t, &config).await;
        assert!(
            matches!(
                r,
                Err(Error::InvalidTtr { .. } | Error::InvalidArgument { .. })
            ),
            "{config:?}: {r:?}"
        );
    }
    assert!(
        before == h.snapshot().await,
        "refused settings changed the store"
    );
    assert_eq!(ok(e.topic_config(&t).await, "config"), defaults(h));
}

/// Expects `r` to be the refusal of a partition count change from `from` to `to`.
fn partitions_in_use(r: delayq_core::Result<()>, from: u16, to: u16, what: &str) {
    match r {
        Err(Error::PartitionsInUse { from: f, to: t, .. }) if (f, t) == (from, to) => {}
        other => panic!("{what}: expected partitions_in_use {from} -> {to}, got {other:?}"),
    }
}

/// A topic's partition count is kept with its settings and shared by every instance. It
/// changes only while the topic holds no job: a job in any state (waiting, reserved, dead)
/// holds it, and a change is then refused naming both counts, changing nothing (a setting
/// left out asks for one partition, so it is refused too); the other settings change
/// freely with the count kept. Once the topic is empty (acked, purged), it changes.
pub async fn partitions_change_only_while_the_topic_is_empty_issue_18<H: Harness>(h: &H) {
    let (e, other) = (h.open().await, h.open().await);
    let t = topic("parts");
    let with = |n: u16| TopicConfig {
        partitions: Some(n),
        ..TopicConfig::default()
    };
    assert_eq!(ok(e.topic_config(&t).await, "config").partition_count(), 1);
    ok(
        e.set_topic_config(&t, &with(8)).await,
        "8 partitions, empty",
    );
    assert_eq!(ok(other.topic_config(&t).await, "config"), with(8));

    ok(e.push(job(&t, "a")).await, "push");
    let before = h.snapshot().await;
    partitions_in_use(
        other.set_topic_config(&t, &with(16)).await,
        8,
        16,
        "waiting job",
    );
    let ttr_only = TopicConfig {
        ttr: Some(secs(60)),
        ..TopicConfig::default()
    };
    partitions_in_use(
        e.set_topic_config(&t, &ttr_only).await,
        8,
        1,
        "count left out",
    );
    assert!(
        before == h.snapshot().await,
        "a refused change changed the store"
    );
    assert_eq!(ok(e.topic_config(&t).await, "config"), with(8));
    let kept = TopicConfig {
        ttr: Some(secs(60)),
        ..with(8)
    };
    ok(
        e.set_topic_config(&t, &kept).await,
        "other settings, count kept",
    );
    assert_eq!(ok(other.topic_config(&t).await, "config"), kept);

    let d = reserve_one(&e, &t, ms(0)).await;
    partitions_in_use(e.set_topic_config(&t, &with(2)).await, 8, 2, "reserved job");
    ok(e.ack(&lease_of(&d)).await, "ack");
    ok(
        e.set_topic_config(&t, &with(2)).await,
        "2 partitions, empty again",
    );
    assert_eq!(ok(other.topic_config(&t).await, "config"), with(2));

    ok(e.push(job(&t, "b")).await, "push");
    let d = reserve_one(&e, &t, ms(0)).await;
    ok(e.bury(&lease_of(&d), None).await, "bury");
    partitions_in_use(e.set_topic_config(&t, &with(1)).await, 2, 1, "dead job");
    assert_eq!(ok(e.purge(&t).await, "purge"), 1);
    ok(
        e.set_topic_config(&t, &with(1)).await,
        "1 partition after a purge",
    );
    assert_eq!(ok(e.topic_config(&t).await, "config"), with(1));
}
