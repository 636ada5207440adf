//! Redis-specific behaviour that the engine-agnostic suite cannot see: the exact key layout,
//! the idle cost of blocked reservers, persistence and function reloading across a Redis
//! restart, the safety wake covering a lost signal, ACL authentication and outages.
//!
//! The file is long because it holds every test that only Redis can have, each starting its
//! own redis-server; the cluster's own tests are in `tests/cluster/`.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::time::{Duration, Instant};

use delayq_core::{Engine, Error, JobId, JobState, Nack, NewJob, Reserve, Settle, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{Persistence, RedisOptions, RedisServer, commands_run};
use redis::AsyncCommands;

fn topic(s: &str) -> Topic {
    Topic::new(s).unwrap()
}

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

async fn engine(server: &RedisServer) -> RedisEngine {
    RedisEngine::connect(RedisConfig::new(server.url()))
        .await
        .unwrap()
}

/// Acks every delivery in one batch, then checks that acking them again finds no job for
/// each.
async fn ack_all_once(e: &RedisEngine, got: &[delayq_core::Delivery]) {
    let leases: Vec<_> = got.iter().map(|d| d.lease.clone().unwrap()).collect();
    let acks = e.ack_batch(&leases).await.unwrap();
    assert!(acks.iter().all(|r| r.is_ok()), "{acks:?}");
    let again = e.ack_batch(&leases).await.unwrap();
    assert!(
        again
            .iter()
            .all(|r| matches!(r, Err(Error::NotFound { .. }))),
        "acked twice: {:?}",
        again.first()
    );
}

/// Calls of `command` (lowercase) in `INFO commandstats`.
async fn calls_of(conn: &mut redis::aio::MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| rest.split(',').next())
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

/// A worker's cycle is one function call per topic: the settlements of the reserved topic go
/// in its reserve call, those of another topic in one settle-only call of the same pipeline.
#[tokio::test]
async fn settle_and_reserve_is_one_call_per_topic() {
    let server = RedisServer::start();
    let e = engine(&server).await;
    let (a, b) = (topic("sra"), topic("srb"));
    for name in ["1", "2", "3", "4"] {
        e.push(NewJob::new(a.clone(), name).with_id(id(name)))
            .await
            .unwrap();
    }
    e.push(NewJob::new(b.clone(), "b").with_id(id("b")))
        .await
        .unwrap();
    let mut held = e.reserve(&Reserve::new(a.clone()).max(2)).await.unwrap();
    held.extend(e.reserve(&Reserve::new(b.clone())).await.unwrap());
    let settle: Vec<Settle> = held
        .iter()
        .map(|d| Settle::Ack(d.lease.clone().unwrap()))
        .collect();
    let mut conn = server.connection().await;
    let before = calls_of(&mut conn, "fcall").await;
    let got = e
        .settle_and_reserve(&settle, &Reserve::new(a.clone()).max(10))
        .await
        .unwrap();
    let calls = calls_of(&mut conn, "fcall").await - before;
    assert_eq!(
        calls, 2,
        "one call for topic sra (settle + reserve), one for srb"
    );
    assert!(got.settled.iter().all(|r| r.is_ok()), "{:?}", got.settled);
    let ids: Vec<String> = got
        .deliveries
        .iter()
        .map(|d| d.job.id.to_string())
        .collect();
    assert_eq!(ids, ["3", "4"]);
    assert_eq!(e.stats(&b).await.unwrap().reserved, 0);

    // Settle only (max 0): one call per topic with settlements, nothing reserved.
    let settle: Vec<Settle> = got
        .deliveries
        .iter()
        .map(|d| Settle::Ack(d.lease.clone().unwrap()))
        .collect();
    let before = calls_of(&mut conn, "fcall").await;
    let got = e
        .settle_and_reserve(&settle, &Reserve::new(b.clone()).max(0))
        .await
        .unwrap();
    assert_eq!(calls_of(&mut conn, "fcall").await - before, 1);
    assert!(got.settled.iter().all(|r| r.is_ok()), "{:?}", got.settled);
    assert!(got.deliveries.is_empty());
    assert_eq!(e.stats(&a).await.unwrap().reserved, 0);
}

/// The fields of a job's record (cmsgpack), decoded by Redis's own cmsgpack.
async fn record(
    conn: &mut redis::aio::MultiplexedConnection,
    topic: &str,
    id: &str,
) -> Vec<redis::Value> {
    redis::Script::new("return { cmsgpack.unpack(redis.call('HGET', KEYS[1], ARGV[1])) }")
        .key(format!("delayq:{{{topic}}}:jobs"))
        .arg(id)
        .invoke_async(conn)
        .await
        .unwrap()
}

/// Seeds one leased job of `topic` exactly as reserve.lua leaves it: a record with
/// `attempts` ended attempts out of `max`, a deadline `ttl_ms` from now on the Redis clock
/// (negative: already expired) in leases, and `token` in its token field of jobs (the id
/// after a space).
async fn seed_leased(
    conn: &mut redis::aio::MultiplexedConnection,
    topic: &str,
    (id, token): (&str, u64),
    (attempts, max): (u32, u32),
    ttl_ms: i64,
) {
    let key = |name: &str| format!("delayq:{{{topic}}}:{name}");
    let _: () = redis::Script::new(
        r"
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local id, attempts, max = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
        redis.call('HSET', KEYS[1], id, cmsgpack.pack(1, 0, now - 5, 1, 30000, max, attempts,
          1000, 2, 3600000, 0, now - 5, '', 'seeded body'))
        redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), id)
        redis.call('HSET', KEYS[1], ' ' .. id, ARGV[2])
        redis.call('SET', KEYS[3], ARGV[2])
        ",
    )
    .key(key("jobs"))
    .key(key("leases"))
    .key(key("seq"))
    .arg(id)
    .arg(token)
    .arg(attempts)
    .arg(max)
    .arg(ttl_ms)
    .invoke_async(conn)
    .await
    .unwrap();
}

