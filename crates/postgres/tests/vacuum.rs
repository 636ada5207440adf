//! The engine vacuums what its hand-outs leave behind (issue 21): every lease and every ack
//! leaves a dead row version, and its entry at the front of `jobs_waiting` where each reserve
//! starts; with the autovacuum daemon off for the table, the engine's own vacuum still
//! removes them once it has handed out enough jobs (`src/vacuum.rs`: every 10,000).

use std::time::Duration;

use delayq_core::{Engine, NewJob, Reserve, Topic};
use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::PostgresServer;

/// Jobs handed out: over twice the vacuum's threshold.
const JOBS: usize = 25_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dead_versions_of_handed_out_jobs_are_vacuumed() {
    let server = PostgresServer::start();
    let engine = PostgresEngine::connect(PostgresConfig::new(server.url()))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", server.log()));
    let (admin, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    admin
        .batch_execute("ALTER TABLE delayq.jobs SET (autovacuum_enabled = false)")
        .await
        .expect("autovacuum off");

    let topic = Topic::new("drained").expect("topic");
    for _ in 0..JOBS / 1000 {
        let jobs = (0..1000).map(|_| NewJob::new(topic.clone(), "x")).collect();
        engine.push_batch(jobs).await.expect("push");
    }
    let mut handed = 0;
    while handed < JOBS {
        let got = engine
            .reserve(&Reserve::new(topic.clone()).max(1000))
            .await
            .expect("reserve");
        assert!(
            !got.is_empty(),
            "{handed} of {JOBS} jobs handed out, then none"
        );
        handed += got.len();
        let leases: Vec<_> = got.into_iter().filter_map(|d| d.lease).collect();
        for answer in engine.ack_batch(&leases).await.expect("ack") {
            answer.expect("acked");
        }
    }

    // Each hand-out left two dead versions (the lease's UPDATE, the ack's DELETE): 50,000
    // with no vacuum. n_dead_tup is an estimate: a vacuum sets it to what it left, and a
    // backend reports its transactions' dead versions up to a second later, so a report that
    // comes after the vacuum's is added on top for versions the vacuum already removed. On a
    // quiet machine it reads 16,000 to 20,000 after the two vacuums; on a loaded one it read
    // 25,000 once. Below 50,000 it can only be if a vacuum removed versions.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (vacuums, dead) = loop {
        let row = admin
            .query_one(
                "SELECT vacuum_count, n_dead_tup FROM pg_stat_user_tables \
                 WHERE schemaname = 'delayq' AND relname = 'jobs'",
                &[],
            )
            .await
            .expect("statistics");
        let (vacuums, dead): (i64, i64) = (row.get(0), row.get(1));
        if vacuums >= 2 && dead < 2 * i64::try_from(JOBS).expect("jobs") {
            break (vacuums, dead);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "after {JOBS} hand-outs: {vacuums} vacuums, {dead} dead versions"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let autovacuums: i64 = admin
        .query_one(
            "SELECT autovacuum_count FROM pg_stat_user_tables \
             WHERE schemaname = 'delayq' AND relname = 'jobs'",
            &[],
        )
        .await
        .expect("statistics")
        .get(0);
    assert_eq!(
        autovacuums, 0,
        "the daemon vacuumed: the test shows nothing"
    );
    eprintln!("after {JOBS} hand-outs: {vacuums} vacuums, {dead} dead versions left");
}
