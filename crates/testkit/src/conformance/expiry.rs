//! Conformance cases of a job's expiry (issue 14): a job that could not be delivered by its
//! expiry is not delivered; it goes dead with the reason `expired` or is dropped, and its
//! topic counts it. Bad expiries are refused and change nothing.

use std::time::Duration;

use delayq_core::{EXPIRED, Engine, Error, JobState, Nack, OnConflict, OnExpire, Reserve};

use super::{get, id, job, new_topic, ok};
use crate::Harness;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The field an `InvalidArgument` refusal names.
fn field<T: std::fmt::Debug>(r: delayq_core::Result<T>) -> &'static str {
    match r {
        Err(Error::InvalidArgument { what, .. }) => what,
        Err(other) => panic!("refused with {other:?}"),
        Ok(v) => panic!("accepted: {v:?}"),
    }
}

/// Jobs that expire on a paused topic are never delivered once it resumes: the default
/// sends them dead with the reason `expired` (attempts untouched), `drop` deletes them; a
/// job whose expiry is still ahead is delivered; the topic counts both expired jobs. A
/// kicked expired job runs: the expiry that passed is cleared.
pub async fn expired_jobs_are_not_delivered_issue_14<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "expiring").await;
    ok(e.pause(&t, None).await, "pause");
    let now = ok(e.now().await, "now");
    let pushed = ok(
        e.push_batch(vec![
            job(&t, "late").with_max_lateness(ms(200)),
            job(&t, "at").with_expires_at(now.plus(ms(200))),
            job(&t, "dropped")
                .with_max_lateness(ms(200))
                .with_on_expire(OnExpire::Drop),
            job(&t, "in-time").with_max_lateness(Duration::from_secs(60)),
            job(&t, "plain"),
        ])
        .await,
        "push",
    );
    let late = get(&e, &t, "late").await;
    assert_eq!(
        late.expires_at,
        Some(pushed[0].ready_at.plus(ms(200))),
        "max_lateness counts from the due time"
    );
    assert_eq!(late.on_expire, OnExpire::Dead);
    assert_eq!(get(&e, &t, "at").await.expires_at, Some(now.plus(ms(200))));
    assert_eq!(get(&e, &t, "dropped").await.on_expire, OnExpire::Drop);
    assert_eq!(get(&e, &t, "plain").await.expires_at, None);

    tokio::time::sleep(ms(400)).await;
    // The paused topic hands nothing out; expired jobs are taken out of the way at the
    // latest when a reserver looks.
    assert!(ok(e.reserve(&Reserve::new(t.clone())).await, "reserve").is_empty());
    ok(e.resume(&t).await, "resume");
    let got = ok(e.reserve(&Reserve::new(t.clone()).max(10)).await, "reserve");
    let mut names: Vec<&str> = got.iter().map(|d| d.job.id.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["in-time", "plain"], "only the jobs still in time");

    for name in ["late", "at"] {
        let j = get(&e, &t, name).await;
        assert_eq!(j.state, JobState::Dead, "{name}");
        assert_eq!(j.last_error.as_deref(), Some(EXPIRED), "{name}");
        assert_eq!(j.attempts, 0, "{name} was never delivered");
    }
    assert_eq!(ok(e.get(&t, &id("dropped")).await, "get"), None);
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!((s.expired_jobs, s.dead), (3, 2), "{s:?}");
    assert_eq!(s.expired_leases, 0);

    // A kick is an order to run it: the past expiry is cleared.
    ok(e.kick(&t, &id("late")).await, "kick");
    let kicked = get(&e, &t, "late").await;
    assert_eq!(kicked.expires_at, None);
    let got = ok(e.reserve(&Reserve::new(t.clone())).await, "reserve");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].job.id.as_str(), "late");
    assert_eq!(got[0].job.expires_at, None);
}

