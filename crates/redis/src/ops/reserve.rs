//! Reserve and settle-and-reserve: the `reserve` function's arguments (the settlements of
//! its partition, then how many jobs), the decoding of its reply (clock, next event, the
//! settlements' answers, the deliveries) and the long-poll around it. A reserve looks at the
//! partitions of its topics in turn: the topics rotating, each topic's partitions from a
//! random one, so that workers spread over the partitions and none is always last.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use delayq_core::limits::delay_ms_ceil;
use delayq_core::{
    Delivery, DeliveryMode, Error, Lease, LeaseToken, NackOutcome, Reserve, Result, Settle,
    Settled, SettledAndReserved, Timestamp, detach_lease,
};
use rand::Rng;
use redis::{Cmd, Value};

use super::lease::ack_args;
use super::{Ops, refused, settle_calls};
use crate::codec::{self, Status, decode_deliveries};
use crate::keys::Part;
use crate::library;

/// How long after a long-poll over a topic ended with nothing the next call's first pass
/// counts the topic as quiet ([`Look::First`]): a worker calls again at once.
const QUIET_GAP: Duration = Duration::from_secs(2);

/// Which partitions a pass looks at.
pub(crate) enum Look {
    /// Every partition of every topic: a safety wake, a give-back.
    All,
    /// A call's first pass: every partition, except on a topic whose last long-poll in this
    /// process ended with nothing less than [`QUIET_GAP`] ago: one partition of it, a random
    /// one. That poll watched every partition's wake key all along; what became due since
    /// has left a signal (held in the key until a waiter takes it, and handed back by a
    /// waiter that leaves knowing of it), which this call's wait takes at once. So an idle
    /// worker costs what it costs on a topic of one partition, and the random look finds,
    /// within a few calls, what a signal lost with a crashed process left behind.
    First,
    /// The partition a waiter was woken for: its event is due, or a signal came; the other
    /// partitions have timers and signals of their own.
    Woken(Part),
}

/// What one reserve call said of its partition: Redis's clock and the next event.
pub(crate) struct Observation {
    part: Part,
    now_us: u64,
    next: Option<u64>,
    received: Instant,
}

/// The kind codes of lib.lua's `settle` (`S_NACK, S_BURY, S_RELEASE`); acks are not sent
/// with a kind (`None`): they go in a run of their own.
fn settle_kind(s: &Settle) -> Option<u8> {
    match s {
        Settle::Ack(_) => None,
        Settle::Nack(..) => Some(2),
        Settle::Bury(..) => Some(3),
        Settle::Release(_) => Some(4),
    }
}

/// The settlements `idx` (positions in `settle`) in the order the reserve function takes
/// and answers them: the acks, then the others, each in their given order.
fn function_order(settle: &[Settle], idx: &[usize]) -> Vec<usize> {
    let (acks, others): (Vec<usize>, Vec<usize>) = idx
        .iter()
        .partition(|&&i| settle_kind(&settle[i]).is_none());
    acks.into_iter().chain(others).collect()
}

/// The answer to one settlement: its status and value in the reserve function's reply (a
/// nack's new due time, or -1 when the job went dead; a refusal's state code).
fn answer(s: &Settle, status: &Value, value: &Value) -> Result<Result<Settled>> {
    let (status, state) = codec::settle_status(status)?;
    Ok(match status {
        Status::Ok => Ok(match s {
            Settle::Ack(_) => Settled::Acked,
            Settle::Bury(..) => Settled::Buried,
            Settle::Release(_) => Settled::Released,
            Settle::Nack(..) => Settled::Nacked(match codec::opt_uint(value)? {
                Some(ms) => NackOutcome::Retry {
                    ready_at: Timestamp::from_millis(ms),
                },
                None => NackOutcome::Dead,
            }),
        }),
        // An ack's refusal carries its state in the status value; the others' in the value.
        refusal => {
            let state = if state != 0 {
                state
            } else {
                codec::int(value)?
            };
            Err(refused(s.lease(), s.operation(), (refusal, state)))
        }
    })
}

