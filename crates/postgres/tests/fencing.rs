//! Fencing tokens never go back, even when PostgreSQL loses commits.
//!
//! A failover to an asynchronous standby loses the commits the standby had not received, and
//! an operator may restore an older backup. A lease is such a commit: the job is ready again
//! on the server that comes back, and when it is leased again its token must still be greater
//! than the lost one, so that a worker that still holds the old lease can never ack, touch or
//! nack the new one. Here the lost commit is made for certain: the server is killed, a copy
//! of its data directory taken, the job leased, the server killed again and the copy put
//! back (what a standby promoted without that commit holds).
//!
//! See: issue 37.

use delayq_core::{Engine, JobId, NewJob, Topic};
use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::PostgresServer;
use delayq_testkit::fencing::{assert_fenced, lease_the_job};

async fn connect(url: &str) -> PostgresEngine {
    PostgresEngine::connect(PostgresConfig::new(url))
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the test's PostgreSQL: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_with_its_commit_is_never_followed_by_a_smaller_token_issue_37() {
    let mut pg = PostgresServer::start();
    let url = pg.url();
    let copies = tempfile::tempdir().expect("temp dir");
    let before = copies.path().join("data-before-the-lease");
    let t = Topic::new("fenced").expect("topic");
    let id = JobId::new("order-7").expect("id");

    let e = connect(&url).await;
    e.push(NewJob::new(t.clone(), "cancel order 7").with_id(id.clone()))
        .await
        .expect("push");
    drop(e);
    pg.kill();
    pg.copy_data(&before);
    pg.restart();

    let e = connect(&url).await;
    let lost = lease_the_job(&e, &t, &id).await;
    drop(e);

    // The lease's commit is lost: the data directory from before it comes back.
    pg.kill();
    pg.restore_data(&before);
    pg.restart();
    let e = connect(&url).await;
    let again = lease_the_job(&e, &t, &id).await;
    assert_fenced(&e, &lost, &again).await;
}
