//! The Redis Cluster harness against real `redis-server` nodes: the cluster it forms, how
//! keys route, a failover after kill -9, a slot migration under traffic, and the same helpers
//! on a cluster that speaks only TLS and has an ACL user.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use delayq_testkit::{
    AclUser, ClusterNode, ClusterOptions, RedisCluster, RedisOptions, RedisServer, SLOTS, key_slot,
};
use redis::AsyncCommands;

/// `CLUSTER INFO` of the node on `port`.
async fn cluster_info(cluster: &RedisCluster, port: u16) -> String {
    let mut conn = cluster.server(port).connection().await;
    redis::cmd("CLUSTER")
        .arg("INFO")
        .query_async(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("CLUSTER INFO on {port}: {e}"))
}

/// Asserts that every running node reports a healthy cluster with all slots covered.
async fn assert_cluster_ok(cluster: &RedisCluster) {
    for node in cluster.nodes() {
        let info = cluster_info(cluster, node.port).await;
        assert!(
            info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384"),
            "port {}: {info}",
            node.port
        );
    }
}

/// A key with the hash tag `{tag}`, so all keys of one tag share a slot (as a topic's do).
fn tagged(tag: &str, name: &str) -> String {
    format!("delayq:{{{tag}}}:{name}")
}

/// Hash tags whose slots lie on each of the cluster's primaries, one per primary, in the
/// order of `RedisCluster::primaries`.
fn tag_per_primary(primaries: &[ClusterNode]) -> Vec<String> {
    primaries
        .iter()
        .map(|p| {
            (0..)
                .map(|i| format!("topic-{i}"))
                .find(|t| p.serves(key_slot(t)))
                .unwrap_or_default()
        })
        .collect()
}

#[tokio::test]
async fn cluster_comes_up_with_every_slot_covered_and_three_replicas() {
    let cluster = RedisCluster::start();
    assert_cluster_ok(&cluster).await;

    let primaries = cluster.primaries();
    let replicas = cluster.replicas();
    assert_eq!(primaries.len(), 3, "{primaries:?}");
    assert_eq!(replicas.len(), 3, "{replicas:?}");
    // The primaries' slot ranges tile 0..=16383 exactly, in order.
    let mut ranges: Vec<_> = primaries.iter().flat_map(|p| p.slots.clone()).collect();
    ranges.sort_by_key(|r| *r.start());
    let mut next = 0;
    for r in &ranges {
        assert_eq!(
            *r.start(),
            next,
            "a gap or an overlap before {r:?}: {ranges:?}"
        );
        next = r.end() + 1;
    }
    assert_eq!(next, SLOTS);
    // Each primary has exactly one replica, which has finished its sync.
    for p in &primaries {
        let mine: Vec<_> = replicas
            .iter()
            .filter(|r| r.primary_id.as_ref() == Some(&p.id))
            .collect();
        assert_eq!(mine.len(), 1, "replicas of {p:?}: {replicas:?}");
        let mut conn = cluster.server(mine[0].port).connection().await;
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("INFO on {}: {e}", mine[0].port));
        assert!(info.contains("role:slave"), "{info}");
        assert!(info.contains("master_link_status:up"), "{info}");
        assert!(info.contains(&format!("master_port:{}", p.port)), "{info}");
    }

    // Seeds and the cluster URL name every node, on loopback only.
    let urls = cluster.urls();
    assert_eq!(urls.len(), 6);
    let ports: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    for port in &ports {
        assert!(urls.contains(&format!("redis://{port}")), "{urls:?}");
        assert!(cluster.url().contains(port.as_str()), "{}", cluster.url());
    }
    assert!(cluster.url().starts_with("redis+cluster://127.0.0.1:"));
    assert_eq!(cluster.url().matches(',').count(), 5, "{}", cluster.url());
}

/// Three primaries alone (the benchmarks' cluster): every slot covered, no replica.
#[tokio::test]
async fn three_primaries_without_replicas_cover_every_slot() {
    let cluster = RedisCluster::start_with_replicas(0);
    assert_cluster_ok(&cluster).await;
    assert_eq!(cluster.primaries().len(), 3);
    assert!(cluster.replicas().is_empty(), "{:?}", cluster.replicas());
    let served: usize = cluster.primaries().iter().map(|p| p.slot_count()).sum();
    assert_eq!(served, usize::from(SLOTS));
    assert_eq!(cluster.urls().len(), 3);
}

