//! [`Runner`]: runs a sequence of [`Op`]s against an engine and compares every answer with
//! the [`Model`], allowing exactly the freedom the contract allows.
//!
//! The file is long because the candidates (the model states that explain the answers so
//! far) and each operation's comparison are one search; apart, each would need the others'.
//!
//! The freedom is time. Each call is bracketed by two reads of the engine's clock
//! ([`Engine::now`]), so it ran at some engine time in that window; the runner keeps every
//! model state (the *candidates*) that explains what the engine answered so far, at some
//! time of each window (each step of a call may take its own time: one job of a batch, one
//! settlement, one topic's reserve pass), at the start of its millisecond or later in it
//! (then a delay counts from the next millisecond: engines read their clock in µs and round
//! it up, so that no job is due early; issue 36), and a reserve over several topics may
//! start with any of them. A call no candidate explains fails the case. Lease expiry is the other
//! freedom: an engine notices a lease ran out some time after its deadline (a timer, or the
//! next read of the topic). Before each call the runner waits out every lease due within
//! [`GUARD_MS`] and reads its job, accepting the expiry at any time from the deadline to that
//! read; a call that runs so long that a lease ends during it makes the case inconclusive
//! (rejected, not failed). The values of lease tokens are the third: the engine chooses
//! them, and the runner hands each reserve pass the engine's tokens
//! ([`Model::reserve_pass`]), so the model checks that each is larger than every token
//! handed out before in its topic and keeps it for the later operations on that lease.

use std::fmt::Debug;
use std::time::Duration;

use delayq_core::{
    DeliveryMode, Engine, JobState, Lease, LeaseToken, Limits, Nack, NewJob, Reserve, Schedule,
    Settle, Timestamp, Topic, check_push_batch,
};
use proptest::test_runner::TestCaseError;

use super::op::{CLIENTS, IDS, JobSpec, LeasePick, Op, SettleKind, TOPICS, id, topic};
use super::state::{DeliveryView, Model, Refusal, TokenOutOfOrder};

/// Leases due within this many ms of a call are waited out before it.
pub const GUARD_MS: u64 = 150;
/// A call whose clock window is wider than this makes the case inconclusive.
pub const MAX_WINDOW_MS: u64 = 400;

/// What the runs of a check did, for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Sequences run (cases, shrinking included).
    pub cases: u64,
    /// Sequences rejected as inconclusive (a call too slow for the lease guard).
    pub rejected: u64,
    /// Operations run and compared.
    pub ops: u64,
    /// Jobs delivered.
    pub deliveries: u64,
    /// Leases that ran out and were seen to fail.
    pub expiries: u64,
    /// Answers [`Refusal::NotFound`].
    pub not_found: u64,
    /// Answers [`Refusal::LeaseLost`].
    pub lease_lost: u64,
    /// Answers [`Refusal::WrongState`].
    pub wrong_state: u64,
    /// Answers [`Refusal::Invalid`].
    pub invalid: u64,
    /// The most candidate states held at once.
    pub max_candidates: usize,
}

impl Totals {
    /// Adds another run's counts.
    pub fn add(&mut self, o: &Totals) {
        self.cases += o.cases;
        self.rejected += o.rejected;
        self.ops += o.ops;
        self.deliveries += o.deliveries;
        self.expiries += o.expiries;
        self.not_found += o.not_found;
        self.lease_lost += o.lease_lost;
        self.wrong_state += o.wrong_state;
        self.invalid += o.invalid;
        self.max_candidates = self.max_candidates.max(o.max_candidates);
    }
}

#[derive(Default)]
struct Client {
    held: Vec<Lease>,
    past: Vec<Lease>,
}

/// Runs one sequence against one engine (fresh: the model starts empty).
pub struct Runner<'e, E: Engine> {
    engine: &'e E,
    candidates: Vec<Model>,
    clients: Vec<Client>,
    /// What this run did.
    pub totals: Totals,
}