/// The keys of a topic that exist, sorted.
async fn topic_keys(conn: &mut redis::aio::MultiplexedConnection, topic: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("delayq:{{{topic}}}:*"))
        .query_async(conn)
        .await
        .unwrap();
    keys.sort();
    keys
}

/// Ack against seeded state: a wrong token and an expired lease answer LEASE_LOST, a missing
/// job NOT_FOUND, and change nothing (byte for byte); the right token removes the job from
/// jobs (its record and token field) and leases, and nothing else; an (id, token) repeated in
/// one call is acked once, the repeat finding no job.
#[tokio::test]
async fn ack_on_seeded_state() {
    let server = RedisServer::start();
    let e = engine(&server).await;
    let mut conn = server.connection().await;
    let t = topic("sack");
    seed_leased(&mut conn, "sack", ("live", 41), (0, 3), 60_000).await;
    seed_leased(&mut conn, "sack", ("gone", 42), (1, 3), -1).await;
    let lease = |id: &str, token: u64| delayq_core::Lease {
        topic: t.clone(),
        id: JobId::new(id).unwrap(),
        token: delayq_core::LeaseToken(token),
    };

    let before = server.snapshot().await;
    let got = e
        .ack_batch(&[lease("live", 40), lease("gone", 42), lease("none", 1)])
        .await
        .unwrap();
    assert!(matches!(got[0], Err(Error::LeaseLost { .. })), "{got:?}");
    assert!(matches!(got[1], Err(Error::LeaseLost { .. })), "{got:?}");
    assert!(matches!(got[2], Err(Error::NotFound { .. })), "{got:?}");
    assert_eq!(
        server.snapshot().await,
        before,
        "a refused ack changed the store"
    );

    let got = e
        .ack_batch(&[lease("live", 41), lease("live", 41)])
        .await
        .unwrap();
    assert!(got[0].is_ok(), "{got:?}");
    assert!(matches!(got[1], Err(Error::NotFound { .. })), "{got:?}");
    let mut fields: Vec<String> = conn.hkeys("delayq:{sack}:jobs").await.unwrap();
    fields.sort();
    assert_eq!(fields, [" gone", "gone"]);
    let leases: Vec<String> = conn.zrange("delayq:{sack}:leases", 0, -1).await.unwrap();
    assert_eq!(leases, ["gone"]);
    assert_eq!(
        topic_keys(&mut conn, "sack").await,
        [
            "delayq:{sack}:jobs",
            "delayq:{sack}:leases",
            "delayq:{sack}:seq",
        ]
    );
}

/// The Redis clock in µs (`TIME`).
async fn redis_time_us(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (sec, usec): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    sec * 1_000_000 + usec
}

