//! No statement the engine runs scans the `jobs` or the `number_ranges` table (issue 21): with `auto_explain`
//! logging the plan of every statement, the nested ones inside the library's functions
//! included, each operation runs often enough for PL/pgSQL to switch to its generic plans,
//! on a table large enough that a scan would show, and every plan that reads those tables
//! must go through an index; a job named by its id is found by the primary key, not by
//! filtering an index range on the id.

use std::time::Duration;

use delayq_core::{
    Engine, JobId, JobState, Nack, NewJob, Numbers, Release, Reserve, Schedule, Topic, TopicConfig,
};
use delayq_postgres::{PostgresConfig, PostgresEngine};
use delayq_testkit::PostgresServer;

/// Runs each operation this many times: PL/pgSQL plans a statement for its values five
/// times, then may keep a generic plan.
const ROUNDS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_statement_scans_the_jobs_table() {
    let server = PostgresServer::start();
    let (admin, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    let engine = PostgresEngine::connect(PostgresConfig::new(server.url()))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\nlog:\n{}", server.log()));

    // Tables a scan would be costly on: 20,000 jobs in 4 topics and 4 priorities, some
    // delayed a day, some due.
    for t in 0..4 {
        let topic = Topic::new(format!("bulk-{t}")).expect("topic");
        for batch in 0..5 {
            let jobs = (0..1000)
                .map(|i| {
                    let j = NewJob::new(topic.clone(), "x").with_priority(i % 4);
                    if (batch + i) % 2 == 0 {
                        j.with_delay(Duration::from_secs(86_400))
                    } else {
                        j
                    }
                })
                .collect();
            engine.push_batch(jobs).await.expect("bulk push");
        }
    }
    // And 2,000 claimed ranges of numbers.
    let numbered = Topic::new("numbered").expect("topic");
    for _ in 0..2000 {
        engine.claim_numbers(&numbered, 5).await.expect("claim");
    }
    admin
        .batch_execute("ANALYZE delayq.jobs; ANALYZE delayq.number_ranges")
        .await
        .expect("analyze");

    // From here on, every new connection logs the plan of every statement it runs.
    admin
        .batch_execute(
            "ALTER DATABASE postgres SET session_preload_libraries = 'auto_explain'; \
             ALTER DATABASE postgres SET auto_explain.log_min_duration = 0; \
             ALTER DATABASE postgres SET auto_explain.log_nested_statements = on",
        )
        .await
        .expect("auto_explain");
    drop(engine);
    let engine = PostgresEngine::connect(PostgresConfig::new(server.url()))
        .await
        .expect("connect again");
    let start = server.log().len();

    let t = Topic::new("bulk-0").expect("topic");
    for round in 0..ROUNDS {
        let id = JobId::new(format!("plan-{round}")).expect("id");
        let job = || NewJob::new(t.clone(), "p").with_id(id.clone());
        engine.push(job()).await.expect("push");
        engine.push(job()).await.expect("push again");
        let got = engine
            .reserve(&Reserve::new(t.clone()).max(3))
            .await
            .expect("reserve");
        assert_eq!(got.len(), 3, "due jobs are there to take");
        let lease = |k: usize| got[k].lease.clone().expect("a lease");
        engine.ack(&lease(0)).await.expect("ack");
        engine.touch(&lease(1), None).await.expect("touch");
        engine.nack(&lease(1), Nack::default()).await.expect("nack");
        engine
            .release_with(&lease(2), Release::default())
            .await
            .expect("release");
        engine.get(&t, &id).await.expect("get");
        engine.delete(&t, &id).await.expect("delete");
        let got = engine
            .reserve(&Reserve::new(t.clone()))
            .await
            .expect("reserve");
        engine
            .bury(&got[0].lease.clone().expect("a lease"), None)
            .await
            .expect("bury");
        let buried = got[0].job.id.clone();
        engine.kick(&t, &buried).await.expect("kick");
        // Jobs by id and whole topics.
        let w = JobId::new(format!("plan-w-{round}")).expect("id");
        engine
            .push(NewJob::new(t.clone(), "w").with_id(w.clone()))
            .await
            .expect("push");
        engine
            .reschedule(&t, &w, Schedule::Delay(Duration::from_secs(60)))
            .await
            .expect("reschedule");
        let d = engine.reserve_job(&t, &w).await.expect("reserve by id");
        engine
            .release(&d.lease.expect("a lease"))
            .await
            .expect("release");
        engine
            .bury_waiting(&t, &w, None)
            .await
            .expect("bury waiting");
        engine.kick_all(&t).await.expect("kick all");
        for state in JobState::ALL {
            let page = engine.list(&t, state, 2, None).await.expect("list");
            if let Some(next) = page.next {
                engine
                    .list(&t, state, 2, Some(&next))
                    .await
                    .expect("list on");
            }
        }
        engine.stats(&t).await.expect("stats");
        engine.topics().await.expect("topics");
        engine.topic_config(&t).await.expect("settings");
        let small = Topic::new(format!("small-{round}")).expect("topic");
        engine
            .set_topic_config(&small, &TopicConfig::default())
            .await
            .expect("set settings");
        engine.pause(&small, None).await.expect("pause");
        engine.resume(&small).await.expect("resume");
        engine
            .push(NewJob::new(small.clone(), "s"))
            .await
            .expect("push");
        engine.purge(&small).await.expect("purge");
        let n = engine.claim_numbers(&small, 10).await.expect("claim");
        engine.number_topic(n + 3).await.expect("number");
        // A reserve that waits on an empty topic asks when to look next.
        let empty = Topic::new(format!("empty-{round}")).expect("topic");
        engine
            .push(NewJob::new(empty.clone(), "later").with_delay(Duration::from_secs(3600)))
            .await
            .expect("push");
        engine
            .reserve(&Reserve::new(empty).wait(Duration::from_millis(5)))
            .await
            .expect("reserve");
    }

    let log = server.log();
    let log = &log[start..];
    // The nested statements' plans are there: the reserve's walk of the waiting jobs and
    // the lookups by id.
    for index in [
        "jobs_waiting",
        "jobs_pkey",
        "jobs_reserved",
        "jobs_dead",
        "number_ranges_pkey",
    ] {
        assert!(
            log.contains(&format!("using {index} on ")),
            "no plan used {index}:\n{log}"
        );
    }
    let scans: Vec<&str> = log
        .split("LOG:  duration:")
        .filter(|plan| {
            plan.contains("Seq Scan on jobs") || plan.contains("Seq Scan on number_ranges")
        })
        .collect();
    assert!(
        scans.is_empty(),
        "{} plans scan the jobs table:\n{}",
        scans.len(),
        scans.join("\n----\n")
    );
    // A job looked up by id is found by its key: a plan that filters on the id walks an
    // index range instead (the leases of a whole topic, for one ack).
    let walks: Vec<&str> = log
        .split("LOG:  duration:")
        .filter(|plan| plan.lines().any(filters_on_id))
        .collect();
    assert!(
        walks.is_empty(),
        "{} plans filter the jobs by id instead of looking them up:\n{}",
        walks.len(),
        walks.join("\n----\n")
    );
}

/// Whether a plan line is a filter with an equality on a column named `id` (not `tid`).
fn filters_on_id(line: &str) -> bool {
    let Some(filter) = line.trim_start().strip_prefix("Filter: ") else {
        return false;
    };
    filter.match_indices("id = ").any(|(at, _)| {
        !filter[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}
