//! The chaos run (issue 17): `delayq serve` over HTTP with producers and consumers while
//! the servers are SIGKILLed at random moments and restarted (same port, or a new one the
//! clients find), and on Redis (AOF `appendfsync always`) redis-server itself too. Then, all
//! servers up and everything drained, the clients' records alone must show: every answered
//! push acked exactly once, no stale token accepted, no delivery before its due time, every
//! second delivery explained by a nack or a lease expiry. Figures go to stdout and to
//! `<target>/chaos/<engine>.json`.
//!
//! About a minute per engine (the two run one after the other); `DELAYQ_CHAOS_SECS` sets the
//! length of the chaos phase for a soak, `DELAYQ_CHAOS_SEED` replays the random choices
//! (thread timing still varies).
//!
//! Layout: `chaos/fleet.rs` owns the processes, `chaos/client.rs` one HTTP call and its
//! classification, `chaos/actors.rs` the producers and consumers and their records,
//! `chaos/check.rs` the verdict.

#[path = "chaos/actors.rs"]
mod actors;
#[path = "chaos/check.rs"]
mod check;
#[path = "chaos/client.rs"]
mod client;
#[path = "chaos/fleet.rs"]
mod fleet;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::json;

use actors::{Shared, TOPIC};
use client::{Caller, Reply};
use fleet::Fleet;

/// The chaos phase's default length, per engine.
const DEFAULT_SECS: u64 = 55;
const PRODUCERS: usize = 3;
const CONSUMERS: usize = 4;
/// The longest wait for the queue to drain once the chaos stops.
const DRAIN: Duration = Duration::from_secs(60);

/// The two runs share the machine's two cores: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn chaos_embedded_engine_kill_9_of_the_server() {
    run("embedded");
}

#[test]
fn chaos_redis_engine_kill_9_of_servers_and_redis() {
    run("redis");
}

fn run(engine: &str) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let secs = env_u64("DELAYQ_CHAOS_SECS").unwrap_or(DEFAULT_SECS);
    let seed = env_u64("DELAYQ_CHAOS_SEED").unwrap_or_else(rand::random);
    println!("chaos {engine}: {secs} s, seed {seed} (DELAYQ_CHAOS_SEED={seed} to replay)");
    let began = Instant::now();
    let mut fleet = Fleet::start(engine == "redis");
    let shared = Arc::new(Shared::new(fleet.endpoints.clone()));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|n| {
            let s = shared.clone();
            std::thread::spawn(move || actors::produce(s, n, seed ^ (n as u64 + 1)))
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|n| {
            let s = shared.clone();
            std::thread::spawn(move || actors::consume(s, seed ^ (n as u64 + 100)))
        })
        .collect();

    let chaos_began = Instant::now();
    let kills = monkey(&mut fleet, Duration::from_secs(secs), seed);
    let chaos_secs = chaos_began.elapsed().as_secs_f64();

    shared.producing.store(false, Ordering::SeqCst);
    let pushes: Vec<_> = producers
        .into_iter()
        .flat_map(|h| h.join().expect("a producer panicked"))
        .collect();
    let drain_began = Instant::now();
    let stats = drain(&fleet, &shared, seed);
    let drain_secs = drain_began.elapsed().as_secs_f64();
    shared.consuming.store(false, Ordering::SeqCst);
    let (mut deliveries, mut stale) = (Vec::new(), Vec::new());
    for h in consumers {
        let log = h.join().expect("a consumer panicked");
        deliveries.extend(log.deliveries);
        stale.extend(log.stale);
    }

    let mut verdict = check::check(&pushes, &deliveries, &stale);
    check::settle_counts(&mut verdict, &deliveries);
    if stats["dead"].as_u64() != Some(0) {
        verdict.failures.push(format!("jobs went dead: {stats}"));
    }
    let counts = &verdict.counts;
    let figure = |k: &str| counts.get(k).copied().unwrap_or(0);
    let redeliveries: u64 = counts
        .iter()
        .filter(|(k, _)| k.starts_with("redeliveries."))
        .map(|(_, n)| n)
        .sum();
    let report = json!({
        "engine": engine,
        "seed": seed,
        "chaos_secs": chaos_secs,
        "drain_secs": drain_secs,
        "total_secs": began.elapsed().as_secs_f64(),
        "producers": PRODUCERS,
        "consumers": CONSUMERS,
        "kills": kills,
        "calls": shared.tally.snapshot(),
        "counts": counts,
        "failures": verdict.failures,
    });
    let path = write_report(engine, &report);
    println!(
        "chaos {engine}: {} pushes answered ({} unanswered), {} deliveries, {redeliveries} redeliveries, \
         kills {}, acked once {} (+{} by an ambiguous try), lost {}, failures {}; {chaos_secs:.0} s chaos, \
         {drain_secs:.1} s drain; details in {}",
        figure("pushes.answered"),
        figure("pushes.unanswered"),
        figure("deliveries"),
        json!(kills),
        figure("jobs.acked_once"),
        figure("jobs.acked_by_an_ambiguous_try_then_not_found"),
        verdict
            .failures
            .iter()
            .filter(|f| f.contains("lost"))
            .count(),
        verdict.failures.len(),
        path.display()
    );
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    assert!(
        figure("pushes.answered") > 100 && figure("deliveries") > 100,
        "too little traffic to say anything: {report}"
    );
    assert!(
        verdict.failures.is_empty(),
        "the chaos run broke a guarantee:\n{}",
        verdict.failures.join("\n")
    );
}