#[tokio::test]
async fn key_slot_agrees_with_cluster_keyslot() {
    // Any cluster-mode node answers CLUSTER KEYSLOT, even before it serves slots.
    let node = RedisServer::start_with(RedisOptions {
        cluster: true,
        ..RedisOptions::default()
    });
    let mut conn = node.connection().await;
    let mut keys: Vec<Vec<u8>> = [
        "",
        "a",
        "123456789",
        "{",
        "}",
        "{}",
        "}{",
        "{}a",
        "a{}{b}",
        "{a}",
        "x{a}y",
        "{{a}}",
        "a{b}{c}",
        "a{b",
        "delayq:{orders}:ready",
        "delayq:{orders}:jobs",
        "naïve{ünïcode}",
    ]
    .iter()
    .map(|k| k.as_bytes().to_vec())
    .collect();
    keys.extend((0..200).map(|i| format!("topic-{i}").into_bytes()));
    keys.push(vec![0xff, b'{', 0x00, 0x80, b'}', 0xfe]);
    for key in keys {
        let redis_slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("CLUSTER KEYSLOT {key:?}: {e}"));
        assert_eq!(
            key_slot(&key),
            redis_slot,
            "key {:?}",
            String::from_utf8_lossy(&key)
        );
    }
}

#[tokio::test]
async fn hash_tagged_keys_route_to_the_primary_node_for_key_names() {
    let cluster = RedisCluster::start();
    let primaries = cluster.primaries();
    let tags = tag_per_primary(&primaries);
    let mut cluster_conn = cluster.cluster_connection().await;
    for (tag, primary) in tags.iter().zip(&primaries) {
        // Every key of one tag lives on one primary, the one node_for_key names.
        for name in ["ready", "jobs", "leases"] {
            let key = tagged(tag, name);
            assert_eq!(cluster.node_for_key(&key), *primary, "{key}");
            let () = cluster_conn
                .set(&key, name)
                .await
                .unwrap_or_else(|e| panic!("SET {key} through the cluster: {e}"));
        }
        // The keys are on that primary itself...
        let mut direct = cluster.server(primary.port).connection().await;
        let value: Option<String> = direct
            .get(tagged(tag, "jobs"))
            .await
            .unwrap_or_else(|e| panic!("GET on {}: {e}", primary.port));
        assert_eq!(value.as_deref(), Some("jobs"));
        // ...and every other primary redirects there.
        for other in primaries.iter().filter(|p| p.id != primary.id) {
            let mut conn = cluster.server(other.port).connection().await;
            let err = conn
                .get::<_, Option<String>>(tagged(tag, "jobs"))
                .await
                .err()
                .unwrap_or_else(|| panic!("port {} served a key it does not own", other.port));
            assert_eq!(err.code(), Some("MOVED"), "port {}: {err}", other.port);
            let expected = format!("127.0.0.1:{}", primary.port);
            assert_eq!(
                err.redirect_node(),
                Some((expected.as_str(), key_slot(tag))),
                "port {}: {err}",
                other.port
            );
        }
    }
}

#[tokio::test]
async fn kill_primary_promotes_its_replica_and_the_cluster_is_ok_again() {
    let mut cluster = RedisCluster::start();
    let before = cluster.primaries()[1].clone();
    let replica = cluster
        .replicas()
        .into_iter()
        .find(|r| r.primary_id.as_ref() == Some(&before.id))
        .unwrap_or_else(|| panic!("primary 1 has no replica"));
    // A key on the doomed primary, acknowledged by its replica before the kill.
    let tag = tag_per_primary(&cluster.primaries())[1].clone();
    let key = tagged(&tag, "survivor");
    let mut direct = cluster.server(before.port).connection().await;
    let acked: i64 = redis::pipe()
        .set(&key, "kept")
        .ignore()
        .cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query_async::<(i64,)>(&mut direct)
        .await
        .unwrap_or_else(|e| panic!("SET + WAIT on {}: {e}", before.port))
        .0;
    assert_eq!(acked, 1, "the replica did not acknowledge the write");
    drop(direct);

    let failover = cluster.kill_primary(1).await;
    assert_eq!(failover.killed, before);
    assert_eq!(failover.promoted.id, replica.id, "{failover:?}");
    assert_eq!(failover.promoted.slots, before.slots);
    assert_eq!(cluster.primaries()[1], failover.promoted);
    assert_eq!(cluster.primaries().len(), 3);
    assert_eq!(cluster.replicas().len(), 2);
    assert!(cluster.urls().len() == 5 && !cluster.url().contains(&before.port.to_string()));
    assert_cluster_ok(&cluster).await;
    assert_eq!(cluster.node_for_key(&key), failover.promoted);
    let mut conn = cluster.cluster_connection().await;
    let value: Option<String> = conn
        .get(&key)
        .await
        .unwrap_or_else(|e| panic!("GET {key} after the failover: {e}"));
    assert_eq!(value.as_deref(), Some("kept"));

    // The killed node comes back as a replica of the node that took its slots over.
    let back = cluster.restart(before.port).await;
    assert_eq!(back.id, before.id, "a restarted node keeps its id");
    assert_eq!(back.primary_id.as_ref(), Some(&failover.promoted.id));
    assert_eq!(cluster.replicas().len(), 3);
    assert_cluster_ok(&cluster).await;
}