/// settle_and_reserve against seeded state: a nack ends the attempt in the record (attempts
/// + 1, the reason) and places it by its delay; a release puts the job back in ready with its
/// record untouched (byte for byte); the reserve that follows leases without rewriting the
/// record; a stale token changes nothing.
#[tokio::test]
async fn settle_on_seeded_state() {
    let server = RedisServer::start();
    let e = engine(&server).await;
    let mut conn = server.connection().await;
    let t = topic("sset");
    seed_leased(&mut conn, "sset", ("n", 7), (1, 3), 60_000).await;
    seed_leased(&mut conn, "sset", ("r", 8), (0, 3), 60_000).await;
    seed_leased(&mut conn, "sset", ("s", 9), (0, 3), 60_000).await;
    let lease = |id: &str, token: u64| delayq_core::Lease {
        topic: t.clone(),
        id: JobId::new(id).unwrap(),
        token: delayq_core::LeaseToken(token),
    };
    let released_before: Vec<u8> = conn.hget("delayq:{sset}:jobs", "r").await.unwrap();
    let clock_before = redis_time_us(&mut conn).await;
    let settle = vec![
        Settle::Nack(
            lease("n", 7),
            Nack {
                delay: Some(Duration::from_secs(60)),
                reason: Some("boom".into()),
            },
        ),
        Settle::Release(lease("r", 8)),
        Settle::Ack(lease("s", 1)),
    ];
    let got = e
        .settle_and_reserve(&settle, &Reserve::new(t.clone()).max(5))
        .await
        .unwrap();
    let now = e.now().await.unwrap().as_millis();
    let nacked_at = match &got.settled[0] {
        Ok(delayq_core::Settled::Nacked(delayq_core::NackOutcome::Retry { ready_at })) => {
            ready_at.as_millis()
        }
        other => panic!("{other:?}"),
    };
    // The delay counts from the call's time rounded up to the millisecond (never early:
    // issue 36), at most `now`'s millisecond + 1.
    assert!(
        nacked_at > now + 59_000 && nacked_at <= now + 60_001,
        "{nacked_at} vs {now}"
    );
    assert!(got.settled[1].is_ok(), "{:?}", got.settled[1]);
    assert!(matches!(got.settled[2], Err(Error::LeaseLost { .. })));

    // The nacked job: attempt ended and its reason kept, delayed by 60 s.
    let rec = record(&mut conn, "sset", "n").await;
    assert_eq!(rec[6], redis::Value::Int(2), "attempts ended");
    assert_eq!(rec[12], redis::Value::BulkString(b"boom".to_vec()));
    let delayed: Vec<(String, f64)> = conn
        .zrange_withscores("delayq:{sset}:delayed", 0, -1)
        .await
        .unwrap();
    assert_eq!(delayed, vec![("n".to_string(), nacked_at as f64)]);

    // The released job was delivered again by the same call, with a fresh token; neither the
    // release nor the reserve rewrote its record.
    assert_eq!(got.deliveries.len(), 1);
    let d = &got.deliveries[0];
    assert_eq!(d.job.id.as_str(), "r");
    assert_eq!(d.job.attempts, 1, "the released attempt did not count");
    let token = d.lease.as_ref().unwrap().token.0;
    let seq: u64 = conn.get("delayq:{sset}:seq").await.unwrap();
    assert!(
        token > 9 && token == seq && token > clock_before,
        "a fresh token, the counter's new value, above the clock: {token} (seq {seq}, clock {clock_before} µs)"
    );
    let released_after: Vec<u8> = conn.hget("delayq:{sset}:jobs", "r").await.unwrap();
    assert_eq!(released_after, released_before);
    let tokens: Vec<Option<u64>> = redis::cmd("HMGET")
        .arg("delayq:{sset}:jobs")
        .arg(&[" n", " r", " s"])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(tokens, [None, Some(token), Some(9)], "token fields");
    let leases: Vec<String> = conn
        .zrangebyscore("delayq:{sset}:leases", "-inf", "+inf")
        .await
        .unwrap();
    let mut leases = leases;
    leases.sort();
    assert_eq!(leases, ["r", "s"]);
}

