//! Opening a data directory written by an older delayq: a schema version 2 database (delayed
//! and ready jobs stored as two states, each in its own index) is migrated to version 3 (one
//! waiting state, ready by time) and every job keeps its state, order and lease; it keeps
//! its page size too, while a new database takes the configured one.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use delayq_core::{
    Destinations, Engine, JobId, JobState, Lease, LeaseToken, NewJob, Numbers, Reserve, Schedules,
    Topic,
};
use delayq_sqlite::{DB_FILE, SqliteConfig, SqliteEngine};
use rusqlite::{Connection, params};

fn topic(name: &str) -> Topic {
    Topic::new(name).expect("valid topic")
}

fn id(name: &str) -> JobId {
    JobId::new(name).expect("valid id")
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64
}

/// A job row of version 2: (id, state, priority, ready_at, seq, attempts, max_attempts,
/// token, deadline, last error).
type OldRow = (
    &'static str,
    i64,
    u32,
    u64,
    u64,
    u32,
    u32,
    u64,
    u64,
    &'static str,
);

/// Writes, in `dir`, the database a delayq at schema version 2 would have left: one topic
/// whose counter is at 10, and one job in each stored state of that version (1 delayed,
/// 2 ready, 3 reserved under token 9, 4 dead).
fn write_version_2(dir: &Path, now: u64) {
    let conn = Connection::open(dir.join(DB_FILE)).expect("create the old database");
    conn.execute_batch("PRAGMA journal_mode = WAL")
        .expect("wal");
    conn.execute_batch(include_str!("../migrations/0001_init.sql"))
        .expect("0001");
    conn.execute_batch(include_str!("../migrations/0002_expired_leases.sql"))
        .expect("0002");
    conn.execute_batch("PRAGMA user_version = 2; PRAGMA application_id = 1684830577;")
        .expect("version 2");
    conn.execute(
        "INSERT INTO topics (tid, name, seq, expired) VALUES (1, 'old', 10, 2)",
        [],
    )
    .expect("topic");
    let rows: [OldRow; 6] = [
        ("ready1", 2, 1, now - 1000, 1, 0, 3, 0, 0, ""),
        ("ready0", 2, 0, now - 500, 2, 0, 3, 0, 0, ""),
        ("soon", 1, 2, now + 300, 3, 0, 3, 0, 0, ""),
        ("later", 1, 0, now + 3_600_000, 4, 0, 3, 0, 0, ""),
        ("reserved", 3, 0, now - 2000, 5, 1, 3, 9, now + 600_000, ""),
        ("dead", 4, 0, now - 3000, 6, 1, 1, 0, now - 100, "boom"),
    ];
    for (name, state, priority, ready_at, seq, attempts, max, token, deadline, error) in rows {
        conn.execute(
            "INSERT INTO jobs (tid, id, state, priority, ready_at, seq, ttr_ms, max_attempts, \
             attempts, bo_base_ms, bo_factor, bo_max_ms, bo_jitter, created_at, token, \
             deadline, last_error, body) \
             VALUES (1, ?1, ?2, ?3, ?4, ?5, 600000, ?6, ?7, 1000, 2, 3600000, 100, ?8, ?9, \
             ?10, ?11, ?12)",
            params![
                name,
                state,
                priority,
                ready_at,
                seq,
                max,
                attempts,
                now - 5000,
                token,
                deadline,
                error,
                format!("body {name}").into_bytes(),
            ],
        )
        .expect("job");
    }
}

