//! Conformance cases of pausing a topic (issue 14): a paused topic hands out nothing while
//! its jobs still fall due, every instance sees the pause, a waiting reserve wakes when the
//! pause ends (by resume or by its end time), and a pause too far ahead is refused.

use std::time::{Duration, Instant};

use delayq_core::limits::MAX_DELAY;
use delayq_core::{Engine, Error, Reserve, Timestamp};

use super::{job, new_topic, ok};
use crate::Harness;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A paused topic delivers nothing, even to a reserve over several topics (which gets the
/// others' jobs); its delayed jobs still fall due; another instance sees the pause in the
/// stats and ends it, which wakes a reserve waiting on it.
pub async fn a_paused_topic_delivers_nothing_until_resumed_issue_14<H: Harness>(h: &H) {
    let (e, other) = (h.open().await, h.open().await);
    let (t, u) = (new_topic(h, "paused").await, new_topic(h, "running").await);
    ok(e.push(job(&t, "a")).await, "push");
    ok(e.push(job(&t, "b").with_delay(ms(100))).await, "push");
    ok(e.push(job(&u, "c")).await, "push");
    ok(e.pause(&t, None).await, "pause");
    assert_eq!(
        ok(other.stats(&t).await, "stats").paused_until,
        Some(Timestamp::NEVER)
    );
    assert_eq!(ok(other.stats(&u).await, "stats").paused_until, None);
    assert!(ok(other.reserve(&Reserve::new(t.clone())).await, "reserve").is_empty());
    let both = Reserve::topics([t.clone(), u.clone()]).max(10);
    let got = ok(other.reserve(&both).await, "reserve");
    assert_eq!(
        got.iter().map(|d| d.job.id.as_str()).collect::<Vec<_>>(),
        ["c"],
        "only the running topic's job"
    );
    // "b" falls due while the topic is paused.
    tokio::time::sleep(ms(300)).await;
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!((s.ready + s.delayed, s.delayed), (2, 0), "{s:?}");
    assert!(ok(e.reserve(&Reserve::new(t.clone())).await, "reserve").is_empty());

    // A reserve waiting on the paused topic wakes when another instance resumes it.
    let waiting = {
        let e = h.open().await;
        let t = t.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let got = e
                .reserve(&Reserve::new(t).max(10).wait(Duration::from_secs(20)))
                .await;
            (got, start.elapsed())
        })
    };
    tokio::time::sleep(ms(300)).await;
    ok(other.resume(&t).await, "resume");
    let (got, took) = waiting.await.expect("the waiting reserve");
    let mut got = ok(got, "waiting reserve");
    // On a topic of several partitions a reserve woken for one brings that partition's
    // jobs; the next call brings the other's.
    if h.partitions().is_some() && got.len() == 1 {
        got.extend(ok(
            e.reserve(&Reserve::new(t.clone()).max(10)).await,
            "reserve",
        ));
    }
    assert_eq!(got.len(), 2, "both jobs, once resumed");
    assert!(
        took < Duration::from_secs(10),
        "woken by the resume after {took:?}"
    );
    assert_eq!(ok(e.stats(&t).await, "stats").paused_until, None);
    // Resuming a topic that is not paused changes nothing.
    ok(e.resume(&t).await, "resume again");
}

/// A pause with an end time ends by itself: a reserve waiting on the topic gets its job
/// once the pause is over, not before.
pub async fn a_timed_pause_ends_by_itself_issue_14<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "paused-briefly").await;
    ok(e.push(job(&t, "a")).await, "push");
    let until = ok(e.now().await, "now").plus(ms(700));
    ok(e.pause(&t, Some(until)).await, "pause");
    assert_eq!(ok(e.stats(&t).await, "stats").paused_until, Some(until));
    let start = Instant::now();
    let got = ok(
        e.reserve(&Reserve::new(t.clone()).wait(Duration::from_secs(20)))
            .await,
        "reserve",
    );
    let at = ok(e.now().await, "now");
    assert_eq!(got.len(), 1, "the job, once the pause ended");
    assert!(at >= until, "delivered during the pause");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "the pause's end did not wake the reserve ({:?})",
        start.elapsed()
    );
    assert_eq!(ok(e.stats(&t).await, "stats").paused_until, None);
}

/// A pause ending more than 10 years ahead is refused (pause without an end instead) and
/// changes nothing.
pub async fn a_pause_too_far_ahead_is_refused_issue_14<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "paused-far").await;
    ok(e.push(job(&t, "a")).await, "push");
    let before = h.snapshot().await;
    let far = ok(e.now().await, "now").plus(MAX_DELAY + Duration::from_secs(3600));
    match e.pause(&t, Some(far)).await {
        Err(err @ Error::InvalidArgument { what: "until", .. }) => {
            assert!(err.is_invalid_input(), "{err:?}");
        }
        other => panic!("a pause ending in 10 years and an hour was accepted: {other:?}"),
    }
    assert_eq!(
        h.snapshot().await,
        before,
        "the refused pause changed the store"
    );
    assert_eq!(ok(e.stats(&t).await, "stats").paused_until, None);
}
