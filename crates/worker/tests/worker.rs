//! The worker runtime against every engine: one generic case per guarantee
//! (`support::cases`), instantiated once per engine by `worker_suite!`; on a Redis Cluster
//! too, with the cases' topics on every primary (issue 13); on Redis with topics of 8
//! partitions (issue 18); and on PostgreSQL (issue 21).

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod support;

mod redis {
    crate::support::worker_suite!(crate::support::redis::RedisBackend);
}

/// The suite on topics of 8 partitions (issue 18): the jobs of each case spread over them.
mod redis_partitioned {
    crate::support::worker_suite!(crate::support::Partitioned<crate::support::redis::RedisBackend>);
}

mod sqlite {
    crate::support::worker_suite!(crate::support::sqlite::SqliteBackend);
}

mod postgres {
    crate::support::worker_suite!(crate::support::postgres::PostgresBackend);
}

mod cluster {
    use std::collections::BTreeSet;

    use delayq_testkit::{RedisCluster, key_slot};

    crate::support::worker_suite!(crate::support::cluster::ClusterBackend);

    /// The topics the cases name (`topic("...")` in `support/cases.rs`) hash to slots of
    /// every primary, so the suite on the cluster runs workers against each of them, not
    /// just one node that happens to be part of a cluster.
    // See: issue 13
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_cases_topics_spread_over_every_primary_issue_13() {
        let cases = include_str!("support/cases.rs");
        let topics: BTreeSet<&str> = cases
            .split("topic(\"")
            .skip(1)
            .filter_map(|rest| rest.split_once('"').map(|(t, _)| t))
            .collect();
        assert!(topics.len() >= 10, "{topics:?}");
        let cluster = tokio::task::spawn_blocking(RedisCluster::shared)
            .await
            .unwrap();
        let primaries = cluster.primaries();
        assert_eq!(primaries.len(), 3);
        for p in &primaries {
            let here: Vec<&&str> = topics
                .iter()
                .filter(|t| p.serves(key_slot(format!("delayq:{{{t}}}:wake"))))
                .collect();
            assert!(!here.is_empty(), "no case topic on {p:?}: {topics:?}");
        }
    }
}