/// A job with an expiry sits in `expiring` while it waits, leaves it when leased, goes back
/// when its retry waits, and is swept out by the reserve that finds it past its expiry
/// (issue 14). A record written before expiries existed (14 fields, ending at the body)
/// still reads, leases and acks as a job without one.
#[tokio::test]
async fn expiring_jobs_are_indexed_while_they_wait_issue_14() {
    // See: issue 14
    let server = RedisServer::start();
    let e = engine(&server).await;
    let mut conn = server.connection().await;
    let t = topic("exp");
    e.push(
        NewJob::new(t.clone(), "x")
            .with_id(id("x"))
            .with_max_lateness(Duration::from_millis(300))
            .with_max_attempts(3),
    )
    .await
    .unwrap();
    let expiring = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            let v: Vec<String> = conn.zrange("delayq:{exp}:expiring", 0, -1).await.unwrap();
            v
        }
    };
    assert_eq!(expiring(&mut conn).await, ["x"]);
    let got = e.reserve(&Reserve::new(t.clone())).await.unwrap();
    assert_eq!(expiring(&mut conn).await, Vec::<String>::new(), "leased");
    let lease = got[0].lease.clone().unwrap();
    e.nack(
        &lease,
        Nack {
            delay: Some(Duration::from_millis(500)),
            reason: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(expiring(&mut conn).await, ["x"], "its retry waits");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        e.reserve(&Reserve::new(t.clone()))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(expiring(&mut conn).await, Vec::<String>::new(), "swept");
    let rec = record(&mut conn, "exp", "x").await;
    assert_eq!(rec[0], redis::Value::Int(4), "dead");
    assert_eq!(rec[12], redis::Value::BulkString(b"expired".to_vec()));

    // An old record: the push's record cut back to its first 14 fields.
    e.push(NewJob::new(t.clone(), "old body").with_id(id("old")))
        .await
        .unwrap();
    let _: () = redis::Script::new(
        "local f = { cmsgpack.unpack(redis.call('HGET', KEYS[1], ARGV[1])) }
         redis.call('HSET', KEYS[1], ARGV[1], cmsgpack.pack(unpack(f, 1, 14)))",
    )
    .key("delayq:{exp}:jobs")
    .arg("old")
    .invoke_async(&mut conn)
    .await
    .unwrap();
    assert_eq!(record(&mut conn, "exp", "old").await.len(), 14);
    let old = e.get(&t, &id("old")).await.unwrap().unwrap();
    assert_eq!((old.expires_at, &old.body[..]), (None, &b"old body"[..]));
    let got = e.reserve(&Reserve::new(t.clone())).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].job.id.as_str(), "old");
    e.ack(got[0].lease.as_ref().unwrap()).await.unwrap();
}

