//! A full disk (simulated with `max_db_bytes`): a write that does not fit fails with
//! `Full` saying the database is full and changes nothing; the engine keeps
//! reading, deletes free space, and writes that fit again succeed.

mod support;

use delayq_core::{Engine, Error, NewJob, Reserve, Topic};
use delayq_sqlite::{SqliteConfig, SqliteEngine};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_database_refuses_writes_cleanly_and_recovers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = SqliteConfig::dir(dir.path()).with_max_db_bytes(512 * 1024);
    let e = SqliteEngine::open(cfg).expect("open");
    let t = Topic::new("full").expect("topic");
    let body = vec![7u8; 16 * 1024];
    let mut pushed = 0;
    let err = loop {
        match e.push(NewJob::new(t.clone(), body.clone())).await {
            Ok(_) => pushed += 1,
            Err(err) => break err,
        }
        assert!(pushed < 1000, "the size cap was never reached");
    };
    assert!(
        matches!(err, Error::Full { .. }),
        "expected Full, got {err:?}"
    );
    assert!(err.to_string().contains("full"), "{err}");
    assert!(pushed > 5, "only {pushed} jobs fitted");

    // The refused push left nothing behind, and the engine still reads and writes.
    let before = support::dump(dir.path());
    assert!(e.push(NewJob::new(t.clone(), body.clone())).await.is_err());
    assert_eq!(support::dump(dir.path()), before);
    assert_eq!(e.stats(&t).await.expect("stats").ready, pushed);

    // Deleting jobs frees pages (a delete needs no new page), which new writes reuse.
    let ids: Vec<_> = e
        .list(&t, delayq_core::JobState::Ready, 5, None)
        .await
        .expect("list")
        .jobs
        .into_iter()
        .map(|j| j.id)
        .collect();
    for id in &ids {
        assert!(e.delete(&t, id).await.expect("delete on a full database"));
    }
    e.push(NewJob::new(t.clone(), body.clone()))
        .await
        .expect("a push fits again after deletes freed space");
    let got = e.reserve(&Reserve::new(t.clone())).await.expect("reserve");
    let lease = got[0].lease.clone().expect("lease");
    e.ack(&lease).await.expect("ack");
}

/// Concurrent pushes share group commits; when some no longer fit, each answer is still
/// exact: every push answered Ok is stored, every push answered with an error is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_push_of_a_group_is_answered_exactly_when_the_database_fills() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = SqliteConfig::dir(dir.path()).with_max_db_bytes(1024 * 1024);
    let e = SqliteEngine::open(cfg).expect("open");
    let t = Topic::new("race").expect("topic");
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (e, t) = (e.clone(), t.clone());
            tokio::spawn(async move {
                let id = delayq_core::JobId::new(format!("j{i}")).expect("id");
                let r = e
                    .push(NewJob::new(t, vec![i as u8; 40 * 1024]).with_id(id.clone()))
                    .await;
                (id, r)
            })
        })
        .collect();
    let (mut stored, mut refused) = (0, 0);
    for task in tasks {
        let (id, r) = task.await.expect("task");
        let found = e.get(&t, &id).await.expect("get");
        match r {
            Ok(p) => {
                assert!(p.created);
                assert!(found.is_some(), "{id} was answered Ok but is not stored");
                stored += 1;
            }
            Err(err) => {
                assert!(matches!(err, Error::Full { .. }), "{err:?}");
                assert!(found.is_none(), "{id} was refused but is stored");
                refused += 1;
            }
        }
    }
    assert!(
        stored > 0 && refused > 0,
        "{stored} stored, {refused} refused"
    );
    assert_eq!(e.stats(&t).await.expect("stats").ready, stored);
}