#[tokio::test]
async fn migrate_slot_moves_a_slot_and_its_keys_while_traffic_flows() {
    let cluster = RedisCluster::start();
    let primaries = cluster.primaries();
    let tag = tag_per_primary(&primaries)[0].clone();
    let slot = key_slot(&tag);
    let (from, to) = (primaries[0].clone(), primaries[2].clone());

    // More keys than one MIGRATE batch moves, written before the migration.
    let mut conn = cluster.cluster_connection().await;
    let keys: Vec<String> = (0..250)
        .map(|i| tagged(&tag, &format!("job-{i}")))
        .collect();
    for (i, key) in keys.iter().enumerate() {
        let () = conn
            .set(key, i)
            .await
            .unwrap_or_else(|e| panic!("SET {key}: {e}"));
    }

    // Traffic on the same slot during the migration: counters, each increment counted.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let traffic = tokio::spawn({
        let (stop, done) = (stop.clone(), done.clone());
        let mut conn = cluster.cluster_connection().await;
        let tag = tag.clone();
        async move {
            let mut counts: HashMap<String, i64> = HashMap::new();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = tagged(&tag, &format!("counter-{}", i % 20));
                let n: i64 = conn
                    .incr(&key, 1)
                    .await
                    .unwrap_or_else(|e| panic!("INCR {key} during the migration: {e}"));
                let mine = counts.entry(key).or_default();
                *mine += 1;
                assert_eq!(n, *mine, "an increment was lost or applied twice");
                i += 1;
                done.store(i, Ordering::Relaxed);
            }
            counts
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;

    let before = done.load(Ordering::Relaxed);
    cluster.migrate_slot(slot, &from, &to).await;
    let during = done.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    let counts = traffic.await.unwrap_or_else(|e| panic!("traffic: {e}"));
    assert!(during > 0, "no traffic flowed while the slot moved");

    assert_eq!(cluster.node_for_key(&keys[0]).id, to.id);
    assert!(!cluster.primaries()[0].serves(slot));
    assert_cluster_ok(&cluster).await;
    // Every key is readable through the cluster client, and lives on `to` alone.
    let mut fresh = cluster.cluster_connection().await;
    for (i, key) in keys.iter().enumerate() {
        let value: Option<usize> = fresh
            .get(key)
            .await
            .unwrap_or_else(|e| panic!("GET {key} after the migration: {e}"));
        assert_eq!(value, Some(i), "{key}");
    }
    for (key, n) in &counts {
        let value: Option<i64> = fresh
            .get(key)
            .await
            .unwrap_or_else(|e| panic!("GET {key}: {e}"));
        assert_eq!(value, Some(*n), "{key}");
    }
    let cluster = &cluster;
    let count_in = |port: u16| async move {
        let mut conn = cluster.server(port).connection().await;
        redis::cmd("CLUSTER")
            .arg("COUNTKEYSINSLOT")
            .arg(slot)
            .query_async::<usize>(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("COUNTKEYSINSLOT on {port}: {e}"))
    };
    assert_eq!(count_in(from.port).await, 0);
    assert_eq!(count_in(to.port).await, keys.len() + counts.len());
}

#[tokio::test]
async fn wait_replicated_leaves_every_acknowledged_write_on_the_replicas() {
    // See: issue 13 (a replica reported `master_link_status:up` but was not streaming yet,
    // and a WAIT on a connection that wrote nothing answered at once).
    let cluster = RedisCluster::start();
    let primaries = cluster.primaries();
    let tags = tag_per_primary(&primaries);
    let mut conn = cluster.cluster_connection().await;
    // Written at once after the cluster is handed out, through other connections than the
    // harness's.
    for tag in &tags {
        for i in 0..100 {
            let () = conn
                .set(tagged(tag, &format!("k{i}")), i)
                .await
                .unwrap_or_else(|e| panic!("SET on {tag}: {e}"));
        }
    }
    cluster.wait_replicated().await;
    for (tag, primary) in tags.iter().zip(&primaries) {
        let replica = cluster
            .replicas()
            .into_iter()
            .find(|r| r.primary_id.as_ref() == Some(&primary.id))
            .unwrap_or_else(|| panic!("{primary:?} has no replica"));
        let mut direct = cluster.server(replica.port).connection().await;
        let () = redis::cmd("READONLY")
            .query_async(&mut direct)
            .await
            .unwrap_or_else(|e| panic!("READONLY on {}: {e}", replica.port));
        for i in 0..100 {
            let key = tagged(tag, &format!("k{i}"));
            let value: Option<i64> = direct
                .get(&key)
                .await
                .unwrap_or_else(|e| panic!("GET {key} on replica {}: {e}", replica.port));
            assert_eq!(value, Some(i), "{key} on replica {}", replica.port);
        }
    }
}