/// The keys and their contents after one push, one reserve and one nack are exactly those
/// the crate's documentation (`crates/redis/src/lib.rs`, "Redis key layout") describes.
#[tokio::test]
async fn key_layout_matches_architecture() {
    let server = RedisServer::start();
    let e = engine(&server).await;
    let t = topic("layout");
    let a = e
        .push(
            NewJob::new(t.clone(), "a")
                .with_id(id("a"))
                .with_delay(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    let b = e
        .push(
            NewJob::new(t.clone(), "b")
                .with_id(id("b"))
                .with_priority(7)
                .with_max_attempts(1),
        )
        .await
        .unwrap();
    let mut conn = server.connection().await;

    let delayed: Vec<(String, f64)> = conn
        .zrange_withscores("delayq:{layout}:delayed", 0, -1)
        .await
        .unwrap();
    assert_eq!(
        delayed,
        vec![("a".to_string(), a.ready_at.as_millis() as f64)]
    );
    let ready: Vec<(String, f64)> = conn
        .zrange_withscores("delayq:{layout}:ready", 0, -1)
        .await
        .unwrap();
    // Member: due time (13 digits), push order (16 digits), id; score: priority.
    assert_eq!(
        ready,
        vec![(format!("{:013}{:016}b", b.ready_at.as_millis(), 2), 7.0)]
    );
    let fields: Vec<String> = conn.hkeys("delayq:{layout}:jobs").await.unwrap();
    assert_eq!(fields.len(), 2);
    let seq: u64 = conn.get("delayq:{layout}:seq").await.unwrap();
    assert_eq!(seq, 2);

    let clock_before = redis_time_us(&mut conn).await;
    let d = e.reserve(&Reserve::new(t.clone())).await.unwrap().remove(0);
    let lease = d.lease.clone().unwrap();
    let seq: u64 = conn.get("delayq:{layout}:seq").await.unwrap();
    assert!(
        lease.token.0 == seq && lease.token.0 > clock_before,
        "the lease token is the topic counter's new value, raised above the Redis clock in µs \
         (issue 37): token {}, seq {seq}, clock {clock_before}",
        lease.token.0
    );
    let leases: Vec<(String, f64)> = conn
        .zrange_withscores("delayq:{layout}:leases", 0, -1)
        .await
        .unwrap();
    assert_eq!(
        leases,
        vec![("b".to_string(), d.job.deadline.unwrap().as_millis() as f64)]
    );
    let ready_len: u64 = conn.zcard("delayq:{layout}:ready").await.unwrap();
    assert_eq!(ready_len, 0);
    let mut fields: Vec<String> = conn.hkeys("delayq:{layout}:jobs").await.unwrap();
    fields.sort();
    assert_eq!(
        fields,
        [" b", "a", "b"],
        "a record each, and b's token field"
    );
    let token: u64 = conn.hget("delayq:{layout}:jobs", " b").await.unwrap();
    assert_eq!(token, lease.token.0, "the lease token, out of the record");
    // The reserve did not rewrite the record: its attempts count ended attempts (none yet).
    let rec = record(&mut conn, "layout", "b").await;
    assert_eq!(rec.len(), 16, "{rec:?}");
    assert_eq!(
        (&rec[14], &rec[15]),
        (&redis::Value::Int(0), &redis::Value::Int(0)),
        "no expiry, dead on expiry"
    );
    assert_eq!(rec[6], redis::Value::Int(0), "attempts ended");
    assert_eq!(d.job.attempts, 1, "the delivery counts itself");

    e.nack(&lease, Nack::default()).await.unwrap();
    let dead: Vec<(String, f64)> = conn
        .zrange_withscores("delayq:{layout}:dead", 0, -1)
        .await
        .unwrap();
    let died = e
        .get(&t, &id("b"))
        .await
        .unwrap()
        .unwrap()
        .deadline
        .unwrap();
    assert_eq!(dead, vec![("b".to_string(), died.as_millis() as f64)]);

    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "delayq:topics",
            "delayq:{layout}:dead",
            "delayq:{layout}:delayed",
            "delayq:{layout}:jobs",
            "delayq:{layout}:seq",
            "delayq:{layout}:wake",
        ]
    );
    let topics: Vec<String> = conn.smembers("delayq:topics").await.unwrap();
    assert_eq!(topics, vec!["layout"]);

    // The settings: one field per setting set; a purge keeps them and counts itself.
    let settings = delayq_core::TopicConfig {
        ttr: Some(Duration::from_secs(45)),
        backoff: Some(delayq_core::Backoff::fixed(Duration::from_secs(2))),
        max_body: Some(100),
        ..Default::default()
    };
    e.set_topic_config(&t, &settings).await.unwrap();
    let config: std::collections::BTreeMap<String, String> =
        conn.hgetall("delayq:{layout}:config").await.unwrap();
    let expected = [
        ("bo_base", "2000"),
        ("bo_factor", "1"),
        ("bo_jitter", "0"),
        ("bo_max", "2000"),
        ("max_body", "100"),
        ("ttr", "45000"),
    ];
    let as_map = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(config, as_map(&expected));

    // A retention: an acked job's record stays in jobs, its id goes into done at its ack.
    let keep = delayq_core::TopicConfig {
        retention: Some(delayq_core::Retention {
            max_jobs: 10,
            max_age: Duration::from_secs(60),
        }),
        ..settings
    };
    e.set_topic_config(&t, &keep).await.unwrap();
    e.push(NewJob::new(t.clone(), "c").with_id(id("c")))
        .await
        .unwrap();
    let d = e.reserve(&Reserve::new(t.clone())).await.unwrap().remove(0);
    e.ack(d.lease.as_ref().unwrap()).await.unwrap();
    let acked = e
        .get(&t, &id("c"))
        .await
        .unwrap()
        .unwrap()
        .deadline
        .unwrap();
    let done: Vec<(String, f64)> = conn
        .zrange_withscores("delayq:{layout}:done", 0, -1)
        .await
        .unwrap();
    assert_eq!(done, vec![("c".to_string(), acked.as_millis() as f64)]);
    let fields: Vec<String> = conn.hkeys("delayq:{layout}:jobs").await.unwrap();
    assert!(fields.contains(&"c".to_string()) && !fields.contains(&" c".to_string()));
    let config: std::collections::BTreeMap<String, String> =
        conn.hgetall("delayq:{layout}:config").await.unwrap();
    assert_eq!(
        (config.get("done_max"), config.get("done_age")),
        (Some(&"10".to_string()), Some(&"60000".to_string()))
    );
    e.set_topic_config(&t, &settings).await.unwrap();
    let done: u64 = conn.zcard("delayq:{layout}:done").await.unwrap();
    assert_eq!(done, 0, "no retention, no done job");
    e.purge(&t).await.unwrap();
    let config: std::collections::BTreeMap<String, String> =
        conn.hgetall("delayq:{layout}:config").await.unwrap();
    let mut after = expected.to_vec();
    after.push(("purges", "1"));
    assert_eq!(config, as_map(&after));
    let topics: Vec<String> = conn.smembers("delayq:topics").await.unwrap();
    assert!(topics.is_empty(), "{topics:?}");
}

