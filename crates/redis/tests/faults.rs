//! Redis faults (issue 17, item 3), each test on a `redis-server` of its own: a slow Redis
//! (`DEBUG SLEEP`, `CLIENT PAUSE WRITE` and `ALL`), a Redis at `maxmemory` with
//! `noeviction`, and connections killed in the middle of many calls (`CLIENT KILL`).
//!
//! What each checks, from the store's state against the answers: a call answers within the
//! engine's response timeout with a typed error (`Unavailable` for a slow or cut Redis,
//! `Full` at maxmemory); nothing is half applied (a push that timed out exists whole or not
//! at all, a batch all or nothing, a refused push changes no key); a retry by id yields
//! exactly one job; a retried ack answers ok, `not_found` or `lease_lost`, and a job comes
//! again only after a lease expiry the engine counted; and the same engine handle recovers by
//! itself, its waiting reservers included. Bounded: 16 s one test at a time (the killing test
//! 8 s), 11 s as `cargo test` runs them.

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq_core::{Delivery, Engine, Error, JobId, JobState, Lease, NewJob, Reserve, Topic};
use delayq_redis::{RedisConfig, RedisEngine};
use delayq_testkit::{RedisOptions, RedisServer};

/// The engine's response timeout in the tests of a slow Redis.
const TIMEOUT: Duration = Duration::from_millis(300);

fn topic(s: &str) -> Topic {
    Topic::new(s).unwrap()
}

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

fn job(t: &Topic, name: &str, body: &[u8]) -> NewJob {
    NewJob::new(t.clone(), body.to_vec()).with_id(id(name))
}

/// A server that takes `DEBUG` (off by default since Redis 7) and never evicts.
fn server() -> RedisServer {
    RedisServer::start_with(RedisOptions {
        extra_args: [
            "--enable-debug-command",
            "yes",
            "--maxmemory-policy",
            "noeviction",
        ]
        .map(String::from)
        .to_vec(),
        ..RedisOptions::default()
    })
}

async fn engine(server: &RedisServer, timeout: Duration) -> RedisEngine {
    let mut config = RedisConfig::new(server.url());
    config.response_timeout = timeout;
    RedisEngine::connect(config).await.unwrap()
}

async fn admin(server: &RedisServer, args: &[&str]) -> redis::Value {
    let mut conn = server.connection().await;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// `INFO memory`'s `used_memory`.
async fn used_memory(server: &RedisServer) -> u64 {
    let info = match admin(server, &["INFO", "memory"]).await {
        redis::Value::VerbatimString { text, .. } => text,
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        other => panic!("INFO answered {other:?}"),
    };
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no used_memory in {info}"))
}

/// Asserts that `r` failed with `Unavailable` within the response timeout (plus slack for a
/// loaded machine), well before the stall it met ended.
fn timed_out<T: std::fmt::Debug>(what: &str, r: Result<T, Error>, took: Duration) {
    assert!(
        matches!(r, Err(Error::Unavailable { .. })),
        "{what}: expected Unavailable, got {r:?}"
    );
    assert!(
        took < TIMEOUT * 3,
        "{what} answered after {took:?}, not within the {TIMEOUT:?} response timeout"
    );
}

/// Runs `f`, answering its result and how long it took.
async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let r = f.await;
    (r, start.elapsed())
}

/// The ids of a topic's jobs in `state`, page by page.
async fn ids_in(e: &RedisEngine, t: &Topic, state: JobState) -> Vec<String> {
    let (mut ids, mut after) = (Vec::new(), None);
    loop {
        let page = e.list(t, state, 500, after.as_ref()).await.unwrap();
        ids.extend(page.jobs.into_iter().map(|j| j.id.to_string()));
        match page.next {
            Some(next) => after = Some(next),
            None => return ids,
        }
    }
}

/// A reserve on an empty topic that waits through a stall, started now.
fn waiter(e: &RedisEngine, t: &Topic) -> tokio::task::JoinHandle<Vec<Delivery>> {
    let (e, t) = (e.clone(), t.clone());
    tokio::spawn(async move {
        e.reserve(&Reserve::new(t).wait(Duration::from_secs(8)))
            .await
            .unwrap()
    })
}

