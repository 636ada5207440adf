//! The lease operations: `ack` (a batch per partition, in one pipeline; on a cluster one
//! pipeline per slot, each slot's acks answered by their own slot), `nack`, `release`
//! (with a delay and a priority), `touch`, `bury` (with a priority), each on the partition of the lease's job. Each answers `LEASE_LOST` when
//! the token is not the job's live lease.

use std::collections::BTreeMap;
use std::time::Duration;

use delayq_core::limits::delay_ms_ceil;
use delayq_core::{Bury, Error, Lease, Nack, NackOutcome, Release, Result, Timestamp, duration_ms};
use redis::{Cmd, Value};

use super::{Ops, refused, settle_calls};
use crate::codec::{self, Status};
use crate::conn::Among;
use crate::keys::Part;
use crate::library;

/// The field of a topic's `jobs` hash that holds a leased job's token: a space, then the id
/// (lib.lua's `token_field`; a space is not in the id alphabet).
fn token_field(id: &str) -> String {
    format!(" {id}")
}

/// Adds acks to a function call as lib.lua's `check_acks` takes them: the ids, then their
/// token fields, then their tokens.
pub(crate) fn ack_args<'a>(inv: &mut Cmd, acks: impl Iterator<Item = &'a Lease> + Clone) {
    for l in acks.clone() {
        inv.arg(l.id.as_str());
    }
    for l in acks.clone() {
        inv.arg(token_field(l.id.as_str()));
    }
    for l in acks {
        inv.arg(l.token.0);
    }
}

impl Ops {
    /// Runs a lease function (`(function, operation)`, e.g. `(library::NACK, "nack")`) and
    /// maps its status; returns the rest of the reply.
    async fn lease_call(
        &self,
        (function, operation): (&str, &'static str),
        lease: &Lease,
        extra: &[Vec<u8>],
        what: &'static str,
    ) -> Result<Vec<Value>> {
        let mut inv = self.fcall(function, &self.part_of(&lease.topic, &lease.id).await?);
        inv.arg(lease.id.as_str()).arg(lease.token.0);
        for a in extra {
            inv.arg(a.as_slice());
        }
        let reply = codec::array(self.conn.call(&inv, what).await?)?;
        let status = Status::from_code(codec::int(reply.first().unwrap_or(&Value::Nil))?)?;
        if status != Status::Ok {
            let value = reply.get(1).map(codec::int).transpose()?.unwrap_or(0);
            return Err(refused(lease, operation, (status, value)));
        }
        Ok(reply.into_iter().skip(1).collect())
    }

    /// `Engine::ack_batch`, its input already checked by `engine.rs`.
    pub(crate) async fn ack_batch(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        let mut out: Vec<Result<()>> = leases.iter().map(|_| Ok(())).collect();
        let mut by_part: BTreeMap<Part, Vec<usize>> = BTreeMap::new();
        for (i, l) in leases.iter().enumerate() {
            by_part
                .entry(self.part_of(&l.topic, &l.id).await?)
                .or_default()
                .push(i);
        }
        let groups: Vec<(Part, Vec<usize>)> = by_part
            .into_iter()
            .flat_map(|(part, idx)| {
                settle_calls(|i| &leases[i], &idx)
                    .into_iter()
                    .map(move |call| (part.clone(), call))
            })
            .collect();
        let invs: Vec<Cmd> = groups
            .iter()
            .map(|(part, idx)| {
                let mut inv = self.fcall(library::ACK, part);
                inv.arg(idx.len());
                ack_args(&mut inv, idx.iter().map(|&i| &leases[i]));
                inv
            })
            .collect();
        // One pipeline per slot on a cluster, each slot's acks answered by their own slot:
        // a primary that is down fails only its own acks (`Conn::per_slot`).
        let mut failed = None;
        let mut answered = false;
        for (calls, answer) in self.conn.per_slot(&invs, "acking", Among::TheseSlots).await {
            let replies = match answer.replies() {
                Ok(replies) => replies,
                Err(e) => {
                    for &c in &calls {
                        for &i in &groups[c].1 {
                            out[i] = Err(e.copy_for_another());
                        }
                    }
                    failed.get_or_insert(e);
                    continue;
                }
            };
            answered = true;
            for (&c, reply) in calls.iter().zip(replies) {
                let idx = &groups[c].1;
                let codes = codec::array(reply)?;
                if codes.len() != idx.len() {
                    return Err(Error::Internal("ack reply has the wrong length".into()));
                }
                for (&i, code) in idx.iter().zip(&codes) {
                    out[i] = match codec::settle_status(code)? {
                        (Status::Ok, _) => Ok(()),
                        refusal => Err(refused(&leases[i], "ack", refusal)),
                    };
                }
            }
        }
        // Every slot failed: the batch fails as a whole, as a batch on one node does.
        match failed {
            Some(e) if !answered => Err(e),
            _ => Ok(out),
        }
    }

    /// `Engine::nack`, its input already checked by `engine.rs`.
    pub(crate) async fn nack(&self, lease: &Lease, nack: Nack) -> Result<NackOutcome> {
        let delay = nack
            .delay
            .map(|d| delay_ms_ceil(d).to_string())
            .unwrap_or_else(|| "-1".into());
        let reason = nack.reason.unwrap_or_default();
        let rest = self
            .lease_call(
                (library::NACK, "nack"),
                lease,
                &[delay.into_bytes(), reason.into_bytes()],
                "nacking",
            )
            .await?;
        match codec::opt_uint(rest.first().unwrap_or(&Value::Nil))? {
            Some(ms) => {
                let ready_at = Timestamp::from_millis(ms);
                Ok(NackOutcome::Retry { ready_at })
            }
            None => Ok(NackOutcome::Dead),
        }
    }

    /// `Engine::release_with` (and `release`, with no options), its input already checked
    /// by `engine.rs`.
    pub(crate) async fn release(&self, lease: &Lease, release: Release) -> Result<()> {
        let delay = release
            .delay
            .map_or(-1, |d| i64::try_from(delay_ms_ceil(d)).unwrap_or(i64::MAX));
        let priority = release.priority.map_or(-1, i64::from);
        self.lease_call(
            (library::RELEASE, "release"),
            lease,
            &[
                delay.to_string().into_bytes(),
                priority.to_string().into_bytes(),
            ],
            "releasing",
        )
        .await?;
        Ok(())
    }

    /// `Engine::touch`, its input already checked by `engine.rs`.
    pub(crate) async fn touch(&self, lease: &Lease, ttr: Option<Duration>) -> Result<Timestamp> {
        let ttr = ttr
            .map(|t| duration_ms(t).to_string())
            .unwrap_or_else(|| "-1".into());
        let rest = self
            .lease_call(
                (library::TOUCH, "touch"),
                lease,
                &[ttr.into_bytes()],
                "touching",
            )
            .await?;
        Ok(Timestamp::from_millis(codec::uint(
            rest.first().unwrap_or(&Value::Nil),
        )?))
    }

    /// `Engine::bury_with` (and `bury`, with no priority), its input already checked by
    /// `engine.rs`.
    pub(crate) async fn bury(&self, lease: &Lease, bury: Bury) -> Result<()> {
        let reason = bury.reason.unwrap_or_default();
        let priority = bury.priority.map_or(-1, i64::from);
        self.lease_call(
            (library::BURY, "bury"),
            lease,
            &[reason.into_bytes(), priority.to_string().into_bytes()],
            "burying",
        )
        .await?;
        Ok(())
    }
}
