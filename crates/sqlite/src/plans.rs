//! Checks that no statement the engine runs scans the `jobs` or the `number_ranges` table:
//! every operation is run once on a traced connection, and each statement seen is explained.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq_core::{
    DeliveryMode, JobId, JobState, Lease, ListKey, NewJob, OnExpire, Retention, Schedule, Topic,
    TopicConfig,
};
use rusqlite::Connection;
use rusqlite::trace::{TraceEvent, TraceEventCodes};

use crate::clock::Clock;

use crate::ops::settle::{Settlement, settle};
use crate::ops::{admin, lease, numbers, push, reserve, tick};
use crate::shared::Shared;
use crate::tx::Tx;
use crate::{open, read, schema};

fn every_operation(conn: &Connection, shared: &Shared) {
    let t = Topic::new("plans").expect("topic");
    let id = |s: &str| JobId::new(s).expect("id");
    let mut tx = Tx::new(conn, shared, 100);
    let jobs = vec![
        NewJob::new(t.clone(), "a").with_id(id("a")),
        NewJob::new(t.clone(), "b").with_id(id("b")),
        NewJob::new(t.clone(), "c")
            .with_id(id("c"))
            .with_max_attempts(1),
        NewJob::new(t.clone(), "d")
            .with_id(id("d"))
            .with_delay(Duration::from_secs(60)),
        NewJob::new(t.clone(), "a again").with_id(id("a")),
    ];
    push::push(&mut tx, &jobs).expect("push");
    let got = reserve::reserve(
        &mut tx,
        std::slice::from_ref(&t),
        3,
        DeliveryMode::AtLeastOnce,
    )
    .expect("reserve");
    let leases: Vec<Lease> = got.iter().filter_map(|d| d.lease.clone()).collect();
    lease::touch(&mut tx, &leases[0], None).expect("touch");
    lease::release(&mut tx, &leases[0], None, None).expect("release");
    lease::nack(&mut tx, &leases[1], Some(0), "again").expect("nack");
    lease::bury(&mut tx, &leases[2], "poison", Some(3)).expect("bury");
    admin::kick(&mut tx, &t, &id("c")).expect("kick");
    let got = reserve::reserve(
        &mut tx,
        std::slice::from_ref(&t),
        5,
        DeliveryMode::AtLeastOnce,
    )
    .expect("reserve");
    let leases: Vec<Lease> = got.iter().filter_map(|d| d.lease.clone()).collect();
    lease::ack_batch(&mut tx, &leases[..1]).expect("ack");
    // From here acks keep their jobs (done), one at most: the second trims the first.
    let keep = Retention {
        max_jobs: 1,
        max_age: Duration::from_secs(60),
    };
    let config = TopicConfig {
        retention: Some(keep),
        ..TopicConfig::default()
    };
    admin::set_config(&mut tx, &t, &config).expect("set config");
    shared.registry.set_config(1, config);
    let settled = settle(
        &mut tx,
        &[
            Settlement::Ack(leases[1].clone()),
            Settlement::Ack(leases[1].clone()),
            Settlement::Release(leases[2].clone()),
        ],
    )
    .expect("settle");
    assert!(settled[0].is_ok() && settled[1].is_err() && settled[2].is_ok());
    let got = reserve::reserve(
        &mut tx,
        std::slice::from_ref(&t),
        1,
        DeliveryMode::AtLeastOnce,
    )
    .expect("reserve");
    let more: Vec<Lease> = got.iter().filter_map(|d| d.lease.clone()).collect();
    lease::ack_batch(&mut tx, &more).expect("ack into done, trimming the first");
    let done_id = more[0].id.clone();
    tick::expire_leases(&mut tx, 1, u64::MAX / 4, 100).expect("expire");
    tick::fall_due(&mut tx, 1, 0, u64::MAX / 4, 100).expect("fall due");
    push::push(
        &mut tx,
        &[
            NewJob::new(t.clone(), "e")
                .with_id(id("e"))
                .with_max_lateness(Duration::from_millis(1)),
            NewJob::new(t.clone(), "f")
                .with_id(id("f"))
                .with_max_lateness(Duration::from_millis(1))
                .with_on_expire(OnExpire::Drop),
        ],
    )
    .expect("push expiring jobs");
    tick::expire_jobs(&mut tx, 1, u64::MAX / 4, 100).expect("expire jobs");
    admin::kick_some(&mut tx, &t, 10).expect("kick_some");
    admin::reschedule(&mut tx, &t, &id("d"), Schedule::NOW).expect("reschedule");
    admin::bury_waiting(&mut tx, &t, &id("d"), "by hand").expect("bury waiting");
    admin::kick(&mut tx, &t, &id("d")).expect("kick");
    reserve::reserve(
        &mut tx,
        std::slice::from_ref(&t),
        5,
        DeliveryMode::AtMostOnce,
    )
    .expect("reserve at most once");
    admin::delete(&mut tx, &t, &id("d")).expect("delete");
    push::push(
        &mut tx,
        &[NewJob::new(t.clone(), "g")
            .with_id(id("g"))
            .with_delay(Duration::from_secs(60))],
    )
    .expect("push a delayed job");
    let g = reserve::reserve_job(&mut tx, &t, &id("g")).expect("reserve by id");
    let g = g.lease.expect("a lease");
    lease::release(&mut tx, &g, Some(1000), Some(1)).expect("release with a delay");
    let first = numbers::claim(&mut tx, &t, 10).expect("claim numbers");
    numbers::claim(&mut tx, &t, 1).expect("claim numbers");
    tx.flush().expect("flush");
    assert_eq!(
        numbers::topic_of(conn, first + 5).expect("number topic"),
        Some(t.clone())
    );
    let now = shared.clock.now_ms();
    for state in JobState::ALL {
        read::list(conn, &t, (state, Some(keep)), 1, ListKey::first(state), now).expect("list");
    }
    read::list(
        conn,
        &t,
        (JobState::Ready, None),
        1,
        ListKey::Ready(1, 2, 3),
        now,
    )
    .expect("list");
    read::list(
        conn,
        &t,
        (JobState::Delayed, None),
        1,
        ListKey::TimeId(1, "x".into()),
        now,
    )
    .expect("list");
    read::get(conn, &t, &id("a"), now, Some(keep)).expect("get");
    let kept = read::get(conn, &t, &done_id, now, Some(keep)).expect("get done");
    assert_eq!(kept.map(|j| j.state), Some(JobState::Done));
    read::stats(conn, &t, now, Some(keep)).expect("stats");
    let mut tx = Tx::new(conn, shared, 100);
    push::push(&mut tx, &[NewJob::new(t.clone(), "again").with_id(done_id)]).expect("push");
    admin::set_config(&mut tx, &t, &TopicConfig::default()).expect("reset config");
    tx.flush().expect("flush");
    read::topics(conn).expect("topics");
    open::recover(conn, shared, Path::new(":memory:")).expect("recover");
    let mut tx = Tx::new(conn, shared, 100);
    admin::purge(&mut tx, &t).expect("purge");
}