/// Kills at random moments (every 2 to 5 s) until `length` has passed, and restarts what it
/// killed after 0 to 1 s; returns the kills by kind.
fn monkey(fleet: &mut Fleet, length: Duration, seed: u64) -> BTreeMap<&'static str, u64> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6b69_6c6c);
    let mut kills = BTreeMap::new();
    let end = Instant::now() + length;
    loop {
        let pause = Duration::from_millis(rng.random_range(2000..5000));
        if Instant::now() + pause >= end {
            std::thread::sleep(end.saturating_duration_since(Instant::now()));
            return kills;
        }
        std::thread::sleep(pause);
        let down = Duration::from_millis(rng.random_range(0..1000));
        let roll: f64 = rng.random();
        if fleet.has_redis() && roll < 0.4 {
            fleet.kill_redis();
            *kills.entry("redis_server").or_default() += 1;
            std::thread::sleep(down);
            fleet.restart_redis();
        } else if fleet.slots() > 1 && roll < 0.5 {
            for slot in 0..fleet.slots() {
                fleet.kill_serve(slot);
                *kills.entry("delayq_serve").or_default() += 1;
            }
            *kills.entry("all_delayq_serve_at_once").or_default() += 1;
            std::thread::sleep(down);
            for slot in 0..fleet.slots() {
                fleet.restart_serve(slot, false);
            }
        } else {
            let slot = rng.random_range(0..fleet.slots());
            let new_port = rng.random_bool(0.25);
            fleet.kill_serve(slot);
            *kills.entry("delayq_serve").or_default() += 1;
            if new_port {
                *kills.entry("restarted_on_a_new_port").or_default() += 1;
            }
            std::thread::sleep(down);
            fleet.restart_serve(slot, new_port);
        }
    }
}

/// Waits (bounded) until the topic has nothing delayed, ready or reserved; returns its stats.
fn drain(fleet: &Fleet, shared: &Shared, seed: u64) -> serde_json::Value {
    let mut c = Caller::new(
        fleet.endpoints.clone(),
        Arc::default(),
        StdRng::seed_from_u64(seed ^ 0xd7a1),
    );
    let start = Instant::now();
    let mut last = serde_json::Value::Null;
    loop {
        if let Ok(Reply::Ok(stats)) = c.once("stats", &format!("/v1/topics/{TOPIC}/stats"), None) {
            let live: u64 = ["delayed", "ready", "reserved"]
                .iter()
                .map(|k| stats[k].as_u64().unwrap_or(u64::MAX / 4))
                .sum();
            if live == 0 {
                return stats;
            }
            last = stats;
        }
        assert!(
            start.elapsed() < DRAIN,
            "not drained within {DRAIN:?} after the chaos: {last}\ncalls: {:?}",
            shared.tally.snapshot()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Writes the report to `<target>/chaos/<engine>.json` and returns its path.
fn write_report(engine: &str, report: &serde_json::Value) -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.parent().map_or(tmp.clone(), |t| t.join("chaos"));
    std::fs::create_dir_all(&dir).expect("the report's directory");
    let path = dir.join(format!("{engine}.json"));
    let text = serde_json::to_string_pretty(report).expect("the report as JSON");
    std::fs::write(&path, text).expect("the report file");
    path
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: expected a whole number")),
    )
}
