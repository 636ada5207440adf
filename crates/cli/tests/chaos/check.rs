//! The verdict of a chaos run, from the clients' records alone: every answered push acked
//! exactly once, no stale token accepted, no delivery before its due time, and every second
//! delivery explained by a nack or a lease expiry. Failures are listed; everything else is
//! counted by cause for the report.

use std::collections::{BTreeMap, HashMap};

use super::actors::{DeliveryRec, Outcome, PushOutcome, PushRec, Settle, StaleKind, StaleRec};
use super::client::Reply;

/// The counts and failures of a run.
#[derive(Default)]
pub struct Verdict {
    /// Counters by dotted name.
    pub counts: BTreeMap<String, u64>,
    /// Broken guarantees, one line each (the first few of a kind are enough to debug).
    pub failures: Vec<String>,
}

impl Verdict {
    fn add(&mut self, key: &str) {
        self.add_n(key, 1);
    }

    fn add_n(&mut self, key: &str, n: u64) {
        *self.counts.entry(key.to_string()).or_default() += n;
    }

    fn fail(&mut self, what: String) {
        self.add("failures");
        if self.failures.len() < 50 {
            self.failures.push(what);
        }
    }
}

/// Checks the records of a run.
pub fn check(pushes: &[PushRec], deliveries: &[DeliveryRec], stale: &[StaleRec]) -> Verdict {
    let mut v = Verdict::default();
    // id -> created_at -> deliveries in attempt order: a job re-created by a push retry
    // (its first life acked before the retry came) is a second generation.
    let mut by_id: HashMap<&str, BTreeMap<&str, Vec<&DeliveryRec>>> = HashMap::new();
    for d in deliveries {
        v.add("deliveries");
        no_early(&mut v, d);
        by_id
            .entry(&d.id)
            .or_default()
            .entry(&d.created_at)
            .or_default()
            .push(d);
    }
    for gens in by_id.values_mut() {
        for ds in gens.values_mut() {
            ds.sort_by_key(|d| (d.attempt, d.received_ms));
        }
    }
    for p in pushes {
        check_push(&mut v, p, by_id.get(p.id.as_str()));
    }
    let pushed: HashMap<&str, &PushRec> = pushes.iter().map(|p| (p.id.as_str(), p)).collect();
    for (id, gens) in &by_id {
        if !matches!(
            pushed.get(id).map(|p| &p.outcome),
            Some(PushOutcome::Answered { .. })
        ) {
            v.add("jobs.delivered_without_an_answered_push");
        }
        for ds in gens.values() {
            check_generation(&mut v, ds);
        }
    }
    for s in stale {
        check_stale(&mut v, s);
    }
    v
}

/// No delivery before its due time: on the engine's clock (its lateness is never negative)
/// and on the host's (the answer came at or after the due time).
fn no_early(v: &mut Verdict, d: &DeliveryRec) {
    if d.lateness_ms < 0.0 {
        v.fail(format!(
            "{} attempt {} delivered {} ms early (engine clock)",
            d.id, d.attempt, -d.lateness_ms
        ));
    }
    if d.received_ms < d.ready_at_ms {
        v.fail(format!(
            "{} attempt {} received at {} before its due time {} (host clock)",
            d.id, d.attempt, d.received_ms, d.ready_at_ms
        ));
    }
}

/// An answered push: its job delivered, as one job (two when a faulted try had created one
/// that was acked before the retry), never before the due time the server answered.
fn check_push(v: &mut Verdict, p: &PushRec, gens: Option<&BTreeMap<&str, Vec<&DeliveryRec>>>) {
    v.add("pushes.sent");
    if !p.faults.is_empty() {
        v.add("pushes.retried_after_a_fault");
    }
    let (created, due) = match p.outcome {
        PushOutcome::Answered {
            created,
            ready_at_ms,
        } => (created, ready_at_ms),
        PushOutcome::Rejected(ref why) => {
            v.fail(format!("push {} rejected: {why}", p.id));
            return;
        }
        PushOutcome::Unanswered => {
            v.add("pushes.unanswered");
            return;
        }
    };
    v.add("pushes.answered");
    if !created {
        v.add("pushes.answered_existing_after_a_fault");
    }
    let Some(gens) = gens else {
        v.fail(format!(
            "{} lost: its push was answered, it was never delivered",
            p.id
        ));
        return;
    };
    let pushed_once = created && p.faults.is_empty();
    match gens.len() {
        1 => {}
        2 if !pushed_once => v.add("jobs.recreated_by_a_push_retry_after_its_ack"),
        n => v.fail(format!("{} delivered as {n} different jobs", p.id)),
    }
    if pushed_once {
        // One job, whose due time is the one answered: no delivery before it.
        for d in gens.values().flatten() {
            v.add("deliveries.checked_against_the_push_answer");
            if d.ready_at_ms < due
                || d.received_ms < due
                || (d.attempt == 1 && d.ready_at_ms != due)
            {
                v.fail(format!(
                    "{} attempt {}: due {} received {} but the push answered due {due}",
                    d.id, d.attempt, d.ready_at_ms, d.received_ms
                ));
            }
        }
    }
}

