//! Fencing tokens never go back, even when the database file loses commits.
//!
//! Under `synchronous=normal` a power loss can roll back the last commits, and an operator
//! may restore an older copy of the file. A lease is such a commit: its token came from the
//! topic's counter, and the file that is opened again has the counter from before it. The job
//! is ready again there (its lease was lost with the commit), and when it is leased again its
//! token must still be greater than the lost one: a worker that still holds the old lease
//! must never be able to ack, touch or nack the new one. Here the lost commit is made for
//! certain: a copy of the closed file is taken before the lease and put back after it.
//!
//! See: issue 37.

use std::path::Path;

use delayq_core::{Engine, JobId, NewJob, Topic};
use delayq_sqlite::{SqliteConfig, SqliteEngine};
use delayq_testkit::fencing::{assert_fenced, lease_the_job};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("make the copy's directory");
    for entry in std::fs::read_dir(from).expect("read the data directory") {
        let entry = entry.expect("a directory entry");
        if entry.file_type().expect("its type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy a file");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_with_its_commit_is_never_followed_by_a_smaller_token_issue_37() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let before = dir.path().join("before");
    let t = Topic::new("fenced").expect("topic");
    let id = JobId::new("order-7").expect("id");

    let e = SqliteEngine::open(SqliteConfig::dir(&data)).expect("open");
    e.push(NewJob::new(t.clone(), "cancel order 7").with_id(id.clone()))
        .await
        .expect("push");
    drop(e);
    copy_dir(&data, &before);

    let e = SqliteEngine::open(SqliteConfig::dir(&data)).expect("open again");
    let lost = lease_the_job(&e, &t, &id).await;
    drop(e);

    // The lease's commit is lost: the file from before it comes back.
    std::fs::remove_dir_all(&data).expect("remove the data directory");
    copy_dir(&before, &data);
    let e = SqliteEngine::open(SqliteConfig::dir(&data)).expect("open the older copy");
    let again = lease_the_job(&e, &t, &id).await;
    assert_fenced(&e, &lost, &again).await;
}