/// A delivery made in time runs to its end: its ack after the expiry is accepted. A retry
/// that falls due after the expiry is not delivered: the job goes dead `expired` with the
/// attempts it used. A replace without an expiry clears it.
pub async fn an_expiry_bounds_retries_not_running_deliveries_issue_14<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "expiring-retry").await;
    ok(
        e.push(
            job(&t, "slow")
                .with_max_lateness(ms(300))
                .with_ttr(Duration::from_secs(30)),
        )
        .await,
        "push",
    );
    ok(
        e.push(
            job(&t, "retried")
                .with_max_lateness(ms(300))
                .with_max_attempts(5),
        )
        .await,
        "push",
    );
    let got = ok(e.reserve(&Reserve::new(t.clone()).max(2)).await, "reserve");
    assert_eq!(got.len(), 2);
    let lease = |name: &str| {
        got.iter()
            .find(|d| d.job.id.as_str() == name)
            .and_then(|d| d.lease.clone())
            .unwrap_or_else(|| panic!("a lease of {name}"))
    };
    ok(
        e.nack(
            &lease("retried"),
            Nack {
                delay: Some(ms(500)),
                reason: Some("try later".into()),
            },
        )
        .await,
        "nack",
    );
    tokio::time::sleep(ms(400)).await;
    ok(e.ack(&lease("slow")).await, "an ack after the expiry");
    tokio::time::sleep(ms(300)).await;
    assert!(ok(e.reserve(&Reserve::new(t.clone()).max(2)).await, "reserve").is_empty());
    let j = get(&e, &t, "retried").await;
    assert_eq!(j.state, JobState::Dead);
    assert_eq!(j.last_error.as_deref(), Some(EXPIRED));
    assert_eq!(j.attempts, 1);
    assert_eq!(ok(e.stats(&t).await, "stats").expired_jobs, 1);

    // Replaced without an expiry: it runs whenever it is reserved.
    let u = new_topic(h, "expiring-replaced").await;
    ok(
        e.push(job(&u, "r").with_max_lateness(ms(100))).await,
        "push",
    );
    ok(
        e.push(job(&u, "r").with_on_conflict(OnConflict::Replace))
            .await,
        "replace",
    );
    assert_eq!(get(&e, &u, "r").await.expires_at, None);
    tokio::time::sleep(ms(200)).await;
    assert_eq!(
        ok(e.reserve(&Reserve::new(u.clone())).await, "reserve").len(),
        1
    );
}

/// An expiry not after the due time (the job could never run), a max_lateness of zero, an
/// expiry given in seconds instead of milliseconds: each refused naming its field, and a
/// batch holding one writes nothing.
pub async fn bad_expiries_are_refused_and_change_nothing_issue_14<H: Harness>(h: &H) {
    let e = h.open().await;
    let t = new_topic(h, "expiring-bad").await;
    let now = ok(e.now().await, "now");
    assert_eq!(
        field(
            e.push(
                job(&t, "a")
                    .with_delay(Duration::from_secs(10))
                    .with_expires_at(now.plus(Duration::from_secs(5)))
            )
            .await
        ),
        "expires_at"
    );
    assert_eq!(
        field(e.push(job(&t, "b").with_expires_at(now)).await),
        "expires_at"
    );
    assert_eq!(
        field(e.push(job(&t, "c").with_max_lateness(Duration::ZERO)).await),
        "max_lateness"
    );
    let seconds = delayq_core::Timestamp::from_millis(now.as_millis() / 1000 + 60);
    assert_eq!(
        field(e.push(job(&t, "d").with_expires_at(seconds)).await),
        "expires_at"
    );
    assert_eq!(
        field(
            e.push_batch(vec![
                job(&t, "e"),
                job(&t, "f")
                    .with_expires_at(now.plus(ms(1)))
                    .with_delay(ms(500)),
            ])
            .await
        ),
        "expires_at"
    );
    for name in ["a", "b", "c", "d", "e", "f"] {
        assert_eq!(ok(e.get(&t, &id(name)).await, "get"), None, "{name}");
    }
    let s = ok(e.stats(&t).await, "stats");
    assert_eq!((s.ready, s.delayed, s.expired_jobs), (0, 0, 0));
}

/// An absolute expiry 1 ms after the push's time on the engine clock plus its delay is
/// either accepted, after the due time the engine gives the job, or refused naming
/// `expires_at`: never an internal error, never a job that expires at its due time. Such an
/// expiry lands on the due time whenever the push comes after the start of its millisecond,
/// as the due time then counts from the next one (never early: issue 36), so each engine
/// must check the expiry against the due time it stores.
///
/// See: issue 36.
pub async fn an_expiry_one_ms_after_the_delay_is_checked_against_the_rounded_due_time_issue_36<
    H: Harness,
>(
    h: &H,
) {
    let e = h.open().await;
    let t = new_topic(h, "expiring-rounded").await;
    let mut refused = 0;
    for i in 0..50 {
        let name = format!("j{i}");
        let now = ok(e.now().await, "now");
        let r = e
            .push(
                job(&t, &name)
                    .with_delay(ms(100))
                    .with_expires_at(now.plus(ms(101))),
            )
            .await;
        match r {
            Ok(p) => {
                let j = get(&e, &t, &name).await;
                let expires_at = j.expires_at.expect("an expiry");
                assert!(
                    expires_at > p.ready_at && j.ready_at == p.ready_at,
                    "{name}: accepted with its expiry {expires_at:?} not after its due time {:?}",
                    p.ready_at
                );
            }
            Err(Error::InvalidArgument {
                what: "expires_at", ..
            }) => {
                refused += 1;
                assert_eq!(ok(e.get(&t, &id(&name)).await, "get"), None, "{name}");
            }
            Err(other) => panic!("{name}: refused with {other:?}, not as an invalid expires_at"),
        }
    }
    // Most pushes come after the start of their millisecond, or in a later one.
    assert!(refused > 0, "all 50 accepted");
}
