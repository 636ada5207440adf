//! Connecting to a cluster: over TLS as an ACL user with just what delayq needs (issue 13),
//! a wrong password or an untrusted CA, a plain `redis://` URL at a cluster node, and
//! readiness as the cluster's own verdict (issue 36).

use std::time::{Duration, Instant};

use delayq_core::{Engine, Error, NewJob, Readiness, Reserve};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{AclUser, ClusterOptions, RedisCluster, RedisOptions, RedisServer};

use crate::{engine, engine_with, id, topics_per_primary, woken_by_a_push};

/// The ACL user of the TLS clusters below (`delayq_testkit::ACL_RULES`: what delayq needs).
fn app_user() -> AclUser {
    AclUser::new("delayq-app", "app-s3cret")
}

/// A cluster that speaks only TLS, with [`app_user`] on every node.
fn tls_cluster(replicas: usize) -> RedisCluster {
    RedisCluster::start_with(ClusterOptions {
        replicas,
        tls: true,
        acl: Some(app_user()),
        ..ClusterOptions::default()
    })
}

/// The engine on a cluster that speaks only TLS and has an ACL user with just what delayq
/// needs: it connects with `rediss+cluster://user:password@...` and the CA, serves topics on
/// every primary, and a reserve waiting across primaries (one blocking connection per slot,
/// each over TLS as that user) wakes at once for a push from another engine.
#[tokio::test]
async fn works_over_tls_as_an_acl_user_on_every_primary_issue_13() {
    // See: issue 13
    let cluster = tls_cluster(1);
    let url = cluster.url();
    let prefix = format!("rediss+cluster://{}@127.0.0.1:", app_user().userinfo());
    assert!(url.starts_with(&prefix), "{url}");
    let config = || RedisConfig::new(cluster.url()).with_tls_ca_file(cluster.tls_ca_file());
    // A safety wake longer than every wait here: only a signal can wake the waiter in time.
    let waiter = RedisEngine::connect(config().with_safety_wake(Duration::from_secs(120)))
        .await
        .unwrap();
    let producer = RedisEngine::connect(config()).await.unwrap();
    let topics = topics_per_primary(&cluster, "tls");

    // A push to each primary, one reserve across them all, an ack of each.
    for (k, t) in topics.iter().enumerate() {
        let job = NewJob::new(t.clone(), format!("job {k}")).with_id(id(&format!("j{k}")));
        assert!(producer.push(job).await.unwrap().created);
    }
    let got = waiter
        .reserve(&Reserve::topics(topics.clone()).max(10))
        .await
        .unwrap();
    let mut bodies: Vec<&[u8]> = got.iter().map(|d| d.job.body.as_ref()).collect();
    bodies.sort();
    assert_eq!(bodies, [&b"job 0"[..], b"job 1", b"job 2"]);
    for d in &got {
        waiter.ack(d.lease.as_ref().unwrap()).await.unwrap();
    }
    for (k, t) in topics.iter().enumerate() {
        let left = producer.get(t, &id(&format!("j{k}"))).await.unwrap();
        assert!(left.is_none(), "acked, yet still there: {left:?}");
    }

    // Waits across the primaries: each wakes for a job pushed by the other engine.
    let req = Reserve::topics(topics.clone()).wait(Duration::from_secs(20));
    for (k, t) in topics.iter().enumerate() {
        let ready = blocked_as_app_user_on_every_primary(&cluster);
        let got = woken_by_a_push(
            &waiter,
            &producer,
            &req,
            t.clone(),
            &format!("woken {k}"),
            ready,
        )
        .await;
        waiter.ack(got[0].lease.as_ref().unwrap()).await.unwrap();
    }
}