impl Ops {
    /// A reserve function call on `part` for up to `want` jobs (0: settle only), carrying the
    /// settlements of that partition, in `function_order` and with no lease twice.
    pub(crate) fn reserve_invocation(
        &self,
        part: &Part,
        want: usize,
        mode: DeliveryMode,
        settle: &[&Settle],
    ) -> Cmd {
        let mut inv = self.fcall(library::RESERVE, part);
        inv.arg(want)
            .arg(u8::from(mode == DeliveryMode::AtMostOnce))
            .arg(self.tick_batch);
        let (acks, others): (Vec<&Settle>, Vec<&Settle>) =
            settle.iter().partition(|s| settle_kind(s).is_none());
        inv.arg(acks.len());
        ack_args(&mut inv, acks.iter().map(|s| s.lease()));
        inv.arg(others.len());
        for s in others {
            let (lease, delay, reason) = match s {
                Settle::Ack(l) | Settle::Release(l) => (l, None, None),
                Settle::Nack(l, n) => (l, Some(n.delay), n.reason.as_deref()),
                Settle::Bury(l, r) => (l, None, r.as_deref()),
            };
            let delay = match delay.flatten() {
                Some(d) => delay_ms_ceil(d).to_string(),
                None => "-1".to_string(),
            };
            inv.arg(settle_kind(s).unwrap_or_default())
                .arg(lease.id.as_str())
                .arg(lease.token.0)
                .arg(delay)
                .arg(reason.unwrap_or(""));
        }
        inv
    }

    /// Decodes a reserve function's reply: what it said of the partition's next event, the
    /// answers to its settlements (`settle[idx[k]]` is its k-th, in `function_order`,
    /// answered into `settled[idx[k]]`) and its jobs as deliveries.
    fn take_reserve_reply(
        part: &Part,
        mode: DeliveryMode,
        (reply, received): (Vec<Value>, Instant),
        (settle, idx): (&[Settle], &[usize]),
        settled: &mut [Option<Result<Settled>>],
    ) -> Result<(Observation, Vec<Delivery>)> {
        if reply.len() < 5 {
            return Err(Error::Internal("short reserve reply".into()));
        }
        let now_us = codec::uint(&reply[0])?;
        let next = codec::opt_uint(&reply[1])?;
        let (a, s) = (
            codec::uint(&reply[3])? as usize,
            codec::uint(&reply[4])? as usize,
        );
        let jobs_at = 5 + a + 2 * s;
        if a + s != idx.len() || reply.len() < jobs_at {
            return Err(Error::Internal(
                "reserve reply has the wrong number of settlements".into(),
            ));
        }
        // The acks answer a status each, the others a status and a value.
        for (k, &i) in idx.iter().enumerate() {
            let (status, value) = if k < a {
                (&reply[5 + k], &Value::Int(0))
            } else {
                let at = 5 + a + 2 * (k - a);
                (&reply[at], &reply[at + 1])
            };
            settled[i] = Some(answer(&settle[i], status, value)?);
        }
        let topic = part.topic();
        let jobs = decode_deliveries(
            topic,
            now_us / 1000,
            mode == DeliveryMode::AtLeastOnce,
            reply.into_iter().skip(jobs_at).collect(),
        )?;
        let deliveries = jobs
            .into_iter()
            .map(|(job, token)| {
                let lateness =
                    Duration::from_micros(now_us.saturating_sub(job.ready_at.as_millis() * 1000));
                let lease = (mode == DeliveryMode::AtLeastOnce).then(|| Lease {
                    topic: topic.clone(),
                    id: job.id.clone(),
                    token: LeaseToken(token),
                });
                Delivery {
                    job,
                    lease,
                    lateness,
                }
            })
            .collect();
        let seen = Observation {
            part: part.clone(),
            now_us,
            next,
            received,
        };
        Ok((seen, deliveries))
    }

    /// The partitions `req` looks at, in the order of one pass: its topics from the next in
    /// rotation, each topic's partitions from a random one; only that one for a topic this
    /// process found quiet ([`Look::First`]); only the partition a waiter was woken for
    /// ([`Look::Woken`]).
    async fn pass_order(&self, req: &Reserve, look: &Look) -> Result<Vec<Part>> {
        if let Look::Woken(part) = look {
            return Ok(vec![part.clone()]);
        }
        let quiet: Vec<bool> = {
            let marks = self.quiet.lock().unwrap_or_else(|e| e.into_inner());
            req.topics
                .iter()
                .map(|t| {
                    matches!(look, Look::First)
                        && !req.wait.is_zero()
                        && marks.get(t).is_some_and(|at| at.elapsed() < QUIET_GAP)
                })
                .collect()
        };
        let n = req.topics.len();
        let start = self.rotate.fetch_add(1, Ordering::Relaxed) % n;
        let mut order = Vec::new();
        for k in 0..n {
            let parts = self.parts(&req.topics[(start + k) % n]).await?;
            let from = rand::rng().random_range(0..parts.len());
            let all = parts[from..].iter().chain(&parts[..from]).cloned();
            if quiet[(start + k) % n] {
                order.extend(all.take(1));
            } else {
                order.extend(all);
            }
        }
        Ok(order)
    }