/// One job's deliveries: each attempt once, a redelivery only after a nack or a lease
/// expiry, and exactly one accepted ack (or an ambiguous one its retry found applied).
fn check_generation(v: &mut Verdict, ds: &[&DeliveryRec]) {
    v.add("jobs.delivered");
    let confirmed = ds
        .iter()
        .filter(|d| matches!(d.settle, Settle::Ack(Outcome::Done { .. })))
        .count();
    if confirmed > 1 {
        v.fail(format!("{} acked {confirmed} times", ds[0].id));
    }
    if ds[0].attempt > 1 {
        v.add_n(
            "redeliveries.lease_expired.delivery_never_received",
            ds[0].attempt - 1,
        );
    }
    for pair in ds.windows(2) {
        let (p, d) = (pair[0], pair[1]);
        if d.token == p.token {
            v.fail(format!(
                "{} attempts {} and {} share a lease token",
                d.id, p.attempt, d.attempt
            ));
        }
        if d.attempt == p.attempt {
            v.fail(format!("{} attempt {} delivered twice", d.id, d.attempt));
        } else if matches!(p.settle, Settle::Ack(Outcome::Done { .. })) {
            v.fail(format!(
                "{} delivered again (attempt {}) after attempt {}'s ack was accepted",
                d.id, d.attempt, p.attempt
            ));
        } else {
            match redelivery_cause(p, d) {
                Ok(cause) => v.add(&format!("redeliveries.{cause}")),
                Err(why) => v.fail(why),
            }
            if d.attempt > p.attempt + 1 {
                let unseen = d.attempt - p.attempt - 1;
                v.add_n("redeliveries.lease_expired.delivery_never_received", unseen);
            }
        }
    }
    let last = ds[ds.len() - 1];
    match (&last.settle, confirmed) {
        (_, 1..) => v.add("jobs.acked_once"),
        (Settle::Ack(Outcome::Maybe(code)), 0) if code == "not_found" => {
            v.add("jobs.acked_by_an_ambiguous_try_then_not_found");
        }
        (settle, _) => v.fail(format!(
            "{} never acked: its last delivery (attempt {}) ended {settle:?}",
            last.id, last.attempt
        )),
    }
}

/// Why `d` followed `p`: a nack, or a lease expiry (checked: the engine handed `d` out at
/// or after `p`'s deadline).
fn redelivery_cause(p: &DeliveryRec, d: &DeliveryRec) -> Result<String, String> {
    let expired = d.delivered_at_ms() >= p.deadline_ms as f64;
    let cause = match &p.settle {
        Settle::Nack(Outcome::Done { .. }) => "nack",
        Settle::Nack(Outcome::Maybe(_) | Outcome::GaveUp) if !expired => "nack_answer_lost",
        _ if !expired => {
            return Err(format!(
                "{} attempt {} handed out at {:.3} before attempt {}'s lease deadline {} \
                 without a nack ({:?})",
                d.id,
                d.attempt,
                d.delivered_at_ms(),
                p.attempt,
                p.deadline_ms,
                p.settle
            ));
        }
        Settle::Abandoned => "lease_expired.held_past_ttr_on_purpose",
        Settle::Ack(Outcome::Rejected(_)) => "lease_expired.ack_too_late",
        Settle::Ack(Outcome::Maybe(_)) => "lease_expired.ack_cut_then_rejected",
        Settle::Ack(Outcome::GaveUp) => "lease_expired.ack_never_answered",
        Settle::Nack(_) => "lease_expired.nack_too_late_or_cut",
        Settle::Ack(Outcome::Done { .. }) => unreachable!("checked by the caller"),
    };
    Ok(cause.to_string())
}

/// An ack with a stale token is never accepted: `lease_lost` while another delivery holds
/// the job, `lease_lost` or `not_found` (or `wrong_state` for a job re-created since) after
/// the lease ran out.
fn check_stale(v: &mut Verdict, s: &StaleRec) {
    let kind = match s.kind {
        StaleKind::WhileRedelivered => "while_redelivered",
        StaleKind::AfterExpiry => "after_expiry",
    };
    match &s.reply {
        None => v.add(&format!("stale_acks.{kind}.unanswered")),
        Some(Reply::Ok(_)) => v.fail(format!(
            "{}: an ack with a stale token ({kind}) was accepted",
            s.id
        )),
        Some(Reply::Rejected(status, code)) => {
            v.add(&format!("stale_acks.{kind}.{code}"));
            let fine = match s.kind {
                StaleKind::WhileRedelivered if s.answered_ms < s.live_deadline_ms => {
                    code == "lease_lost"
                }
                StaleKind::WhileRedelivered => code == "lease_lost" || code == "not_found",
                StaleKind::AfterExpiry => {
                    ["lease_lost", "not_found", "wrong_state"].contains(&code.as_str())
                }
            };
            if !fine {
                v.fail(format!(
                    "{}: a stale ack ({kind}) answered {status} {code}",
                    s.id
                ));
            }
        }
    }
}