/// Waits (at most 10 s) until every primary holds a blocked `BZPOPMIN` of the application's
/// user: the waker's per-node waits are up, each over TLS as that user. A wait starts at a
/// seed and follows MOVED to the slot's primary, two TLS handshakes that a busy machine may
/// stretch; a job pushed before then is still found, but later than a signal would bring it.
async fn blocked_as_app_user_on_every_primary(cluster: &RedisCluster) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for p in cluster.primaries() {
        let mut admin = cluster.server(p.port).connection().await;
        loop {
            let clients: String = redis::cmd("CLIENT")
                .arg("LIST")
                .query_async(&mut admin)
                .await
                .unwrap();
            let user = format!(" user={} ", app_user().name);
            if clients.lines().any(|l| {
                l.contains(&user) && l.contains(" cmd=bzpopmin ") && l.contains(" flags=b ")
            }) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no blocked wait of the ACL user on port {}:\n{clients}",
                p.port
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// On a TLS cluster with an ACL user, a wrong password is a configuration error that says
/// to check the credentials, and a client that does not trust the cluster's CA cannot
/// connect: both answer within the connect timeout, neither hangs.
#[tokio::test]
async fn a_wrong_password_or_an_untrusted_ca_fails_at_connect_issue_13() {
    // See: issue 13
    let cluster = tls_cluster(0);
    let user = app_user();
    let bounded = |what: &str, started: Instant| {
        let took = started.elapsed();
        assert!(took < Duration::from_secs(8), "{what} took {took:?}");
    };

    let wrong = cluster
        .url()
        .replace(&user.userinfo(), &format!("{}:wrong", user.name));
    assert_ne!(wrong, cluster.url());
    let started = Instant::now();
    let r =
        RedisEngine::connect(RedisConfig::new(wrong).with_tls_ca_file(cluster.tls_ca_file())).await;
    bounded("a wrong password", started);
    assert!(
        matches!(r, Err(Error::InvalidConfig { ref reason }) if reason.contains("password")),
        "{:?}",
        r.err()
    );

    // No credentials: the default user is password-protected.
    let anonymous = cluster.url().replace(&format!("{}@", user.userinfo()), "");
    let started = Instant::now();
    let r =
        RedisEngine::connect(RedisConfig::new(anonymous).with_tls_ca_file(cluster.tls_ca_file()))
            .await;
    bounded("no credentials", started);
    assert!(
        matches!(r, Err(Error::InvalidConfig { ref reason }) if reason.contains("password")),
        "{:?}",
        r.err()
    );

    // Another CA than the one that signed the nodes' certificates, then the system's roots.
    let other = RedisServer::start_with(RedisOptions {
        tls: true,
        ..RedisOptions::default()
    });
    for config in [
        RedisConfig::new(cluster.url()).with_tls_ca_file(other.tls_ca_file()),
        RedisConfig::new(cluster.url()),
    ] {
        let started = Instant::now();
        let r = RedisEngine::connect(config).await;
        bounded("an untrusted CA", started);
        let e = r
            .err()
            .expect("a certificate from an untrusted CA was accepted");
        assert!(e.to_string().contains("certificate"), "{e:?}");
    }
}

/// A plain `redis://` URL pointed at a cluster node is refused at connect, saying to use
/// `redis+cluster://`, instead of starting and then answering 503 to everything.
// See: issue 36
#[tokio::test]
async fn a_plain_redis_url_at_a_cluster_node_says_to_use_redis_cluster_issue_36() {
    let cluster = RedisCluster::start();
    let node = &cluster.primaries()[0];
    let r =
        RedisEngine::connect(RedisConfig::new(format!("redis://127.0.0.1:{}", node.port))).await;
    match r {
        Err(delayq_core::Error::InvalidConfig { reason }) => {
            assert!(reason.contains("redis+cluster://"), "{reason}");
        }
        Err(e) => panic!("not a configuration error: {e}"),
        Ok(_) => panic!("a plain URL at a cluster node was accepted"),
    }
}

/// Readiness on a cluster is the cluster's own verdict, which it reads with `CLUSTER INFO`
/// (allowed by `delayq_testkit::ACL_RULES`). A Redis user that may not run it (rules
/// written before readiness needed it) gets the check of one node, `TIME`, rather than an
/// error that would take every server out of its load balancer on upgrade. Nor does such a
/// user's connect fail on `CLUSTER SHARDS`, which those rules predate too (issue 37): a
/// slot found unreachable then takes only itself out, not its shard.
#[tokio::test]
async fn readiness_reads_the_cluster_state_or_without_the_permission_checks_a_node_issue_36() {
    // See: issue 36 (bug 7)
    let user = app_user();
    let cluster = RedisCluster::start_with(ClusterOptions {
        replicas: 0,
        acl: Some(user.clone()),
        ..ClusterOptions::default()
    });
    let old_rules = delayq_testkit::ACL_RULES
        .replace(" +cluster|info", "")
        .replace(" +cluster|shards", "");
    for rule in ["+cluster|info", "+cluster|shards"] {
        assert!(delayq_testkit::ACL_RULES.contains(rule) && !old_rules.contains(rule));
    }
    let mut admins = Vec::new();
    for n in cluster.nodes() {
        let mut admin = cluster.server(n.port).connection().await;
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("delayq-old")
            .arg("on")
            .arg(">old-s3cret")
            .arg(old_rules.split_whitespace().collect::<Vec<_>>())
            .query_async(&mut admin)
            .await
            .unwrap();
        admins.push(admin);
    }
    // Which of CLUSTER INFO and CLUSTER SHARDS some node refused.
    let denied = |admins: Vec<redis::aio::MultiplexedConnection>| async move {
        let mut log = String::new();
        for mut admin in admins {
            let entries: redis::Value = redis::cmd("ACL")
                .arg("LOG")
                .query_async(&mut admin)
                .await
                .unwrap();
            log.push_str(&format!("{entries:?}"));
        }
        (log.contains("cluster|info"), log.contains("cluster|shards"))
    };

    let app = engine(&cluster).await;
    assert_eq!(app.readiness().await.unwrap(), Readiness::Ready);
    assert_eq!(denied(admins.clone()).await, (false, false), "refused");

    let old_url = cluster
        .url()
        .replace(&user.userinfo(), "delayq-old:old-s3cret");
    let old = engine_with(&cluster, RedisConfig::new(old_url)).await;
    assert_eq!(old.readiness().await.unwrap(), Readiness::Ready);
    assert_eq!(denied(admins).await, (true, true), "not tried");
}