/// A cluster connection as `user`, over TLS trusting the cluster's CA.
async fn connect_as(
    cluster: &RedisCluster,
    user: &AclUser,
) -> redis::RedisResult<redis::cluster_async::ClusterConnection> {
    let ca = std::fs::read(cluster.tls_ca_file())
        .unwrap_or_else(|e| panic!("cannot read the cluster's CA: {e}"));
    let seeds: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("rediss://{}@127.0.0.1:{}", user.userinfo(), n.port))
        .collect();
    redis::cluster::ClusterClient::builder(seeds)
        .certs(redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(ca),
        })
        .connection_timeout(std::time::Duration::from_secs(1))
        .response_timeout(std::time::Duration::from_secs(5))
        .build()?
        .get_async_connection()
        .await
}

#[tokio::test]
async fn a_tls_cluster_with_an_acl_user_forms_and_its_helpers_work_issue_13() {
    // See: issue 13 (TLS and ACL users on a cluster, as for one node)
    let user = AclUser::new("app", "s3cret");
    let mut cluster = RedisCluster::start_with(ClusterOptions {
        tls: true,
        acl: Some(user.clone()),
        ..ClusterOptions::default()
    });
    assert_cluster_ok(&cluster).await;
    assert_eq!(cluster.primaries().len(), 3);
    assert_eq!(cluster.replicas().len(), 3);
    let url = cluster.url();
    assert!(
        url.starts_with("rediss+cluster://app:s3cret@127.0.0.1:"),
        "{url}"
    );
    assert_eq!(url.matches(',').count(), 5, "{url}");
    assert!(
        cluster
            .urls()
            .iter()
            .all(|u| u.starts_with("rediss://127.0.0.1:"))
    );

    // Only TLS: the port the cluster announces does not answer a plain-text PING.
    let primaries = cluster.primaries();
    let port = primaries[0].port;
    let plain = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
        s.write_all(b"PING\r\n")?;
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        Ok::<_, std::io::Error>(buf[..n].to_vec())
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !plain.as_ref().is_ok_and(|b| b.starts_with(b"+PONG")),
        "port {port} answered plain text: {plain:?}"
    );

    // The default user needs the harness's password; the app's user may use delayq's keys
    // and nothing else.
    let stranger = AclUser::new("default", "guess");
    let refused = connect_as(&cluster, &stranger).await.err();
    assert!(
        refused.is_some(),
        "the default user logged in without its password"
    );
    let mut app = connect_as(&cluster, &user)
        .await
        .unwrap_or_else(|e| panic!("the ACL user cannot connect: {e}"));
    let tags = tag_per_primary(&primaries);
    for tag in &tags {
        let () = app
            .set(tagged(tag, "k"), tag)
            .await
            .unwrap_or_else(|e| panic!("SET as the ACL user on {tag}: {e}"));
    }
    let denied = app.set::<_, _, ()>("other:key", 1).await;
    assert!(
        denied.as_ref().is_err_and(|e| e.code() == Some("NOPERM")),
        "{denied:?}"
    );

    // The helpers go through TLS and the password: MIGRATE logs in to the destination.
    let key = tagged(&tags[0], "k");
    cluster
        .migrate_slot(key_slot(&tags[0]), &primaries[0], &primaries[1])
        .await;
    assert_eq!(cluster.node_for_key(&key).id, primaries[1].id);
    let moved: Option<String> = app
        .get(&key)
        .await
        .unwrap_or_else(|e| panic!("GET {key}: {e}"));
    assert_eq!(moved.as_deref(), Some(tags[0].as_str()));
    // A replica that takes over had synced over TLS, logged in with `masterauth`.
    cluster.wait_replicated().await;
    let failover = cluster.kill_primary(2).await;
    assert_eq!(failover.promoted.slots, failover.killed.slots);
    assert_cluster_ok(&cluster).await;
    let key = tagged(&tags[2], "k");
    let kept: Option<String> = app
        .get(&key)
        .await
        .unwrap_or_else(|e| panic!("GET {key}: {e}"));
    assert_eq!(kept.as_deref(), Some(tags[2].as_str()));
}