/// After a stall: a push and a batch that timed out exist whole or not at all, and their
/// retries (by id) leave exactly one job each.
async fn retried_pushes_leave_one_job_each(
    e: &RedisEngine,
    t: &Topic,
    one: &str,
    batch: &[NewJob],
) {
    let body = b"one".to_vec();
    let stored = e.get(t, &id(one)).await.unwrap();
    if let Some(j) = &stored {
        assert_eq!((j.body.as_ref(), j.state), (&body[..], JobState::Ready));
    }
    let again = e.push(job(t, one, &body)).await.unwrap();
    assert_eq!(again.created, stored.is_none(), "retry of {one}");
    let found = futures_util::future::join_all(batch.iter().map(|j| e.get(t, &j.id))).await;
    let there = found.iter().filter(|r| matches!(r, Ok(Some(_)))).count();
    assert!(
        there == 0 || there == batch.len(),
        "a batch that timed out is half there: {there} of {}",
        batch.len()
    );
    let again = e.push_batch(batch.to_vec()).await.unwrap();
    assert!(again.iter().all(|p| p.created == (there == 0)), "{again:?}");
    let mut ready = ids_in(e, t, JobState::Ready).await;
    let n = ready.len();
    ready.sort();
    ready.dedup();
    assert_eq!(n, ready.len(), "a job is listed twice");
    assert!(ready.contains(&one.to_string()));
    assert!(batch.iter().all(|j| ready.contains(&j.id.to_string())));
}

/// How a test stalls Redis for [`STALL`].
#[derive(Clone, Copy, Debug)]
enum Stall {
    /// `DEBUG SLEEP`: Redis runs nothing.
    Sleep,
    /// `CLIENT PAUSE <ms> <mode>`: Redis holds the clients' commands (all, or writes).
    Pause(&'static str),
}

/// How long a stall lasts.
const STALL: Duration = Duration::from_secs(2);

impl Stall {
    /// Starts the stall on a connection of the test's own; answers when it began.
    async fn start(self, s: &RedisServer) -> Instant {
        let ms = STALL.as_millis().to_string();
        match self {
            Stall::Sleep => {
                // The test's connection gives up on the reply (its own response timeout):
                // Redis sleeps all the same, and the test waits the stall out.
                let mut conn = s.connection().await;
                let secs = STALL.as_secs().to_string();
                let began = Instant::now();
                tokio::spawn(async move {
                    let _ = redis::cmd("DEBUG")
                        .arg("SLEEP")
                        .arg(secs)
                        .query_async::<()>(&mut conn)
                        .await;
                });
                tokio::time::sleep(Duration::from_millis(200)).await;
                began
            }
            Stall::Pause(mode) => {
                let began = Instant::now();
                admin(s, &["CLIENT", "PAUSE", &ms, mode]).await;
                began
            }
        }
    }
}

/// Redis stalls while a job is leased and a reserve waits on an empty topic: a push, a batch,
/// an ack and a stats answer `Unavailable` within the response timeout. Once the stall ends
/// the same handle answers (no reconnect by the test): the ack retried answers ok or
/// `not_found` and the job is gone, the pushes that timed out are there whole or not at all
/// and their retries by id leave one job each, and the waiting reserve gets a job another
/// process pushes after the stall.
async fn calls_through_a_stall(stall: Stall) {
    let s = server();
    let e = engine(&s, TIMEOUT).await;
    let other = engine(&s, Duration::from_secs(5)).await;
    let (t, w) = (topic("stalled"), topic("stalled_wait"));
    e.push(job(&t, "a", b"a")).await.unwrap();
    let d = e.reserve(&Reserve::new(t.clone())).await.unwrap();
    let lease = d[0].lease.clone().unwrap();
    let waiting = waiter(&e, &w);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let began = stall.start(&s).await;
    let (r, took) = timed(e.push(job(&t, "one", b"one"))).await;
    timed_out(&format!("push ({stall:?})"), r, took);
    let batch: Vec<_> = (0..10)
        .map(|i| job(&t, &format!("b{i}"), b"batch"))
        .collect();
    let (r, took) = timed(e.push_batch(batch.clone())).await;
    timed_out(&format!("push_batch ({stall:?})"), r, took);
    let (r, took) = timed(e.ack(&lease)).await;
    timed_out(&format!("ack ({stall:?})"), r, took);
    let (r, took) = timed(e.stats(&t)).await;
    timed_out(&format!("stats ({stall:?})"), r, took);
    assert!(
        began.elapsed() < STALL,
        "the stall ended before the calls did"
    );
    tokio::time::sleep_until((began + STALL + Duration::from_millis(100)).into()).await;

    let ack = e.ack(&lease).await;
    assert!(
        matches!(ack, Ok(()) | Err(Error::NotFound { .. })),
        "a retried ack ({stall:?}): {ack:?}"
    );
    assert!(
        e.get(&t, &id("a")).await.unwrap().is_none(),
        "the acked job is gone"
    );
    retried_pushes_leave_one_job_each(&e, &t, "one", &batch).await;
    assert_eq!(e.stats(&t).await.unwrap().ready, 11, "{stall:?}");

    other.push(job(&w, "late", b"late")).await.unwrap();
    let got = waiting.await.unwrap();
    assert_eq!(got.len(), 1, "the waiting reserve got nothing ({stall:?})");
    assert_eq!(got[0].job.id.as_str(), "late");
}

/// `DEBUG SLEEP` for 2 s: see [`calls_through_a_stall`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_redis_times_out_calls_and_the_engine_recovers_by_itself() {
    calls_through_a_stall(Stall::Sleep).await;
}

