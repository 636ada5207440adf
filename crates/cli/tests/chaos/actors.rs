//! The chaos run's clients and what they record. Producers push jobs with their own ids
//! (a retried push is idempotent) and short delays; consumers long-poll reserve, then ack,
//! sometimes nack, sometimes hold a lease past its ttr on purpose, and sometimes try an ack
//! with an old token. Every answer, and every fault on the way to it, is kept.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::Rng as _;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use serde_json::{Value, json};

use super::client::{Caller, Fault, Reply, Retried, Tally};
use super::fleet::Endpoints;

/// The topic of every job.
pub const TOPIC: &str = "chaos";
/// Each job's lease (the shortest the API takes).
pub const TTR_MS: u64 = 1000;
/// How long a client retries one call before it gives up.
const GIVE_UP: Duration = Duration::from_secs(20);

/// What the threads share: where the servers are, the counters, the stop flags, and the
/// last lease token each job was seen with (for the old-token acks).
pub struct Shared {
    /// The servers' addresses.
    pub endpoints: Arc<Endpoints>,
    /// Counters of calls and faults.
    pub tally: Arc<Tally>,
    /// Producers run while set.
    pub producing: AtomicBool,
    /// Consumers run while set.
    pub consuming: AtomicBool,
    tokens: Mutex<HashMap<String, u64>>,
}

impl Shared {
    /// Flags set, no token seen yet.
    pub fn new(endpoints: Arc<Endpoints>) -> Shared {
        Shared {
            endpoints,
            tally: Arc::default(),
            producing: AtomicBool::new(true),
            consuming: AtomicBool::new(true),
            tokens: Mutex::default(),
        }
    }

    fn caller(&self, seed: u64) -> Caller {
        Caller::new(
            self.endpoints.clone(),
            self.tally.clone(),
            StdRng::seed_from_u64(seed),
        )
    }
}

/// How a push ended.
#[derive(Debug)]
pub enum PushOutcome {
    /// 2xx: the job exists (`created` false: an earlier, faulted try had created it).
    Answered {
        /// The server created it with this try.
        created: bool,
        /// The due time the server answered, ms since the epoch, engine clock.
        ready_at_ms: u64,
    },
    /// 4xx (never expected).
    Rejected(String),
    /// No answer before the client gave up (the job may or may not exist).
    Unanswered,
}

/// One job a producer pushed.
#[derive(Debug)]
pub struct PushRec {
    /// The job id.
    pub id: String,
    /// The faults before the answer.
    pub faults: Vec<Fault>,
    /// How it ended.
    pub outcome: PushOutcome,
}

/// How a lease operation (ack or nack) ended, from the client's point of view.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// 2xx (`retried`: after faulted tries, which therefore did not apply).
    Done {
        /// True when faulted tries came first.
        retried: bool,
    },
    /// A rejection after a try that may have applied: maybe applied.
    Maybe(String),
    /// A rejection at the first answered try, nothing ambiguous before it.
    Rejected(String),
    /// No answer before the client gave up.
    GaveUp,
}

/// What a consumer did with a delivery.
#[derive(Debug, Clone, PartialEq)]
pub enum Settle {
    /// Acked.
    Ack(Outcome),
    /// Nacked (retry).
    Nack(Outcome),
    /// Held past its ttr on purpose, never acked in time.
    Abandoned,
}

/// One delivery a consumer received.
#[derive(Debug)]
pub struct DeliveryRec {
    /// The job id.
    pub id: String,
    /// The job's creation time (tells a job re-created by a push retry from the first one).
    pub created_at: String,
    /// The attempt number of this delivery.
    pub attempt: u64,
    /// The lease token.
    pub token: u64,
    /// The job's due time at this delivery, ms, engine clock.
    pub ready_at_ms: u64,
    /// Engine time at reserve minus the due time, ms.
    pub lateness_ms: f64,
    /// The lease deadline, ms, engine clock.
    pub deadline_ms: u64,
    /// The host's wall clock when the answer came, ms (floored).
    pub received_ms: u64,
    /// What the consumer did with it.
    pub settle: Settle,
}