    /// Marks `req`'s topics quiet (its long-poll ended with nothing) or not (it brought
    /// jobs), for the next call's first pass ([`Look::First`]).
    fn mark_quiet(&self, req: &Reserve, quiet: bool) {
        let mut marks = self.quiet.lock().unwrap_or_else(|e| e.into_inner());
        for t in &req.topics {
            if quiet {
                marks.insert(t.clone(), Instant::now());
            } else {
                marks.remove(t);
            }
        }
    }

    /// One pass over the partitions of the topics ([`Ops::pass_order`], as `look` says),
    /// without waiting, after settling `settle`. The first round trip is one pipeline: a settle-only call for
    /// each other partition that has settlements, then the first partition's call, which
    /// settles that partition's leases and reserves. With `req.max == 0` it only settles.
    /// Also answers what each reserve said of its partition's next event, for a waiter that
    /// registers after this pass.
    pub(crate) async fn reserve_once(
        &self,
        req: &Reserve,
        settle: &[Settle],
        look: &Look,
    ) -> Result<(Vec<Delivery>, Vec<Observation>, Vec<Result<Settled>>)> {
        let order = self.pass_order(req, look).await?;
        let first = order
            .first()
            .ok_or_else(|| Error::Internal("a reserve with no partition".into()))?;
        let mut settled: Vec<Option<Result<Settled>>> = settle.iter().map(|_| None).collect();
        let mut groups: BTreeMap<Part, Vec<usize>> = BTreeMap::new();
        for (i, s) in settle.iter().enumerate() {
            let l = s.lease();
            groups
                .entry(self.part_of(&l.topic, &l.id).await?)
                .or_default()
                .push(i);
        }
        let mut out = Vec::new();
        let mut seen = Vec::new();

        // The first round trip: every settlement (settle-only calls), and the first
        // partition's reserve, which carries that partition's settlements when one call
        // holds them all.
        let mut calls: Vec<(&Part, usize, Vec<usize>)> = Vec::new();
        let mut rides = false;
        for (part, idx) in &groups {
            let split = settle_calls(|i| settle[i].lease(), idx);
            if part == first && split.len() == 1 && req.max > 0 {
                rides = true;
                continue;
            }
            calls.extend(
                split
                    .into_iter()
                    .map(|call| (part, 0, function_order(settle, &call))),
            );
        }
        if req.max > 0 {
            let carried = match (rides, groups.get(first)) {
                (true, Some(idx)) => function_order(settle, idx),
                _ => Vec::new(),
            };
            calls.push((first, req.max, carried));
        }
        if !calls.is_empty() {
            let invs: Vec<Cmd> = calls
                .iter()
                .map(|(p, want, idx)| {
                    let of: Vec<&Settle> = idx.iter().map(|&i| &settle[i]).collect();
                    self.reserve_invocation(p, *want, req.mode, &of)
                })
                .collect();
            let replies = self.conn.pipeline(&invs, "settling and reserving").await?;
            let received = Instant::now();
            for ((part, want, idx), reply) in calls.iter().zip(replies) {
                let reply = codec::array(reply)?;
                let (o, ds) = Self::take_reserve_reply(
                    part,
                    req.mode,
                    (reply, received),
                    (settle, idx),
                    &mut settled,
                )?;
                if *want > 0 {
                    self.waiters.observe(part, o.now_us, o.next, o.received);
                    seen.push(o);
                    out.extend(ds);
                }
            }
        }
        let settled = settled
            .into_iter()
            .map(|s| s.unwrap_or_else(|| Err(Error::Internal("a settlement got no answer".into()))))
            .collect();
        if req.max == 0 {
            return Ok((out, seen, settled));
        }

        for part in order.iter().skip(1) {
            let want = req.max - out.len();
            if want == 0 {
                break;
            }
            let inv = self.reserve_invocation(part, want, req.mode, &[]);
            let reply = match self
                .conn
                .call(&inv, "reserving")
                .await
                .and_then(codec::array)
            {
                Ok(r) => r,
                // Jobs already taken from earlier partitions are leased (or removed): hand
                // them out rather than drop them; the caller sees the failure on its next
                // call.
                Err(e) if !out.is_empty() => {
                    tracing::warn!(partition = %part, error = %e, "reserve failed on one partition; returning what the others gave");
                    break;
                }
                Err(e) => return Err(e),
            };
            let received = Instant::now();
            let (o, ds) =
                Self::take_reserve_reply(part, req.mode, (reply, received), (&[], &[]), &mut [])?;
            self.waiters.observe(part, o.now_us, o.next, o.received);
            seen.push(o);
            out.extend(ds);
        }
        Ok((out, seen, settled))
    }