/// `CLIENT PAUSE 2000 WRITE`: see [`calls_through_a_stall`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_pausing_writes_times_out_calls_and_the_engine_recovers_by_itself() {
    calls_through_a_stall(Stall::Pause("WRITE")).await;
}

/// `CLIENT PAUSE 2000 ALL` (under which `CLIENT UNPAUSE` would be held too: the pause runs
/// out): see [`calls_through_a_stall`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_times_out_calls_and_the_engine_recovers_by_itself() {
    calls_through_a_stall(Stall::Pause("ALL")).await;
}

/// Redis at `maxmemory` with `noeviction`: pushes answer `Full` (saying what to do) and
/// change no key, single or batch; reads still answer; reserve, ack, delete and purge still
/// work, so a queue drains; once memory is freed, pushes succeed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_maxmemory_pushes_are_refused_whole_and_the_queue_still_drains() {
    let s = server();
    let e = engine(&s, Duration::from_secs(5)).await;
    let (work, filler) = (topic("work"), topic("filler"));
    let small: Vec<_> = (0..20)
        .map(|i| job(&work, &format!("w{i}"), &[1u8; 1024]))
        .collect();
    e.push_batch(small).await.unwrap();
    let limit = used_memory(&s).await + (2 << 20);
    admin(&s, &["CONFIG", "SET", "maxmemory", &limit.to_string()]).await;

    let big = vec![7u8; 32 * 1024];
    let mut stored = 0;
    let full = loop {
        match e.push(job(&filler, &format!("f{stored}"), &big)).await {
            Ok(_) => stored += 1,
            Err(err) => break err,
        }
        assert!(stored < 200, "maxmemory {limit} was never reached");
    };
    assert!(matches!(full, Error::Full { .. }), "{full:?}");
    let text = full.to_string();
    assert!(
        text.contains("maxmemory") && text.contains("nothing was written"),
        "{text}"
    );
    assert!(stored > 10, "only {stored} pushes fitted");

    // Refused whole: a new job, an existing one, a batch; no key changed.
    let before = s.snapshot().await;
    let stats = e.stats(&filler).await.unwrap();
    for r in [
        e.push(job(&filler, "new", &big)).await.map(|_| ()),
        e.push(job(&filler, "f0", &big)).await.map(|_| ()),
        e.push_batch((0..5).map(|i| job(&work, &format!("n{i}"), b"x")).collect())
            .await
            .map(|_| ()),
    ] {
        assert!(matches!(r, Err(Error::Full { .. })), "{r:?}");
    }
    assert!(s.snapshot().await == before, "a refused push changed a key");
    let after = e.stats(&filler).await.unwrap();
    assert_eq!((after.ready, after.delayed), (stats.ready, stats.delayed));

    // Reads answer, and the queue drains: reserve, ack, nack, delete, purge.
    assert!(e.get(&work, &id("w0")).await.unwrap().is_some());
    assert_eq!(ids_in(&e, &filler, JobState::Ready).await.len(), stored);
    let got = e
        .reserve(&Reserve::new(work.clone()).max(10))
        .await
        .unwrap();
    assert_eq!(got.len(), 10);
    let leases: Vec<Lease> = got.iter().map(|d| d.lease.clone().unwrap()).collect();
    let acks = e.ack_batch(&leases[1..]).await.unwrap();
    assert!(acks.iter().all(Result::is_ok), "{acks:?}");
    e.nack(&leases[0], delayq_core::Nack::default())
        .await
        .unwrap();
    assert!(e.delete(&filler, &id("f0")).await.unwrap());
    let st = e.stats(&work).await.unwrap();
    assert_eq!((st.ready + st.delayed, st.reserved), (11, 0), "{st:?}");
    assert_eq!(e.purge(&filler).await.unwrap(), stored as u64 - 1);

    // Memory freed: pushes succeed again, single and batch.
    e.push(job(&work, "after", b"x")).await.unwrap();
    let batch = e
        .push_batch((0..5).map(|i| job(&work, &format!("n{i}"), b"x")).collect())
        .await
        .unwrap();
    assert!(batch.iter().all(|p| p.created));
    let st = e.stats(&work).await.unwrap();
    assert_eq!(st.ready + st.delayed, 17, "{st:?}");
}