impl DeliveryRec {
    /// The engine's time when it handed the job out, ms.
    pub fn delivered_at_ms(&self) -> f64 {
        self.ready_at_ms as f64 + self.lateness_ms
    }
}

/// Why an ack with an old token was tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaleKind {
    /// The token of an earlier delivery, while this consumer holds the job's live lease.
    WhileRedelivered,
    /// The token of a lease held past its deadline on purpose.
    AfterExpiry,
}

/// One ack with a stale token.
#[derive(Debug)]
pub struct StaleRec {
    /// Why it was tried.
    pub kind: StaleKind,
    /// The job id.
    pub id: String,
    /// The answer, `None` when the client gave up.
    pub reply: Option<Reply>,
    /// The host's wall clock at the answer, ms.
    pub answered_ms: u64,
    /// With `WhileRedelivered`: the deadline of the live lease.
    pub live_deadline_ms: u64,
}

/// What one consumer saw.
#[derive(Default)]
pub struct ConsumerLog {
    /// Its deliveries.
    pub deliveries: Vec<DeliveryRec>,
    /// Its acks with old tokens.
    pub stale: Vec<StaleRec>,
}

/// The host's wall clock, ms since the epoch (floored).
pub fn wall_ms() -> u64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970");
    u64::try_from(d.as_millis()).expect("ms fit in u64")
}

/// A producer: pushes jobs `p<n>-<seq>` with delays of 0 to 300 ms, a few dozen a second,
/// until `producing` is cleared.
pub fn produce(shared: Arc<Shared>, n: usize, seed: u64) -> Vec<PushRec> {
    let mut c = shared.caller(seed);
    let mut out = Vec::new();
    for seq in 0.. {
        if !shared.producing.load(Ordering::SeqCst) {
            break;
        }
        let id = format!("p{n}-{seq}");
        let body = json!({
            "id": id,
            "body": format!("job {id}"),
            "delay_ms": c.rng.random_range(0..=300),
            "ttr_ms": TTR_MS,
            "max_attempts": 10_000,
            "backoff": {"kind": "fixed", "base_ms": 50},
        });
        shared.tally.add("push.sent");
        let r = c.until_answered("push", &format!("/v1/topics/{TOPIC}/jobs"), &body, GIVE_UP);
        let outcome = match r.reply {
            Some(Reply::Ok(v)) => PushOutcome::Answered {
                created: v["created"].as_bool().expect("push answer: created"),
                ready_at_ms: v["ready_at_ms"].as_u64().expect("push answer: ready_at_ms"),
            },
            Some(Reply::Rejected(status, code)) => {
                PushOutcome::Rejected(format!("{status} {code}"))
            }
            None => PushOutcome::Unanswered,
        };
        out.push(PushRec {
            id,
            faults: r.faults,
            outcome,
        });
        std::thread::sleep(Duration::from_millis(c.rng.random_range(20..60)));
    }
    out
}