fn fail(msg: impl Into<String>) -> TestCaseError {
    TestCaseError::fail(msg.into())
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn topics_of(mask: u8) -> Vec<Topic> {
    match mask % 3 {
        1 => vec![topic(0)],
        2 => vec![topic(1)],
        _ => vec![topic(0), topic(1)],
    }
}

impl<'e, E: Engine> Runner<'e, E> {
    /// A runner on an engine whose store is empty.
    pub fn new(engine: &'e E) -> Self {
        Runner {
            engine,
            candidates: vec![Model::default()],
            clients: (0..CLIENTS).map(|_| Client::default()).collect(),
            totals: Totals::default(),
        }
    }

    /// Runs `ops`, then compares the whole resulting state (every job, every listing, the
    /// stats of both topics).
    pub async fn run(&mut self, ops: &[Op]) -> Result<(), TestCaseError> {
        for (i, op) in ops.iter().enumerate() {
            self.settle_expiries()
                .await
                .map_err(|e| context(e, i, op))?;
            self.apply(op).await.map_err(|e| context(e, i, op))?;
            self.totals.ops += 1;
        }
        self.settle_expiries().await?;
        self.compare_all().await
    }

    async fn now(&self) -> Result<u64, TestCaseError> {
        self.engine
            .now()
            .await
            .map(Timestamp::as_millis)
            .map_err(|e| fail(format!("now: {e}")))
    }

    /// The answer of a call as the model gives it: a refusal, or a failure of the case for
    /// an error the contract never gives here.
    fn answer<T>(
        &mut self,
        what: &str,
        r: delayq_core::Result<T>,
    ) -> Result<Result<T, Refusal>, TestCaseError> {
        match r {
            Ok(v) => Ok(Ok(v)),
            Err(e) => {
                let refusal = Refusal::of(&e).ok_or_else(|| fail(format!("{what}: {e}")))?;
                self.count(&refusal);
                Ok(Err(refusal))
            }
        }
    }

    fn count(&mut self, r: &Refusal) {
        match r {
            Refusal::NotFound => self.totals.not_found += 1,
            Refusal::LeaseLost => self.totals.lease_lost += 1,
            Refusal::WrongState(..) => self.totals.wrong_state += 1,
            Refusal::Invalid(_) => self.totals.invalid += 1,
        }
    }

    /// Keeps the candidates that answer `actual` at some time in `lo..=hi` after `f`.
    fn step<A: PartialEq + Debug>(
        &mut self,
        what: &str,
        (lo, hi): (u64, u64),
        actual: &A,
        f: impl Fn(&mut Model, Timestamp) -> A,
    ) -> Result<(), TestCaseError> {
        let next = self.explain((lo, hi), actual, &f);
        if next.is_empty() {
            let mut m = self.candidates[0].clone();
            let at_lo = f(&mut m, Timestamp::from_millis(lo));
            let mut m = self.candidates[0].clone();
            let at_hi = f(&mut m, Timestamp::from_millis(hi));
            return Err(fail(format!(
                "{what}: the engine answered\n  {actual:?}\nbut the model ({} candidate states) answers\n  at {lo} ms: {at_lo:?}\n  at {hi} ms: {at_hi:?}",
                self.candidates.len()
            )));
        }
        self.candidates = next;
        self.totals.max_candidates = self.totals.max_candidates.max(self.candidates.len());
        Ok(())
    }

    fn explain<A: PartialEq>(
        &self,
        (lo, hi): (u64, u64),
        actual: &A,
        f: &impl Fn(&mut Model, Timestamp) -> A,
    ) -> Vec<Model> {
        let mut next: Vec<Model> = Vec::new();
        for m in &self.candidates {
            for t in lo..=hi {
                // At the start of the millisecond t, or later in it: a delay then counts
                // from the next one (engines round their µs clock up; issue 36).
                for up in [false, true] {
                    let mut m2 = m.clone();
                    m2.set_past_start_of_ms(up);
                    let answer = f(&mut m2, Timestamp::from_millis(t));
                    m2.set_past_start_of_ms(false);
                    if answer == *actual && !next.contains(&m2) {
                        next.push(m2);
                    }
                }
            }
        }
        next
    }

    /// Runs `call` between two reads of the engine clock: (window, answer).
    async fn timed<T>(
        &self,
        call: impl Future<Output = T>,
    ) -> Result<((u64, u64), T), TestCaseError> {
        let t0 = self.now().await?;
        let out = call.await;
        let t1 = self.now().await?;
        if t1 < t0 {
            return Err(fail(format!(
                "the engine clock went back from {t0} to {t1} ms"
            )));
        }
        if t1 - t0 > MAX_WINDOW_MS {
            return Err(TestCaseError::reject(format!(
                "a call took {} ms, over {MAX_WINDOW_MS} ms",
                t1 - t0
            )));
        }
        if self
            .candidates
            .iter()
            .any(|m| !m.leases_due(Timestamp::from_millis(t1)).is_empty())
        {
            return Err(TestCaseError::reject(
                "a lease ran out during a call (a call slower than the guard)",
            ));
        }
        Ok(((t0, t1), out))
    }

    /// Waits out every lease due within the guard and reads its job, accepting the failed
    /// delivery at any time from the deadline to the read.
    async fn settle_expiries(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..5 {
            let now = self.now().await?;
            let mut due: Vec<(Topic, delayq_core::JobId, Timestamp)> = Vec::new();
            for m in &self.candidates {
                for d in m.leases_due(Timestamp::from_millis(now + GUARD_MS)) {
                    if !due.iter().any(|x| x.0 == d.0 && x.1 == d.1) {
                        due.push(d);
                    }
                }
            }
            let Some(latest) = due.iter().map(|d| d.2.as_millis()).max() else {
                return Ok(());
            };
            if latest >= now {
                tokio::time::sleep(ms(latest - now + 2)).await;
            }
            for (t, i, deadline) in due {
                let mut tries = 0;
                loop {
                    let t0 = self.now().await?;
                    let got = self.engine.get(&t, &i).await;
                    let t1 = self.now().await?;
                    let got = self.answer("get", got)?;
                    let still = matches!(&got, Ok(Some(j)) if j.state == JobState::Reserved
                        && j.deadline.is_some_and(|d| d.as_millis() <= t0));
                    if still && tries < 100 {
                        tries += 1;
                        tokio::time::sleep(ms(10)).await;
                        continue;
                    }
                    let lo = deadline.as_millis().min(t0);
                    self.step(
                        &format!(
                            "a lease of {t}/{i} ran out at {} ms; get",
                            deadline.as_millis()
                        ),
                        (lo, t1),
                        &got,
                        |m, at| {
                            m.expire_lease(&t, &i, at);
                            Ok(m.get(&t, &i, at))
                        },
                    )?;
                    self.totals.expiries += 1;
                    break;
                }
            }
        }
        Err(fail("leases kept falling due while waiting them out"))
    }

    fn lease(&self, pick: LeasePick) -> Option<Lease> {
        let forged = |t: u8, i: u8| Lease {
            topic: topic(t),
            id: id(i),
            token: LeaseToken(1_000_000 + u64::from(i)),
        };
        match pick {
            LeasePick::Held(c, k) => {
                let c = &self.clients[usize::from(c) % CLIENTS];
                if c.held.is_empty() {
                    return c.past.last().cloned().or(Some(forged(k % 2, k % 4)));
                }
                c.held.get(usize::from(k) % c.held.len()).cloned()
            }
            LeasePick::Past(c, k) => {
                let c = &self.clients[usize::from(c) % CLIENTS];
                if c.past.is_empty() {
                    return Some(forged(k % 2, k % 4));
                }
                c.past.get(usize::from(k) % c.past.len()).cloned()
            }
            LeasePick::Forged(t, i) => Some(forged(t, i)),
        }
    }

    /// The delivery `lease` ended (settled or refused): the clients holding it keep it as
    /// past.
    fn ended(&mut self, lease: &Lease) {
        for c in &mut self.clients {
            if let Some(k) = c.held.iter().position(|l| l == lease) {
                let l = c.held.remove(k);
                c.past.push(l);
                if c.past.len() > 8 {
                    c.past.remove(0);
                }
            }
        }
    }

    fn delivered(&mut self, client: u8, got: &[DeliveryView]) {
        self.totals.deliveries += got.len() as u64;
        let c = &mut self.clients[usize::from(client) % CLIENTS];
        c.held.extend(got.iter().filter_map(|d| d.lease.clone()));
    }

    async fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let e = self.engine;
        match op {
            Op::Push(spec) => self.push(std::slice::from_ref(spec), false).await,
            Op::PushBatch(specs) => self.push(specs, true).await,
            Op::Get(t, i) => {
                let (tt, i) = (topic(*t), id(*i));
                let (w, r) = self.timed(e.get(&tt, &i)).await?;
                let r = self.answer("get", r)?;
                self.step("get", w, &r, |m, now| Ok(m.get(&tt, &i, now)))
            }
            Op::Delete(t, i) => {
                let (tt, i) = (topic(*t), id(*i));
                let (w, r) = self.timed(e.delete(&tt, &i)).await?;
                let r = self.answer("delete", r)?;
                self.step("delete", w, &r, |m, _| Ok(m.delete(&tt, &i)))
            }
            Op::Reschedule(t, i, d) => {
                let (tt, i) = (topic(*t), id(*i));
                let when = Schedule::Delay(ms(u64::from(*d)));
                let (w, r) = self.timed(e.reschedule(&tt, &i, when)).await?;
                let r = self.answer("reschedule", r)?;
                self.step("reschedule", w, &r, |m, now| {
                    m.reschedule(&tt, &i, when, now)
                })
            }
            Op::Reserve {
                client,
                topics,
                max,
                wait_ms,
                at_most_once,
            } => {
                let mode = if *at_most_once {
                    DeliveryMode::AtMostOnce
                } else {
                    DeliveryMode::AtLeastOnce
                };
                let req = Reserve::topics(topics_of(*topics))
                    .max(usize::from(*max))
                    .wait(ms(u64::from(*wait_ms)))
                    .mode(mode);
                let (w, r) = self.timed(e.reserve(&req)).await?;
                let r = self.answer("reserve", r)?;
                let got: Vec<DeliveryView> = match r {
                    Ok(d) => d.iter().map(DeliveryView::from).collect(),
                    Err(refusal) => return Err(fail(format!("reserve refused: {refusal:?}"))),
                };
                self.reserve(w, &req, &got)?;
                self.delivered(*client, &got);
                Ok(())
            }
            Op::Settle {
                client,
                items,
                topics,
                max,
            } => self.settle(*client, items, *topics, *max).await,
            Op::Ack(p) => {
                let Some(l) = self.lease(*p) else {
                    return Ok(());
                };
                let (w, r) = self.timed(e.ack(&l)).await?;
                let r = self.answer("ack", r)?;
                self.step("ack", w, &r, |m, now| m.ack(&l, now))?;
                self.ended(&l);
                Ok(())
            }
            Op::Nack(p, d) => {
                let Some(l) = self.lease(*p) else {
                    return Ok(());
                };
                let nack = nack_of(*d);
                let (w, r) = self.timed(e.nack(&l, nack.clone())).await?;
                let r = self.answer("nack", r)?;
                self.step("nack", w, &r, |m, now| {
                    m.nack(&l, nack.delay, nack.reason.as_deref(), now)
                })?;
                self.ended(&l);
                Ok(())
            }
            Op::Release(p) => {
                let Some(l) = self.lease(*p) else {
                    return Ok(());
                };
                let (w, r) = self.timed(e.release(&l)).await?;
                let r = self.answer("release", r)?;
                self.step("release", w, &r, |m, now| m.release(&l, now))?;
                self.ended(&l);
                Ok(())
            }
            Op::Touch(p, s) => {
                let Some(l) = self.lease(*p) else {
                    return Ok(());
                };
                let ttr = s.map(|s| Duration::from_secs(u64::from(s)));
                let (w, r) = self.timed(e.touch(&l, ttr)).await?;
                let r = self.answer("touch", r)?;
                self.step("touch", w, &r, |m, now| m.touch(&l, ttr, now))?;
                if r.is_err() {
                    self.ended(&l);
                }
                Ok(())
            }
            Op::Bury(p) => {
                let Some(l) = self.lease(*p) else {
                    return Ok(());
                };
                let reason = Some("buried by the model".to_string());
                let (w, r) = self.timed(e.bury(&l, reason.clone())).await?;
                let r = self.answer("bury", r)?;
                self.step("bury", w, &r, |m, now| m.bury(&l, reason.as_deref(), now))?;
                self.ended(&l);
                Ok(())
            }
            Op::Kick(t, i) => {
                let (tt, i) = (topic(*t), id(*i));
                let (w, r) = self.timed(e.kick(&tt, &i)).await?;
                let r = self.answer("kick", r)?;
                self.step("kick", w, &r, |m, now| m.kick(&tt, &i, now))
            }
            Op::KickAll(t) => {
                let tt = topic(*t);
                let (w, r) = self.timed(e.kick_all(&tt)).await?;
                let r = self.answer("kick_all", r)?;
                self.step("kick_all", w, &r, |m, now| Ok(m.kick_all(&tt, now)))
            }
            Op::Purge(t) => {
                let tt = topic(*t);
                let (w, r) = self.timed(e.purge(&tt)).await?;
                let r = self.answer("purge", r)?;
                self.step("purge", w, &r, |m, _| Ok(m.purge(&tt)))
            }
            Op::Stats(t) => self.stats(topic(*t)).await,
            Op::List(t, state, limit) => self.list(topic(*t), *state, usize::from(*limit)).await,
            Op::Topics => {
                let (w, r) = self.timed(e.topics()).await?;
                let r = self.answer("topics", r)?;
                self.step("topics", w, &r, |m, _| Ok(m.topic_list()))
            }
            Op::Sleep(n) => {
                tokio::time::sleep(ms(u64::from(*n))).await;
                Ok(())
            }
            Op::ExpireLeases => {
                let now = self.now().await?;
                let latest = self
                    .candidates
                    .iter()
                    .flat_map(|m| m.leases_due(Timestamp::NEVER))
                    .map(|d| d.2.as_millis())
                    .max();
                if let Some(latest) = latest
                    && latest >= now
                {
                    tokio::time::sleep(ms((latest - now + 2).min(5_000))).await;
                }
                Ok(())
            }
        }
    }

    async fn push(&mut self, specs: &[JobSpec], batch: bool) -> Result<(), TestCaseError> {
        let jobs: Vec<NewJob> = specs.iter().map(JobSpec::new_job).collect();
        let e = self.engine;
        let (w, r) = if batch {
            self.timed(e.push_batch(jobs.clone())).await?
        } else {
            let (w, r) = self.timed(e.push(jobs[0].clone())).await?;
            (w, r.map(|p| vec![p]))
        };
        let r = self.answer("push", r)?;
        match check_push_batch(&jobs, &Limits::default()) {
            Err(refused) => {
                let want = Refusal::of(&refused);
                if r.as_ref().err() != want.as_ref() {
                    return Err(fail(format!(
                        "push of an invalid batch: the engine answered {r:?}, the contract {want:?}"
                    )));
                }
                Ok(())
            }
            Ok(()) => {
                let pushed = r.map_err(|e| fail(format!("push refused a valid batch: {e:?}")))?;
                if pushed.len() != jobs.len() {
                    return Err(fail(format!(
                        "push answered {} results for {} jobs",
                        pushed.len(),
                        jobs.len()
                    )));
                }
                for (job, p) in jobs.iter().zip(&pushed) {
                    self.step("push", w, p, |m, now| m.push(job, now))?;
                }
                Ok(())
            }
        }
    }

    /// Matches a reserve's deliveries: each topic's pass at its own time, the passes in the
    /// order of some rotation of the topics.
    fn reserve(
        &mut self,
        w: (u64, u64),
        req: &Reserve,
        got: &[DeliveryView],
    ) -> Result<(), TestCaseError> {
        let n = req.topics.len();
        let saved = self.candidates.clone();
        let mut survivors: Vec<Model> = Vec::new();
        let mut why = String::new();
        for r in 0..n {
            let order: Vec<&Topic> = (0..n).map(|k| &req.topics[(r + k) % n]).collect();
            let groups: Vec<Vec<DeliveryView>> = order
                .iter()
                .map(|t| got.iter().filter(|d| &d.job.topic == *t).cloned().collect())
                .collect();
            if groups.concat() != got {
                why = format!("the deliveries are not grouped by topic in the order {order:?}");
                continue;
            }
            self.candidates = saved.clone();
            let mut left = req.max;
            let mut ok = true;
            for (t, g) in order.iter().zip(&groups) {
                if left == 0 {
                    ok = g.is_empty();
                    break;
                }
                let tokens: Vec<LeaseToken> = g
                    .iter()
                    .filter_map(|d| d.lease.as_ref().map(|l| l.token))
                    .collect();
                let want: Result<Vec<DeliveryView>, TokenOutOfOrder> = Ok(g.clone());
                if let Err(e) = self.step(&format!("reserve from {t}"), w, &want, |m, now| {
                    m.reserve_pass(t, left, req.mode, now, &tokens)
                }) {
                    why = e.to_string();
                    ok = false;
                    break;
                }
                left -= g.len();
            }
            if ok {
                for m in self.candidates.drain(..) {
                    if !survivors.contains(&m) {
                        survivors.push(m);
                    }
                }
            }
        }
        if survivors.is_empty() {
            self.candidates = saved;
            return Err(fail(format!(
                "reserve of {:?} (max {}): {why}",
                req.topics, req.max
            )));
        }
        self.candidates = survivors;
        Ok(())
    }

    async fn settle(
        &mut self,
        client: u8,
        items: &[(LeasePick, SettleKind)],
        mask: u8,
        max: u8,
    ) -> Result<(), TestCaseError> {
        let mut settle = Vec::new();
        for (p, kind) in items {
            let Some(l) = self.lease(*p) else { continue };
            settle.push(match kind {
                SettleKind::Ack => Settle::Ack(l),
                SettleKind::Nack(d) => Settle::Nack(l, nack_of(*d)),
                SettleKind::Bury => Settle::Bury(l, Some("buried by the model".into())),
                SettleKind::Release => Settle::Release(l),
            });
        }
        let req = Reserve::topics(topics_of(mask)).max(usize::from(max));
        let e = self.engine;
        let (w, r) = self.timed(e.settle_and_reserve(&settle, &req)).await?;
        let r = self.answer("settle_and_reserve", r)?;
        let out = r.map_err(|e| fail(format!("settle_and_reserve refused: {e:?}")))?;
        if out.settled.len() != settle.len() {
            return Err(fail(format!(
                "settle_and_reserve answered {} settlements for {}",
                out.settled.len(),
                settle.len()
            )));
        }
        for (s, r) in settle.iter().zip(out.settled) {
            let r = self.answer("a settlement", r)?;
            self.step(&format!("settle {}", s.operation()), w, &r, |m, now| {
                m.settle(s, now)
            })?;
            self.ended(s.lease());
        }
        let got: Vec<DeliveryView> = out.deliveries.iter().map(DeliveryView::from).collect();
        if max == 0 {
            if !got.is_empty() {
                return Err(fail(format!("a settle-only call delivered {got:?}")));
            }
            return Ok(());
        }
        self.reserve(w, &req, &got)?;
        self.delivered(client, &got);
        Ok(())
    }

    async fn stats(&mut self, t: Topic) -> Result<(), TestCaseError> {
        let (w, r) = self.timed(self.engine.stats(&t)).await?;
        let r = self.answer("stats", r)?;
        self.step(&format!("stats of {t}"), w, &r, |m, now| {
            Ok(m.stats(&t, now))
        })
    }

    async fn list(&mut self, t: Topic, state: JobState, limit: usize) -> Result<(), TestCaseError> {
        let (w, r) = self.timed(self.engine.list(&t, state, limit, None)).await?;
        let r = self.answer("list", r)?;
        let r = r.map(|p| (p.jobs, p.next.is_some()));
        self.step(
            &format!("list {state} of {t} (limit {limit})"),
            w,
            &r,
            |m, now| Ok(m.list(&t, state, limit, now)),
        )
    }

    /// Every job, listing and stats of both topics.
    async fn compare_all(&mut self) -> Result<(), TestCaseError> {
        for t in 0..TOPICS.len() as u8 {
            for i in 0..IDS.len() as u8 {
                self.apply(&Op::Get(t, i)).await?;
            }
            for state in [
                JobState::Delayed,
                JobState::Ready,
                JobState::Reserved,
                JobState::Dead,
            ] {
                self.list(topic(t), state, 100).await?;
            }
            self.stats(topic(t)).await?;
        }
        self.apply(&Op::Topics).await
    }
}

fn nack_of(delay: Option<u16>) -> Nack {
    Nack {
        delay: delay.map(|d| ms(u64::from(d))),
        reason: delay.map(|d| format!("failed, retry in {d} ms")),
    }
}

fn context(e: TestCaseError, i: usize, op: &Op) -> TestCaseError {
    match e {
        TestCaseError::Fail(m) => fail(format!("op {i} {op:?}: {m}")),
        other => other,
    }
}