/// 20 reservers on empty topics, each reserving again as soon as its 5 s long-poll ends (as a
/// worker does), cost fewer than 1 Redis command per second each over 12 s, measured with
/// INFO commandstats, which also counts the calls made inside scripts. One reserve is one
/// function call of three commands (FCALL, EXISTS, TIME) on its first pass and nothing more until
/// its wait ends: a reserve that looked again when its wait ended would cost twice that and
/// fail here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_reservers_cost_under_one_command_per_second() {
    let server = RedisServer::start();
    let engines = [engine(&server).await, engine(&server).await];
    let mut tasks = Vec::new();
    for i in 0..20 {
        let e = engines[i % 2].clone();
        let t = topic(&format!("idle-{i}"));
        tasks.push(tokio::spawn(async move {
            loop {
                let got = e
                    .reserve(&Reserve::new(t.clone()).wait(Duration::from_secs(5)))
                    .await?;
                if !got.is_empty() {
                    return Ok::<_, delayq_core::Error>(got.len());
                }
            }
        }));
    }
    let mut conn = server.connection().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = commands_run(&mut conn).await;
    let window = Duration::from_secs(12);
    tokio::time::sleep(window).await;
    let after = commands_run(&mut conn).await;
    // The INFO call that read `before` is counted in `after`.
    let commands = after - before - 1;
    let per_reserver_per_second = commands as f64 / 20.0 / window.as_secs_f64();
    println!(
        "idle cost: {commands} commands in {window:?} for 20 looping reservers = {per_reserver_per_second:.3} per reserver per second"
    );
    assert!(
        commands > 0,
        "no command at all: the reservers did not reserve again"
    );
    assert!(per_reserver_per_second < 1.0, "{per_reserver_per_second}");
    for t in &tasks {
        assert!(!t.is_finished(), "a reserver returned: {t:?}");
    }
    for t in tasks {
        t.abort();
    }
}

