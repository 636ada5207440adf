//! Reserve and settle-and-reserve: the `reserve` function's arguments (the settlements of
//! its partition, then how many jobs), the decoding of its reply (clock, next event, the
//! settlements' answers, the deliveries) and the long-poll around it. A reserve looks at the
//! partitions of its topics in turn: the topics rotating, each topic's partitions from a
//! random one, so that workers spread over the partitions and none is always last.
//!
//! The file is long because the long-poll, the rotation over topics and partitions and the
//! passes over a cluster's slots share one pass's state; apart, each would need the others'.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use delayq_core::limits::delay_ms_ceil;
use delayq_core::{
    Delivery, DeliveryMode, Error, Lease, LeaseToken, NackOutcome, Reserve, Result, Settle,
    Settled, SettledAndReserved, Timestamp, Topic, detach_lease,
};
use rand::Rng;
use redis::{Cmd, Value};
use tokio::sync::oneshot;

use super::lease::ack_args;
use super::{LAYOUT_TTL, Ops, refused, settle_calls};
use crate::codec::{self, Status, decode_deliveries};
use crate::conn::{Among, SlotAnswer};
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

/// The settlements of the calls `at` (positions in `calls`, whose third field holds each
/// call's settlements) whose slot failed with `e`: each answers its own copy of `e`.
fn answer_failed(
    at: &[usize],
    calls: &[(&Part, usize, Vec<usize>)],
    e: &Error,
    settled: &mut [Option<Result<Settled>>],
) {
    for &c in at {
        for &i in &calls[c].2 {
            settled[i] = Some(Err(e.copy_for_another()));
        }
    }
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
            let topic = &req.topics[(start + k) % n];
            let Some(parts) = self.reserve_parts(topic, n > 1).await? else {
                continue;
            };
            let from = rand::rng().random_range(0..parts.len());
            let all = parts[from..].iter().chain(&parts[..from]).cloned();
            if quiet[(start + k) % n] {
                order.extend(all.take(1));
            } else {
                order.extend(all);
            }
        }
        if order.is_empty() {
            return Err(Error::unavailable(
                "reserving: the primaries that hold the topics' settings did not answer in time; retry",
                std::io::Error::from(std::io::ErrorKind::TimedOut),
            ));
        }
        Ok(order)
    }

    /// The error of a call on `topic` (`what`) whose partition count [`Ops::reserve_parts`]
    /// could not give: its home slot is skipped as unreachable.
    pub(super) fn home_skipped(&self, topic: &Topic, what: &str) -> Error {
        let home = self.conn.slot(&self.keys.wake(&Part::whole(topic)));
        self.conn.skipped(home.unwrap_or_default(), what)
    }

    /// The partitions of `topic` for a reserve ([`Ops::parts`]: the count read at most once
    /// a minute). On a cluster, a read of the count waits at most the slot timeout when the
    /// reserve has something else to serve: the count read before (a count changes only
    /// while its topic is empty, and a push checks it), or other topics (`others`). A topic
    /// whose home slot does not answer keeps the count read before, or is skipped (`None`)
    /// when there was none. On one node, [`Ops::parts`].
    pub(super) async fn reserve_parts(
        &self,
        topic: &Topic,
        others: bool,
    ) -> Result<Option<Arc<[Part]>>> {
        if !self.conn.is_cluster() {
            return self.parts(topic).await.map(Some);
        }
        let known = self
            .layouts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)
            .map(|l| (l.parts.clone(), l.read.elapsed() < LAYOUT_TTL));
        let stale = match known {
            Some((parts, true)) => return Ok(Some(parts)),
            Some((parts, false)) => Some(parts),
            None if others => None,
            None => return self.parts(topic).await.map(Some),
        };
        let home = self.conn.slot(&self.keys.wake(&Part::whole(topic)));
        if home.is_some_and(|s| self.conn.unreachable(s)) {
            return Ok(stale);
        }
        // A home slot that does not answer in time is marked as a reserve call's would be,
        // so that the pass (and its other topics on that primary) does not wait on it again.
        match tokio::time::timeout(self.conn.slot_timeout(), self.read_parts(topic)).await {
            Ok(Ok(parts)) => Ok(Some(parts)),
            Ok(Err(e)) => {
                tracing::debug!(topic = %topic, error = %e, "cannot read a topic's partition count; using what was known");
                if let (Error::Unavailable { .. }, Some(slot)) = (&e, home) {
                    self.conn.mark_unreachable(slot);
                }
                Ok(stale)
            }
            Err(_) => {
                tracing::debug!(topic = %topic, "reading a topic's partition count timed out; using what was known");
                if let Some(slot) = home {
                    self.conn.mark_unreachable(slot);
                }
                Ok(stale)
            }
        }
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
    /// without waiting, after settling `settle`. The first round trip is one pipeline: a
    /// settle-only call for each other partition that has settlements, then the first
    /// partition's call, which settles that partition's leases and reserves. Then the other
    /// partitions in turn, while jobs are wanted. With `req.max == 0` it only settles.
    /// Also answers what each reserve said of its partition's next event, for a waiter that
    /// registers after this pass.
    ///
    /// On a Redis Cluster, when the topics (or the settlements) lie in several hash slots,
    /// the first round trip is one pipeline per slot, concurrently, and every call waits for
    /// its slot at most the slot timeout (`Conn::per_slot`, `Conn::bounded`): a slot that
    /// fails or does not answer in time is skipped for this pass (its settlements answer its
    /// error, each its own), and so are the other slots of its primary (its shard), which
    /// would only wait again: a dead or hung primary costs a pass one slot timeout, however
    /// many of its slots the request's topics lie in. Later passes skip them too, while the
    /// shard's probe gets no answer (`conn/probe.rs`), unless all of the request's slots
    /// are unreachable, when they ask each primary again, once. The jobs a timed-out call
    /// leases when it runs late are given back ([`Ops::give_back_late`]). The pass fails
    /// only when no slot answered.
    pub(crate) async fn reserve_once(
        self: &Arc<Self>,
        req: &Reserve,
        settle: &[Settle],
        look: &Look,
    ) -> Result<(Vec<Delivery>, Vec<Observation>, Vec<Result<Settled>>)> {
        let began = Instant::now();
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
        // Over several cluster slots each slot answers for itself (see above); `failed` keeps
        // the first slot's error, answered when no slot answered.
        let slots = self.request_slots(req, groups.keys()).await?;
        let spread = slots.len() > 1;
        let skip = spread && !slots.iter().all(|&s| self.conn.unreachable(s));
        let mut failed: Option<Error> = None;
        let mut answered = false;

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
            const WHAT: &str = "settling and reserving";
            let answers = if spread {
                self.conn
                    .per_slot(&invs, WHAT, Among::MoreSlots { skip })
                    .await
            } else {
                let replies = self.conn.pipeline(&invs, WHAT).await?;
                vec![((0..invs.len()).collect(), SlotAnswer::Replied(replies))]
            };
            let received = Instant::now();
            for (at, answer) in answers {
                let replies = match answer {
                    SlotAnswer::Replied(replies) => replies,
                    SlotAnswer::Failed(e) => {
                        answer_failed(&at, &calls, &e, &mut settled);
                        failed.get_or_insert(e);
                        continue;
                    }
                    SlotAnswer::Late(e, late) => {
                        // The slot's reserve (settle-only calls lease nothing) may run late.
                        if let Some(pos) = at.iter().position(|&c| calls[c].1 > 0) {
                            let (part, _, idx) = &calls[at[pos]];
                            let call = (settle.to_vec(), idx.clone(), pos);
                            self.give_back_late((*part).clone(), req.mode, call, late);
                        }
                        answer_failed(&at, &calls, &e, &mut settled);
                        failed.get_or_insert(e);
                        continue;
                    }
                };
                answered = true;
                for (&c, reply) in at.iter().zip(replies) {
                    let (part, want, idx) = &calls[c];
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
        }
        let settled = settled
            .into_iter()
            .map(|s| s.unwrap_or_else(|| Err(Error::Internal("a settlement got no answer".into()))))
            .collect();
        if req.max == 0 {
            return match failed {
                Some(e) if !answered => Err(e),
                _ => Ok((out, seen, settled)),
            };
        }

        for part in order.iter().skip(1) {
            let want = req.max - out.len();
            if want == 0 {
                break;
            }
            let inv = self.reserve_invocation(part, want, req.mode, &[]);
            let reply = if let (true, Some(slot)) = (spread, self.conn.slot(&self.keys.wake(part)))
            {
                // Over several slots: a slot that fails or is slow is skipped, and so are the
                // other slots of its primary (`Conn::unreachable`); when every slot was
                // unreachable as the pass began, it asks each primary again, once.
                if (skip && self.conn.unreachable(slot)) || self.conn.unreachable_since(slot, began)
                {
                    failed.get_or_insert_with(|| self.conn.skipped(slot, "reserving"));
                    continue;
                }
                match self.conn.bounded(slot, vec![inv], "reserving").await {
                    SlotAnswer::Replied(replies) => match replies.into_iter().next() {
                        Some(reply) => codec::array(reply)?,
                        None => return Err(Error::Internal("a reserve got no reply".into())),
                    },
                    SlotAnswer::Failed(e) => {
                        tracing::debug!(partition = %part, error = %e, "reserve failed on one slot; the others are served");
                        failed.get_or_insert(e);
                        continue;
                    }
                    SlotAnswer::Late(e, late) => {
                        tracing::debug!(partition = %part, error = %e, "reserve timed out on one slot; the others are served");
                        self.give_back_late(
                            part.clone(),
                            req.mode,
                            (Vec::new(), Vec::new(), 0),
                            late,
                        );
                        failed.get_or_insert(e);
                        continue;
                    }
                }
            } else {
                match self
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
                }
            };
            answered = true;
            let received = Instant::now();
            let (o, ds) =
                Self::take_reserve_reply(part, req.mode, (reply, received), (&[], &[]), &mut [])?;
            self.waiters.observe(part, o.now_us, o.next, o.received);
            seen.push(o);
            out.extend(ds);
        }
        match failed {
            Some(e) if !answered => Err(e),
            _ => Ok((out, seen, settled)),
        }
    }

    /// The cluster hash slots a reserve over `req`'s topics, settling leases of `settling`,
    /// may call: empty on one node.
    async fn request_slots(
        &self,
        req: &Reserve,
        settling: impl Iterator<Item = &Part>,
    ) -> Result<BTreeSet<u16>> {
        let mut slots = BTreeSet::new();
        if !self.conn.is_cluster() {
            return Ok(slots);
        }
        for t in &req.topics {
            let Some(parts) = self.reserve_parts(t, req.topics.len() > 1).await? else {
                continue;
            };
            for p in parts.iter() {
                slots.extend(self.conn.slot(&self.keys.wake(p)));
            }
        }
        for p in settling {
            slots.extend(self.conn.slot(&self.keys.wake(p)));
        }
        Ok(slots)
    }

    /// A reserve call on `part` that did not answer within the slot timeout was sent and may
    /// still run when its primary answers again. When its late reply (the replies of its
    /// slot's pipeline, `late`; the call at `pos`, which carried the settlements `idx` of
    /// `settle`) leased jobs, they are released at once, as for a caller that went away
    /// ([`detach_lease`]), rather than left to their ttr. A late reply that never comes
    /// (the call failed after all, or outlived the response timeout) leases nothing this can
    /// see: such jobs come back when their ttr runs out.
    fn give_back_late(
        self: &Arc<Self>,
        part: Part,
        mode: DeliveryMode,
        (settle, idx, pos): (Vec<Settle>, Vec<usize>, usize),
        late: oneshot::Receiver<Result<Vec<Value>>>,
    ) {
        let ops = Arc::clone(self);
        tokio::spawn(async move {
            let Ok(Ok(replies)) = late.await else {
                return;
            };
            let Some(reply) = replies.into_iter().nth(pos) else {
                return;
            };
            let mut scratch: Vec<Option<Result<Settled>>> = settle.iter().map(|_| None).collect();
            let decoded = codec::array(reply).and_then(|reply| {
                Self::take_reserve_reply(
                    &part,
                    mode,
                    (reply, Instant::now()),
                    (&settle, &idx),
                    &mut scratch,
                )
            });
            let deliveries = match decoded {
                Ok((_, deliveries)) => deliveries,
                Err(e) => {
                    tracing::warn!(partition = %part, error = %e, "cannot read the late reply of a reserve that timed out; its jobs come back when their ttr runs out");
                    return;
                }
            };
            let mut releases = Vec::new();
            for d in deliveries {
                match d.lease {
                    Some(lease) => releases.push(Settle::Release(lease)),
                    None => {
                        tracing::error!(topic = %d.job.topic, id = %d.job.id, "an at-most-once job was taken by a reserve that timed out on its slot: it is lost")
                    }
                }
            }
            if releases.is_empty() {
                return;
            }
            let of: Vec<&Settle> = releases.iter().collect();
            let inv = ops.reserve_invocation(&part, 0, mode, &of);
            match ops
                .conn
                .call(&inv, "giving back the jobs of a reserve that timed out")
                .await
            {
                Ok(_) => {
                    tracing::debug!(partition = %part, jobs = releases.len(), "gave back the jobs a reserve leased after its slot timed out")
                }
                Err(e) => {
                    tracing::warn!(partition = %part, jobs = releases.len(), error = %e, "could not give back the jobs a reserve leased after its slot timed out: they come back when their ttr runs out")
                }
            }
        });
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
            if let Some(p) = self.reserve_parts(t, req.topics.len() > 1).await? {
                parts.extend(p.iter().cloned());
            }
        }
        let guard = self.waiters.register(&parts);
        for o in seen {
            self.waiters.observe(&o.part, o.now_us, o.next, o.received);
        }
        // Over several cluster slots, a pass woken for one partition whose primary is down
        // or hung (its timer fired) fails alone: the wait goes on for the other slots.
        let spread = self.request_slots(req, std::iter::empty()).await?.len() > 1;
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
            let woken = matches!(look, Look::Woken(_));
            let out = match self.reserve_detached(req, &[], look).await {
                Ok((out, _, _)) => out,
                Err(e) if woken && spread => {
                    tracing::debug!(error = %e, "a woken reserve failed on its slot; waiting on for the other slots");
                    continue;
                }
                Err(e) => return Err(e),
            };
            if !out.is_empty() {
                return Ok(answer(out));
            }
        }
    }
}