    /// [`Ops::reserve_once`] in a task of its own ([`detach_lease`]): when the caller is
    /// dropped while the call is on its way, the jobs it leased are released at once
    /// instead of waiting for their ttr with no one holding them.
    async fn reserve_detached(
        self: &Arc<Self>,
        req: &Reserve,
        settle: &[Settle],
        look: Look,
    ) -> Result<(Vec<Delivery>, Vec<Observation>, Vec<Result<Settled>>)> {
        let (ops, back) = (Arc::clone(self), Arc::clone(self));
        let (req, settle) = (req.clone(), settle.to_vec());
        let give_back = Reserve {
            max: 0,
            wait: Duration::ZERO,
            ..req.clone()
        };
        detach_lease(
            async move { ops.reserve_once(&req, &settle, &look).await },
            |(deliveries, _, _)| deliveries,
            move |leases: Vec<Lease>| async move {
                let releases: Vec<Settle> = leases.into_iter().map(Settle::Release).collect();
                back.reserve_once(&give_back, &releases, &Look::All)
                    .await
                    .map(|_| ())
            },
        )
        .await
    }

    /// Settles `settle` and reserves with `req`'s long-poll: the settlements go in the first
    /// pass only; a later pass (after a wake) just reserves. Each pass runs detached
    /// ([`Ops::reserve_detached`]), so that dropping this future at any point strands no job.
    pub(crate) async fn settle_then_reserve(
        self: &Arc<Self>,
        settle: &[Settle],
        req: &Reserve,
    ) -> Result<SettledAndReserved> {
        let deadline = Instant::now() + req.wait;
        let (first, seen, settled) = self.reserve_detached(req, settle, Look::First).await?;
        let answer = |deliveries: Vec<Delivery>| {
            if req.max > 0 && !req.wait.is_zero() {
                self.mark_quiet(req, deliveries.is_empty());
            }
            SettledAndReserved {
                settled,
                deliveries,
            }
        };
        if !first.is_empty() || req.wait.is_zero() || req.max == 0 {
            return Ok(answer(first));
        }
        // Only a reserver that found nothing registers, so busy workers never involve the
        // waker. It starts from what its first pass learnt of each partition's next event; a
        // signal sent meanwhile is still in its wake key.
        let mut parts = Vec::new();
        for t in &req.topics {
            parts.extend(self.parts(t).await?.iter().cloned());
        }
        let guard = self.waiters.register(&parts);
        for o in seen {
            self.waiters.observe(&o.part, o.now_us, o.next, o.received);
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(answer(Vec::new()));
            }
            // The safety wake, never sooner than configured and jittered later, so that many
            // idle processes do not look in step, and a caller whose wait is no longer than
            // the safety interval never pays for it (its next call's first pass looks).
            let jitter = rand::rng().random_range(1.0..1.4);
            let safety = now + self.safety_wake.mul_f64(jitter);
            let until = deadline.min(safety);
            // Woken for one partition (its event is due, or a signal came): look there only;
            // the others have timers and signals of their own. The safety wake looks at all.
            let look = tokio::select! {
                part = guard.notified() => Look::Woken(part),
                _ = tokio::time::sleep_until(until.into()) => {
                    if until == deadline {
                        return Ok(answer(Vec::new()));
                    }
                    Look::All
                }
            };
            let (out, _, _) = self.reserve_detached(req, &[], look).await?;
            if !out.is_empty() {
                return Ok(answer(out));
            }
        }
    }
}
