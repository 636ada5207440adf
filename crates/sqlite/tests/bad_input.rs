//! Refused input leaves no trace, not even a topic name: a push to a new topic refused for
//! an absolute time too far ahead registers nothing.

mod support;

use std::time::Duration;

use delayq_core::limits::MAX_DELAY;
use delayq_core::{Engine, Error, NewJob, Timestamp, Topic};
use delayq_sqlite::{SqliteConfig, SqliteEngine};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_push_to_a_new_topic_registers_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let e = SqliteEngine::open(SqliteConfig::dir(dir.path())).expect("open");
    let before = support::dump(dir.path());
    let far = Timestamp::now()
        .plus(MAX_DELAY)
        .plus(Duration::from_secs(86_400));
    let t = Topic::new("brand-new").expect("topic");
    for batch in [
        vec![NewJob::new(t.clone(), "x").with_ready_at(far)],
        vec![
            NewJob::new(t.clone(), "ok"),
            NewJob::new(t.clone(), "x").with_ready_at(far),
        ],
    ] {
        let r = e.push_batch(batch).await;
        assert!(matches!(r, Err(Error::InvalidDelay { .. })), "{r:?}");
    }
    assert!(e.topics().await.expect("topics").is_empty());
    assert_eq!(support::dump(dir.path()), before);
}