fn schema_facts(dir: &Path) -> (i64, Vec<String>, Vec<i64>) {
    let conn = Connection::open(dir.join(DB_FILE)).expect("open");
    let version = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    // The old database keeps the page size it was created with.
    let page: i64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .expect("page size");
    assert_eq!(page, 4096);
    let indexes = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'index' AND name LIKE 'jobs_%' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("indexes");
    let states = conn
        .prepare("SELECT DISTINCT state FROM jobs ORDER BY state")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("states");
    (version, indexes, states)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_database_is_migrated_and_keeps_every_job() {
    let dir = tempfile::tempdir().expect("temp dir");
    let now = now_ms();
    write_version_2(dir.path(), now);
    let t = topic("old");
    let e = SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("open the old database");

    let state = |name: &'static str| {
        let e = e.clone();
        let t = t.clone();
        async move {
            e.get(&t, &id(name))
                .await
                .expect("get")
                .unwrap_or_else(|| panic!("{name} kept"))
        }
    };
    assert_eq!(state("ready1").await.state, JobState::Ready);
    assert_eq!(state("ready0").await.state, JobState::Ready);
    assert_eq!(state("later").await.state, JobState::Delayed);
    let reserved = state("reserved").await;
    assert_eq!(reserved.state, JobState::Reserved);
    assert_eq!(reserved.attempts, 1);
    let dead = state("dead").await;
    assert_eq!(dead.state, JobState::Dead);
    assert_eq!(dead.last_error.as_deref(), Some("boom"));
    let s = e.stats(&t).await.expect("stats");
    assert_eq!(s.reserved, 1);
    assert_eq!(s.dead, 1);
    assert_eq!(s.expired_leases, 2);
    assert_eq!(s.delayed + s.ready, 4);
    assert!(s.ready >= 2, "{s:?}");

    // The lease issued before the upgrade is still live under its token.
    let lease = Lease {
        topic: t.clone(),
        id: id("reserved"),
        token: LeaseToken(9),
    };
    e.ack(&lease).await.expect("the old lease acks");

    // Ready jobs come out in the contract's order, with tokens after the old counter.
    let got = e
        .reserve(&Reserve::new(t.clone()).max(10))
        .await
        .expect("reserve");
    let ids: Vec<String> = got.iter().map(|d| d.job.id.to_string()).collect();
    assert!(
        ids.starts_with(&["ready0".to_string(), "ready1".to_string()]),
        "{ids:?}"
    );
    assert!(!ids.contains(&"later".to_string()), "{ids:?}");
    for d in &got {
        assert!(d.lease.as_ref().expect("lease").token.0 > 10);
        assert_eq!(d.attempt(), 1);
    }

    // The job that was delayed falls due and is handed to a waiting reserve.
    if !ids.contains(&"soon".to_string()) {
        let start = Instant::now();
        let got = e
            .reserve(&Reserve::new(t.clone()).max(10).wait(Duration::from_secs(5)))
            .await
            .expect("reserve");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].job.id, id("soon"));
        assert!(start.elapsed() < Duration::from_secs(4));
    }

    // Ids stay unique across the upgrade: pushing an old id creates nothing.
    let again = e
        .push(NewJob::new(t.clone(), "again").with_id(id("dead")))
        .await
        .expect("push");
    assert!(!again.created);
    assert_eq!(again.state, JobState::Dead);
    // Topics of an older version stay on the topic list (0004), with no settings (0005, 0006,
    // 0011: one partition).
    assert_eq!(e.topics().await.expect("topics"), vec![t.clone()]);
    assert_eq!(
        e.topic_config(&t).await.expect("settings"),
        delayq_core::TopicConfig::default()
    );
    // And no schedules (0007), and jobs without an expiry (0009).
    assert_eq!(e.schedules().await.expect("schedules"), vec![]);
    assert_eq!(e.stats(&t).await.expect("stats").expired_jobs, 0);
    let dead = e
        .get(&t, &again.id)
        .await
        .expect("get")
        .expect("the dead job");
    assert_eq!(dead.expires_at, None);
    // No number is claimed yet (0012): the first claim starts the sequence at 1.
    assert_eq!(e.number_topic(1).await.expect("number topic"), None);
    assert_eq!(e.claim_numbers(&t, 3).await.expect("claim"), 1);
    assert_eq!(
        e.number_topic(3).await.expect("number topic"),
        Some(t.clone())
    );
    // No destination (0013).
    assert_eq!(e.destinations().await.expect("destinations"), vec![]);
    drop(e);

    let (version, indexes, states) = schema_facts(dir.path());
    // 0014 added the schedules' expiry columns (no schedule here to carry them).
    assert_eq!(version, 14);
    // The clock's high-water mark (0010) starts at least at the latest push time the old
    // jobs record, and the engine's writes since raised it.
    let conn = Connection::open(dir.path().join(DB_FILE)).expect("open");
    let (mark, pushed): (u64, u64) = conn
        .query_row(
            "SELECT (SELECT value FROM meta WHERE key = 'clock_ms'), max(created_at) FROM jobs",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the mark");
    assert!(
        mark >= pushed && mark >= now,
        "mark {mark}, pushed {pushed}, now {now}"
    );
    assert_eq!(
        indexes,
        vec![
            "jobs_dead",
            "jobs_done",
            "jobs_expiring",
            "jobs_id",
            "jobs_reserved",
            "jobs_waiting"
        ]
    );
    assert!(
        !states.contains(&2),
        "no job is left in the old ready state: {states:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_database_takes_the_configured_page_size() {
    for (size, expected) in [(None, 1024), (Some(4096), 4096)] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = SqliteConfig::dir(dir.path());
        if let Some(size) = size {
            config.page_size = size;
        }
        let e = SqliteEngine::open(config).expect("open");
        e.push(NewJob::new(topic("p"), "x")).await.expect("push");
        drop(e);
        let conn = Connection::open(dir.path().join(DB_FILE)).expect("open");
        let page: u32 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .expect("page size");
        assert_eq!(page, expected);
    }
    for bad in [0, 1000, 256, 131_072] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = SqliteConfig::dir(dir.path());
        config.page_size = bad;
        match SqliteEngine::open(config) {
            Err(delayq_core::Error::InvalidConfig { reason }) => {
                assert!(reason.contains("page_size"), "{reason}")
            }
            other => panic!("page_size {bad}: {:?}", other.map(|_| ())),
        }
        assert!(!dir.path().join(DB_FILE).exists(), "nothing is created");
    }
}