/// The push that takes Redis over `maxmemory` is stored, and Redis then refuses the topic
/// registry's `SADD` that follows it (`OOM`): the push must not answer `Full` ("nothing was
/// written"). It answers `Unavailable`; its retry, once memory is freed, finds the job and
/// lists the topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_stored_as_redis_fills_is_not_answered_full() {
    let s = server();
    let e = engine(&s, Duration::from_secs(5)).await;
    let body = vec![3u8; 200 * 1024];
    // The push must pass Redis's memory check and its SADD fail it: the limit lies between
    // the memory in use before the push and after it. Where exactly depends on Redis's
    // buffers, so the limit climbs in 50 KiB steps, a new topic each time.
    let mut outcomes = Vec::new();
    for step in 1..=12u64 {
        let t = topic(&format!("edge{step}"));
        admin(&s, &["CONFIG", "SET", "maxmemory", "0"]).await;
        let limit = used_memory(&s).await + step * 50 * 1024;
        admin(&s, &["CONFIG", "SET", "maxmemory", &limit.to_string()]).await;
        let r = e.push(job(&t, "x", &body)).await;
        admin(&s, &["CONFIG", "SET", "maxmemory", "0"]).await;
        let found = e.get(&t, &id("x")).await.unwrap();
        match r {
            Err(Error::Full { .. }) => {
                assert!(found.is_none(), "answered Full, yet stored");
                outcomes.push("full");
            }
            Ok(_) => {
                assert!(found.is_some());
                outcomes.push("ok");
            }
            Err(Error::Unavailable { message, .. }) => {
                assert!(found.is_some(), "{message}");
                assert!(message.contains("registry"), "{message}");
                let again = e.push(job(&t, "x", &body)).await.unwrap();
                assert!(!again.created);
                assert!(
                    e.topics().await.unwrap().contains(&t),
                    "the retry lists the topic"
                );
                return;
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    panic!("no push passed the memory check with its SADD refused: {outcomes:?}");
}

/// What the clients of the killing test saw.
#[derive(Default)]
struct Seen {
    /// Every delivery: (id, attempt, when its reserve was sent, when it answered).
    deliveries: Vec<(String, u32, Instant, Instant)>,
    /// Acks answered ok, per id.
    acked: BTreeMap<String, u32>,
    /// Calls answered `Unavailable` (a cut connection), by operation.
    cut: BTreeMap<&'static str, u32>,
    /// Retried acks that found the first had landed (`not_found`) or the lease gone.
    acks_landed_before: u32,
    /// Pushes whose retry found the first had landed (created false).
    pushes_landed_before: u32,
}

impl Seen {
    fn cut(&mut self, op: &'static str) {
        *self.cut.entry(op).or_default() += 1;
    }
}

/// Retries `f` while it answers a retryable error (a connection cut again), at most 100
/// times.
async fn retry<T, F, Fut>(mut f: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    for _ in 0..100 {
        match f().await {
            Err(e) if e.is_retryable() => tokio::time::sleep(Duration::from_millis(20)).await,
            r => return r,
        }
    }
    f().await
}

/// Pushes `n` jobs to `t` one by one and in batches of 10, retrying by id what a cut
/// connection answered; answers the ids.
async fn produce(
    e: RedisEngine,
    t: Topic,
    who: usize,
    n: usize,
    seen: Arc<Mutex<Seen>>,
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut i = 0;
    while i < n {
        let jobs: Vec<NewJob> = (i..(i + if i % 20 == 0 { 10 } else { 1 }).min(n))
            .map(|k| job(&t, &format!("p{who}-{k}"), b"p"))
            .collect();
        i += jobs.len();
        ids.extend(jobs.iter().map(|j| j.id.to_string()));
        // Paced, so that pushes are in flight through the whole killing.
        tokio::time::sleep(Duration::from_millis(15)).await;
        match e.push_batch(jobs.clone()).await {
            Ok(p) => assert!(p.iter().all(|p| p.created), "{p:?}"),
            Err(err) => {
                assert!(err.is_retryable(), "{err:?}");
                seen.lock().unwrap().cut("push");
                let again = retry(|| e.push_batch(jobs.clone())).await.unwrap();
                let before = again.iter().filter(|p| !p.created).count();
                assert!(
                    before == 0 || before == again.len(),
                    "a batch cut mid-call half landed: {again:?}"
                );
                seen.lock().unwrap().pushes_landed_before += u32::from(before > 0);
            }
        }
    }
    ids
}

/// Reserves and acks from `t` until `stop`, retrying what a cut connection answered.
async fn consume(e: RedisEngine, t: Topic, stop: Instant, seen: Arc<Mutex<Seen>>) {
    while Instant::now() < stop {
        let sent = Instant::now();
        let got = match e
            .reserve(
                &Reserve::new(t.clone())
                    .max(10)
                    .wait(Duration::from_millis(200)),
            )
            .await
        {
            Ok(got) => got,
            Err(err) => {
                // The leases of a reserve whose answer was cut run out: the jobs come again.
                assert!(err.is_retryable(), "{err:?}");
                seen.lock().unwrap().cut("reserve");
                continue;
            }
        };
        let answered = Instant::now();
        let leases: Vec<Lease> = got.iter().map(|d| d.lease.clone().unwrap()).collect();
        {
            let mut s = seen.lock().unwrap();
            for d in &got {
                s.deliveries
                    .push((d.job.id.to_string(), d.attempt(), sent, answered));
            }
        }
        if leases.is_empty() {
            continue;
        }
        let (answers, after_cut) = match e.ack_batch(&leases).await {
            Ok(a) => (a, false),
            Err(err) => {
                assert!(err.is_retryable(), "{err:?}");
                seen.lock().unwrap().cut("ack");
                (retry(|| e.ack_batch(&leases)).await.unwrap(), true)
            }
        };
        let mut s = seen.lock().unwrap();
        for (lease, a) in leases.iter().zip(answers) {
            match a {
                Ok(()) => *s.acked.entry(lease.id.to_string()).or_default() += 1,
                // Landed before the cut, or the lease ran out (then the job comes again).
                Err(Error::NotFound { .. } | Error::LeaseLost { .. }) if after_cut => {
                    s.acks_landed_before += 1
                }
                Err(Error::LeaseLost { .. }) => {}
                Err(err) => panic!("ack of {}: {err:?}", lease.id),
            }
        }
    }
}

/// `CLIENT KILL TYPE normal` every 100 ms for 4 s (every other one as Redis wakes from a
/// 100 ms `DEBUG SLEEP`, so that calls are cut after Redis ran them) while 6 producers push
/// (singles and batches) to one topic and 4 consumers reserve and ack another: every call answers, in
/// full or as `Unavailable`; a push retried by id leaves one job; every job is acked, each
/// exactly once; a job comes again only after a lease expiry the engine counted, and no
/// sooner than its lease; and the engine reconnects by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connections_leave_every_call_whole_and_the_engine_reconnects() {
    const PRODUCERS: usize = 6;
    const PER_PRODUCER: usize = 200;
    const CONSUMED: usize = 1500;
    const TTR: Duration = Duration::from_secs(1);
    const KILLING: Duration = Duration::from_secs(4);
    let s = server();
    let e = engine(&s, Duration::from_secs(2)).await;
    let (pushed_to, consumed_from) = (topic("kill_push"), topic("kill_work"));
    // Due one after the other through the killing, so that reserves and acks are in flight
    // all along.
    let work: Vec<_> = (0..CONSUMED)
        .map(|i| {
            job(&consumed_from, &format!("c{i}"), b"c")
                .with_ttr(TTR)
                .with_delay(KILLING * i as u32 / CONSUMED as u32)
        })
        .collect();
    for chunk in work.chunks(500) {
        e.push_batch(chunk.to_vec()).await.unwrap();
    }

    let seen = Arc::new(Mutex::new(Seen::default()));
    let start = Instant::now();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            tokio::spawn(produce(
                e.clone(),
                pushed_to.clone(),
                p,
                PER_PRODUCER,
                seen.clone(),
            ))
        })
        .collect();
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            tokio::spawn(consume(
                e.clone(),
                consumed_from.clone(),
                start + KILLING + Duration::from_secs(4),
                seen.clone(),
            ))
        })
        .collect();
    let mut killer = s.connection().await;
    let (mut kills, mut killed, mut stalled) = (0u32, 0u64, 0u32);
    while start.elapsed() < KILLING {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if kills % 2 == 1 {
            // Stall Redis for 100 ms so that calls pile up in its sockets, and kill as it
            // wakes: in one pass of its event loop it runs the piled calls and the kill, so
            // some calls are applied with their answers lost, others never run.
            let mut sleeper = s.connection().await;
            tokio::spawn(async move {
                let _ = redis::cmd("DEBUG")
                    .arg("SLEEP")
                    .arg("0.1")
                    .query_async::<()>(&mut sleeper)
                    .await;
            });
            tokio::time::sleep(Duration::from_millis(40)).await;
            stalled += 1;
        }
        let n: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .query_async(&mut killer)
            .await
            .unwrap();
        kills += 1;
        killed += n;
    }
    let mut pushed = BTreeSet::new();
    for p in producers {
        pushed.extend(p.await.unwrap());
    }
    for c in consumers {
        c.await.unwrap();
    }
    let took = start.elapsed();

    // Pushes: every id exactly once.
    assert_eq!(pushed.len(), PRODUCERS * PER_PRODUCER);
    let mut listed = ids_in(&e, &pushed_to, JobState::Ready).await;
    listed.sort();
    assert_eq!(listed.len(), pushed.len(), "a job stored twice or lost");
    assert!(
        listed.iter().eq(pushed.iter()),
        "the stored ids differ from the pushed ones"
    );

    // Consumed: every job acked exactly once, none left.
    let stats = e.stats(&consumed_from).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(
        (stats.ready, stats.delayed, stats.reserved, stats.dead),
        (0, 0, 0, 0),
        "jobs left: {stats:?}"
    );
    assert!(seen.acked.values().all(|&n| n == 1), "a job acked twice");
    let delivered: BTreeMap<&str, Vec<&(String, u32, Instant, Instant)>> =
        seen.deliveries.iter().fold(BTreeMap::new(), |mut m, d| {
            m.entry(d.0.as_str()).or_insert_with(Vec::new).push(d);
            m
        });
    assert_eq!(delivered.len(), CONSUMED, "a job was never delivered");
    // A job comes again only after a lease expiry, counted by the engine, and not before
    // the lease it replaces could have run out.
    let mut again = 0u64;
    let mut expiries = 0u64;
    for (job_id, ds) in &delivered {
        let last = ds.iter().map(|d| d.1).max().unwrap();
        expiries += u64::from(last - 1);
        again += ds.len() as u64 - 1;
        for pair in ds.windows(2) {
            assert!(pair[1].1 > pair[0].1, "{job_id}: attempts {pair:?}");
            assert!(
                pair[1].3.duration_since(pair[0].2) >= TTR,
                "{job_id} came again before its lease could run out"
            );
        }
    }
    assert_eq!(
        expiries, stats.expired_leases,
        "redeliveries without a lease expiry"
    );
    assert!(
        kills >= 10 && killed >= 10,
        "{kills} kills, {killed} connections"
    );
    let cut: u32 = seen.cut.values().sum();
    assert!(cut > 0, "no call was cut: the test tested nothing");
    assert!(
        seen.pushes_landed_before as u64 + expiries > 0,
        "no call was cut after Redis ran it (a push found stored on retry, a reserve whose \
         leases ran out unseen): the kills missed the calls in flight"
    );
    eprintln!(
        "CLIENT KILL: {kills} kills ({stalled} as Redis woke from a stall), {killed} connections cut in {KILLING:?}; calls cut: {:?}; \
         pushes {} (push calls whose first try had landed: {}); consumed {CONSUMED}: \
         {} deliveries ({again} again, {expiries} lease expiries), acks ok {}, retried acks \
         that had landed or lost their lease: {}; {took:?} in all",
        seen.cut,
        pushed.len(),
        seen.pushes_landed_before,
        seen.deliveries.len(),
        seen.acked.len(),
        seen.acks_landed_before,
    );
}