/// Counts of what the consumers did with their deliveries.
pub fn settle_counts(v: &mut Verdict, deliveries: &[DeliveryRec]) {
    for d in deliveries {
        let key = match &d.settle {
            Settle::Ack(o) => format!("acks.{}", outcome_key(o)),
            Settle::Nack(o) => format!("nacks.{}", outcome_key(o)),
            Settle::Abandoned => "held_past_ttr".to_string(),
        };
        v.add(&key);
    }
}

fn outcome_key(o: &Outcome) -> String {
    match o {
        Outcome::Done { retried: false } => "accepted".into(),
        Outcome::Done { retried: true } => "accepted_after_a_fault".into(),
        Outcome::Maybe(code) => format!("maybe_applied.{code}"),
        Outcome::Rejected(code) => format!("rejected.{code}"),
        Outcome::GaveUp => "unanswered".into(),
    }
}

/// The checker itself: each broken guarantee, written into records by hand, is a failure
/// (so a run that passes says something).
#[cfg(test)]
mod tests {
    use super::super::actors::{DeliveryRec, Outcome, PushOutcome, PushRec, Settle};
    use super::super::actors::{StaleKind, StaleRec};
    use super::super::client::Reply;
    use super::check;

    fn push(id: &str, due: u64) -> PushRec {
        PushRec {
            id: id.into(),
            faults: Vec::new(),
            outcome: PushOutcome::Answered {
                created: true,
                ready_at_ms: due,
            },
        }
    }

    /// Attempt `attempt` of job `id` (due at 1000), handed out `late` ms after `ready`.
    fn delivery(id: &str, attempt: u64, ready: u64, late: f64, settle: Settle) -> DeliveryRec {
        DeliveryRec {
            id: id.into(),
            created_at: "t0".into(),
            attempt,
            token: attempt * 10,
            ready_at_ms: ready,
            lateness_ms: late,
            deadline_ms: ready + late as u64 + 1000,
            received_ms: ready + late as u64 + 1,
            settle,
        }
    }

    const ACKED: Settle = Settle::Ack(Outcome::Done { retried: false });

    fn failures(p: &[PushRec], d: &[DeliveryRec], s: &[StaleRec]) -> Vec<String> {
        check(p, d, s).failures
    }

    #[test]
    fn a_clean_history_passes() {
        let d = [
            delivery(
                "a",
                1,
                1000,
                2.0,
                Settle::Nack(Outcome::Done { retried: false }),
            ),
            delivery("a", 2, 1100, 1.0, Settle::Abandoned),
            delivery("a", 3, 2200, 0.5, ACKED),
        ];
        assert_eq!(failures(&[push("a", 1000)], &d, &[]), Vec::<String>::new());
    }

    #[test]
    fn lost_early_twice_acked_and_unexplained_redeliveries_fail() {
        let lost = failures(&[push("a", 1000)], &[], &[]);
        assert!(lost[0].contains("lost"), "{lost:?}");

        let early = [delivery("a", 1, 1000, -0.2, ACKED)];
        assert!(!failures(&[push("a", 1000)], &early, &[]).is_empty());
        let before_answer = [delivery("a", 1, 999, 0.0, ACKED)];
        assert!(!failures(&[push("a", 1000)], &before_answer, &[]).is_empty());

        let twice = [
            delivery("a", 1, 1000, 1.0, ACKED),
            delivery("a", 2, 1100, 0.0, ACKED),
        ];
        let f = failures(&[push("a", 1000)], &twice, &[]);
        assert!(f.iter().any(|f| f.contains("acked 2 times")), "{f:?}");

        // Attempt 2 handed out while attempt 1's lease was live, and attempt 1 never nacked.
        let live = [
            delivery("a", 1, 1000, 1.0, Settle::Ack(Outcome::GaveUp)),
            delivery("a", 2, 1500, 0.0, ACKED),
        ];
        let f = failures(&[push("a", 1000)], &live, &[]);
        assert!(
            f.iter()
                .any(|f| f.contains("before attempt 1's lease deadline")),
            "{f:?}"
        );

        let same_attempt = [
            delivery("a", 1, 1000, 1.0, Settle::Abandoned),
            delivery("a", 1, 1000, 9.0, ACKED),
        ];
        assert!(!failures(&[push("a", 1000)], &same_attempt, &[]).is_empty());
    }

    #[test]
    fn a_stale_token_accepted_fails() {
        let stale = StaleRec {
            kind: StaleKind::AfterExpiry,
            id: "a".into(),
            reply: Some(Reply::Ok(serde_json::Value::Null)),
            answered_ms: 5000,
            live_deadline_ms: 0,
        };
        let d = [delivery("a", 1, 1000, 1.0, ACKED)];
        assert!(!failures(&[push("a", 1000)], &d, &[stale]).is_empty());
        let wrong_code = StaleRec {
            kind: StaleKind::WhileRedelivered,
            id: "a".into(),
            reply: Some(Reply::Rejected(404, "not_found".into())),
            answered_ms: 1500,
            live_deadline_ms: 2001,
        };
        assert!(!failures(&[push("a", 1000)], &d, &[wrong_code]).is_empty());
    }
}