/// A consumer: reserves one job at a time (long-poll of 1 s) until `consuming` is cleared,
/// then tries the old tokens of the leases it held on purpose and returns what it saw.
pub fn consume(shared: Arc<Shared>, seed: u64) -> ConsumerLog {
    let mut c = shared.caller(seed);
    let mut log = ConsumerLog::default();
    // Leases held on purpose: (id, token, deadline).
    let mut held: Vec<(String, u64, u64)> = Vec::new();
    let request = json!({"topics": [TOPIC], "max": 1, "wait_ms": 1000});
    while shared.consuming.load(Ordering::SeqCst) {
        try_expired(&mut c, &mut held, &mut log, false);
        shared.tally.add("reserve.sent");
        let jobs = match c.once("reserve", "/v1/reserve", Some(&request)) {
            Ok(Reply::Ok(v)) => v["jobs"].as_array().cloned().unwrap_or_default(),
            Ok(Reply::Rejected(status, code)) => {
                panic!("a reserve was rejected: {status} {code}")
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        for d in jobs {
            let rec = handle(&shared, &mut c, &d, &mut log, &mut held);
            log.deliveries.push(rec);
        }
    }
    try_expired(&mut c, &mut held, &mut log, true);
    log
}

/// Handles one delivery: maybe an ack with an old token first, then ack, nack or hold.
fn handle(
    shared: &Shared,
    c: &mut Caller,
    d: &Value,
    log: &mut ConsumerLog,
    held: &mut Vec<(String, u64, u64)>,
) -> DeliveryRec {
    let received_ms = wall_ms();
    let job = &d["job"];
    let id = job["id"].as_str().expect("delivery: job.id").to_string();
    let token = d["token"].as_u64().expect("delivery: token");
    let attempt = job["attempts"].as_u64().expect("delivery: job.attempts");
    let deadline_ms = job["deadline_ms"].as_u64().expect("delivery: deadline_ms");
    let path = format!("/v1/topics/{TOPIC}/jobs/{id}");
    let old = shared
        .tokens
        .lock()
        .expect("tokens lock")
        .insert(id.clone(), token);
    if let Some(old) = old.filter(|&t| t != token)
        && c.rng.random_bool(0.3)
    {
        let r = c.until_answered(
            "stale_ack",
            &format!("{path}/ack"),
            &json!({"token": old}),
            GIVE_UP,
        );
        log.stale.push(StaleRec {
            kind: StaleKind::WhileRedelivered,
            id: id.clone(),
            reply: r.reply,
            answered_ms: wall_ms(),
            live_deadline_ms: deadline_ms,
        });
    }
    let roll: f64 = c.rng.random();
    let settle = if roll < 0.85 {
        let r = c.until_answered(
            "ack",
            &format!("{path}/ack"),
            &json!({"token": token}),
            GIVE_UP,
        );
        Settle::Ack(outcome(&r))
    } else if roll < 0.93 {
        let body = json!({"token": token, "delay_ms": c.rng.random_range(0..200)});
        let r = c.until_answered("nack", &format!("{path}/nack"), &body, GIVE_UP);
        Settle::Nack(outcome(&r))
    } else {
        held.push((id.clone(), token, deadline_ms));
        Settle::Abandoned
    };
    DeliveryRec {
        id,
        created_at: job["created_at"]
            .as_str()
            .expect("delivery: created_at")
            .to_string(),
        attempt,
        token,
        ready_at_ms: job["ready_at_ms"].as_u64().expect("delivery: ready_at_ms"),
        lateness_ms: d["lateness_ms"].as_f64().expect("delivery: lateness_ms"),
        deadline_ms,
        received_ms,
        settle,
    }
}

/// Tries an ack with the token of each held lease whose deadline passed (all when `all`:
/// by then every lease has run out).
fn try_expired(
    c: &mut Caller,
    held: &mut Vec<(String, u64, u64)>,
    log: &mut ConsumerLog,
    all: bool,
) {
    // 100 ms past the deadline on the host's clock: the engine's clock is past it too.
    if all && let Some(last) = held.iter().map(|h| h.2).max() {
        let wait = (last + 101).saturating_sub(wall_ms());
        std::thread::sleep(Duration::from_millis(wait));
    }
    let now = wall_ms();
    let (due, keep): (Vec<_>, Vec<_>) = held
        .drain(..)
        .partition(|(_, _, deadline)| all || now > deadline + 100);
    *held = keep;
    for (id, token, _) in due {
        let path = format!("/v1/topics/{TOPIC}/jobs/{id}/ack");
        let r = c.until_answered("stale_ack", &path, &json!({"token": token}), GIVE_UP);
        log.stale.push(StaleRec {
            kind: StaleKind::AfterExpiry,
            id,
            reply: r.reply,
            answered_ms: wall_ms(),
            live_deadline_ms: 0,
        });
    }
}

fn outcome(r: &Retried) -> Outcome {
    match &r.reply {
        Some(Reply::Ok(_)) => Outcome::Done {
            retried: !r.faults.is_empty(),
        },
        Some(Reply::Rejected(_, code)) if r.after_ambiguity() => Outcome::Maybe(code.clone()),
        Some(Reply::Rejected(_, code)) => Outcome::Rejected(code.clone()),
        None => Outcome::GaveUp,
    }
}