/// With AOF fsync always, jobs and leases survive a kill -9 of Redis; the engine reconnects
/// and its functions are still there (Redis persists them with the data).
#[tokio::test]
async fn jobs_survive_a_redis_crash_with_aof() {
    let mut server = RedisServer::start_with(RedisOptions {
        persistence: Persistence::AofAlways,
        ..RedisOptions::default()
    });
    let e = engine(&server).await;
    let t = topic("aof");
    e.push(
        NewJob::new(t.clone(), "later")
            .with_id(id("later"))
            .with_delay(Duration::from_secs(3600)),
    )
    .await
    .unwrap();
    e.push(
        NewJob::new(t.clone(), "now")
            .with_id(id("now"))
            .with_ttr(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    let d = e.reserve(&Reserve::new(t.clone())).await.unwrap().remove(0);
    let lease = d.lease.unwrap();

    server.kill();
    let down = e.push(NewJob::new(t.clone(), "x")).await;
    assert!(
        matches!(down, Err(ref err) if err.is_retryable()),
        "{down:?}"
    );
    server.restart();

    // The connection comes back on its own; the first calls may still see it down.
    let start = Instant::now();
    let pushed = loop {
        match e
            .push_batch(vec![
                NewJob::new(t.clone(), "after").with_id(id("after")),
                NewJob::new(topic("aof2"), "y"),
            ])
            .await
        {
            Ok(p) => break p,
            Err(err) if err.is_retryable() && start.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => panic!("push after restart: {err}"),
        }
    };
    assert!(
        pushed.iter().all(|p| p.created),
        "pipelined calls work after the restart"
    );
    assert_eq!(
        e.get(&t, &id("later")).await.unwrap().map(|j| j.state),
        Some(JobState::Delayed)
    );
    assert_eq!(
        e.get(&t, &id("now")).await.unwrap().map(|j| j.state),
        Some(JobState::Reserved)
    );
    let acks = e.ack_batch(&[lease]).await.unwrap();
    assert!(acks[0].is_ok(), "the lease survived the crash: {acks:?}");
}

/// `FUNCTION FLUSH` (as after a restart without persistence, or a failover to a replica
/// without the library): the next single call and the next pipeline load the library again
/// and resend just what came back "function not found", without running anything twice.
#[tokio::test]
async fn calls_and_pipelines_recover_from_function_flush() {
    let server = RedisServer::start();
    let e = engine(&server).await;
    let (a, b) = (topic("fa"), topic("fb"));
    let mut conn = server.connection().await;
    let flush = |mut conn: redis::aio::MultiplexedConnection| async move {
        let _: () = redis::cmd("FUNCTION")
            .arg("FLUSH")
            .query_async(&mut conn)
            .await
            .unwrap();
    };
    let libraries = |mut conn: redis::aio::MultiplexedConnection| async move {
        let list: Vec<Vec<redis::Value>> = redis::cmd("FUNCTION")
            .arg("LIST")
            .query_async(&mut conn)
            .await
            .unwrap();
        list.len()
    };
    assert_eq!(libraries(conn.clone()).await, 1, "loaded at connect");

    flush(conn.clone()).await;
    assert_eq!(libraries(conn.clone()).await, 0);
    e.push(NewJob::new(a.clone(), "1").with_id(id("1")))
        .await
        .unwrap();
    assert_eq!(
        libraries(conn.clone()).await,
        1,
        "reloaded by a single call"
    );

    flush(conn.clone()).await;
    let pushed = e
        .push_batch(vec![
            NewJob::new(a.clone(), "2").with_id(id("2")),
            NewJob::new(b.clone(), "3").with_id(id("3")),
        ])
        .await
        .unwrap();
    assert!(pushed.iter().all(|p| p.created));
    flush(conn.clone()).await;
    let got = e
        .reserve(&Reserve::topics([a.clone(), b.clone()]).max(3))
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
    flush(conn.clone()).await;
    ack_all_once(&e, &got).await;
    // The counter ends at the last token fa handed out, and fa's two leases took one
    // call's two consecutive tokens: no reserve ran twice.
    let seq: u64 = conn.get("delayq:{fa}:seq").await.unwrap();
    let mut fa: Vec<u64> = got
        .iter()
        .filter(|d| d.job.topic == a)
        .map(|d| d.lease.as_ref().unwrap().token.0)
        .collect();
    fa.sort_unstable();
    assert_eq!(fa.len(), 2, "{got:?}");
    assert_eq!((fa[1], fa[1] - fa[0]), (seq, 1), "nothing ran twice");
}

/// A job that becomes ready without any wake-up signal (as when the signal was lost with a
/// crashed process) still reaches a blocked reserver, through the safety wake.
#[tokio::test]
async fn a_lost_wake_signal_is_covered_by_the_safety_wake() {
    let server = RedisServer::start();
    let config = RedisConfig::new(server.url()).with_safety_wake(Duration::from_millis(500));
    let e = RedisEngine::connect(config).await.unwrap();
    let t = topic("lost");
    let waiter = {
        let (e, t) = (e.clone(), t.clone());
        tokio::spawn(async move {
            e.reserve(&Reserve::new(t).wait(Duration::from_secs(5)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Seed a ready job exactly as push.lua stores it, but without touching the wake key.
    let mut conn = server.connection().await;
    let seeded = Instant::now();
    let _: () = redis::Script::new(
        r"
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        redis.call('HSET', KEYS[1], 'seeded',
          cmsgpack.pack(1, 0, now, 1, 30000, 3, 0, 1000, 2, 3600000, 100, now, '', 'body'))
        redis.call('ZADD', KEYS[2], 0, string.format('%013d%016d', now, 1) .. 'seeded')
        ",
    )
    .key("delayq:{lost}:jobs")
    .key("delayq:{lost}:ready")
    .invoke_async(&mut conn)
    .await
    .unwrap();
    let got = waiter.await.unwrap().unwrap();
    let took = seeded.elapsed();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].job.id, id("seeded"));
    assert!(
        took < Duration::from_secs(2),
        "the safety wake took {took:?}"
    );
}

/// The URL carries an ACL user and password; wrong credentials are a configuration error.
#[tokio::test]
async fn authenticates_with_an_acl_user_from_the_url() {
    let server = RedisServer::start();
    let mut conn = server.connection().await;
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "app", "on", ">s3cret", "~delayq:*", "+@all"])
        .query_async(&mut conn)
        .await
        .unwrap();
    let url = format!("redis://app:s3cret@127.0.0.1:{}", server.port());
    let e = RedisEngine::connect(RedisConfig::new(url)).await.unwrap();
    let t = topic("acl");
    e.push(NewJob::new(t.clone(), "x")).await.unwrap();
    assert_eq!(e.reserve(&Reserve::new(t)).await.unwrap().len(), 1);

    let bad = format!("redis://app:wrong@127.0.0.1:{}", server.port());
    let r = RedisEngine::connect(RedisConfig::new(bad)).await;
    assert!(
        matches!(r, Err(Error::InvalidConfig { ref reason }) if reason.contains("password")),
        "{:?}",
        r.err()
    );
}

/// A bad URL is a configuration error; a Redis that is not there is unavailable.
#[tokio::test]
async fn bad_url_and_unreachable_redis() {
    let r = RedisEngine::connect(RedisConfig::new("http://localhost")).await;
    assert!(
        matches!(r, Err(Error::InvalidConfig { .. })),
        "{:?}",
        r.err()
    );
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut cfg = RedisConfig::new(format!("redis://127.0.0.1:{port}"));
    cfg.connect_timeout = Duration::from_millis(500);
    let start = Instant::now();
    let r = RedisEngine::connect(cfg).await;
    assert!(matches!(r, Err(Error::Unavailable { .. })), "{:?}", r.err());
    assert!(start.elapsed() < Duration::from_secs(10));
    let r = RedisEngine::connect(RedisConfig::new("redis://127.0.0.1:1").with_prefix("bad{prefix"))
        .await;
    assert!(
        matches!(r, Err(Error::InvalidConfig { .. })),
        "{:?}",
        r.err()
    );
}

/// `rediss://` with the CA that signed the server's certificate: the engine works over TLS;
/// without trusting that CA, connecting fails.
#[tokio::test]
async fn connects_over_tls() {
    let server = RedisServer::start_with(RedisOptions {
        tls: true,
        ..RedisOptions::default()
    });
    let config = RedisConfig::new(server.tls_url()).with_tls_ca_file(server.tls_ca_file());
    let e = RedisEngine::connect(config).await.unwrap();
    let t = topic("tls");
    e.push(NewJob::new(t.clone(), "over tls")).await.unwrap();
    let got = e
        .reserve(&Reserve::new(t).wait(Duration::from_secs(2)))
        .await
        .unwrap();
    assert_eq!(got[0].job.body.as_ref(), b"over tls");

    let untrusted = RedisEngine::connect(RedisConfig::new(server.tls_url())).await;
    assert!(
        untrusted.is_err(),
        "a certificate from an unknown CA was accepted"
    );
    let mixed =
        RedisEngine::connect(RedisConfig::new(server.url()).with_tls_ca_file(server.tls_ca_file()))
            .await;
    assert!(
        matches!(mixed, Err(Error::InvalidConfig { .. })),
        "{:?}",
        mixed.err()
    );
}

/// The functions do their per-job work in multi-member calls (HMGET, ZADD, HSET, ZREM, HDEL),
/// cut into calls of at most 1000 arguments: a tick that promotes 2,500 due jobs at once
/// (tick_batch 5000), a reserve of 1000 and an ack of 1000 keep the order, the counts and
/// the leases exact.
#[tokio::test]
async fn large_batches_are_split_and_keep_their_order() {
    let server = RedisServer::start();
    let mut config = RedisConfig::new(server.url());
    config.tick_batch = 5000;
    let e = RedisEngine::connect(config).await.unwrap();
    let t = topic("large");
    for chunk in (0..2500usize).collect::<Vec<_>>().chunks(1000) {
        let jobs = chunk
            .iter()
            .map(|&i| {
                NewJob::new(t.clone(), format!("body {i}"))
                    .with_id(id(&format!("j{i:04}")))
                    .with_priority(u32::try_from(i % 3).unwrap())
                    .with_delay(Duration::from_millis(200))
            })
            .collect();
        let pushed = e.push_batch(jobs).await.unwrap();
        assert!(pushed.iter().all(|p| p.created));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = e.reserve(&Reserve::new(t.clone()).max(1000)).await.unwrap();
    assert_eq!(got.len(), 1000);
    // Priority 0 first (834 jobs: i = 0, 3, ..., 2499), then priority 1 in push order.
    let expected: Vec<String> = (0..2500usize)
        .filter(|i| i % 3 == 0)
        .chain((0..2500usize).filter(|i| i % 3 == 1))
        .take(1000)
        .map(|i| format!("j{i:04}"))
        .collect();
    let ids: Vec<String> = got.iter().map(|d| d.job.id.to_string()).collect();
    assert_eq!(ids, expected);
    let mut tokens: Vec<_> = got.iter().map(|d| d.lease.clone().unwrap().token).collect();
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), 1000, "every lease token is distinct");
    let stats = e.stats(&t).await.unwrap();
    assert_eq!(
        (stats.delayed, stats.ready, stats.reserved),
        (0, 1500, 1000)
    );

    ack_all_once(&e, &got).await;
    let stats = e.stats(&t).await.unwrap();
    assert_eq!((stats.ready, stats.reserved), (1500, 0));
}

/// A Redis URL whose database index the server does not have fails at once as a
/// configuration error that says so, instead of being retried as an outage.
// See: issue 36
#[tokio::test]
async fn a_database_index_out_of_range_is_a_configuration_error_at_once_issue_36() {
    let server = RedisServer::start();
    let started = Instant::now();
    let r = RedisEngine::connect(RedisConfig::new(format!("{}/99", server.url()))).await;
    match r {
        Err(Error::InvalidConfig { reason }) => {
            assert!(
                reason.contains("database index is out of range"),
                "{reason}"
            );
        }
        Err(e) => panic!("not a configuration error: {e}"),
        Ok(_) => panic!("database 99 was accepted"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