#[test]
fn no_statement_scans_the_jobs_table() {
    let mut conn = Connection::open_in_memory().expect("open");
    schema::migrate(&mut conn, Path::new(":memory:")).expect("migrate");
    let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let sink = seen.clone();
    conn.trace_v2(
        TraceEventCodes::SQLITE_TRACE_STMT,
        Some(move |e: TraceEvent<'_>| {
            if let TraceEvent::Stmt(_, sql) = e {
                sink.lock().expect("lock").insert(sql.to_string());
            }
        }),
    )
    .expect("trace");
    let shared = Shared::new(Clock::start(0));
    every_operation(&conn, &shared);
    conn.trace_v2(TraceEventCodes::empty(), None::<fn(TraceEvent<'_>)>)
        .expect("untrace");

    let statements = seen.lock().expect("lock").clone();
    let mut explained = 0;
    for sql in statements {
        let upper = sql.trim_start().to_ascii_uppercase();
        if !["SELECT", "UPDATE", "DELETE", "INSERT"]
            .iter()
            .any(|k| upper.starts_with(k))
        {
            continue;
        }
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .and_then(|mut s| {
                // Plans do not depend on the values; unbound parameters are NULL.
                let nulls = vec![rusqlite::types::Null; s.parameter_count()];
                s.query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))?
                    .collect()
            })
            .unwrap_or_else(|e| panic!("explain {sql}: {e}"));
        explained += 1;
        assert!(
            !plan
                .iter()
                .any(|p| p.starts_with("SCAN jobs") || p.starts_with("SCAN number_ranges")),
            "{sql}\nscans a table: {plan:?}"
        );
    }
    assert!(explained >= 25, "only {explained} statements were seen");
}
