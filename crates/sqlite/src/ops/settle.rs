//! Settle-and-reserve, a worker's cycle in one writer request: the leases it finished are
//! settled (ack, nack, bury, release), each answered on its own, then the reserve runs in
//! the same group transaction. A settlement checks its lease before it writes, so a lost
//! lease writes nothing and the others go on (see [`Tx::scoped`]).

use delayq_core::{Lease, NackOutcome, Result, Settle, Settled};

use super::lease::{self, Acks};
use crate::tx::{Scoped, Tx};

/// One settlement with its arguments checked and converted (a nack's delay in whole
/// milliseconds, reasons '' for none), ready to run on the writer thread.
pub(crate) enum Settlement {
    /// As [`lease::ack_batch`] of one lease.
    Ack(Lease),
    /// As [`lease::nack`]: delay in ms (`None`: the back-off), reason.
    Nack(Lease, Option<u64>, String),
    /// As [`lease::bury`], with a reason.
    Bury(Lease, String),
    /// As [`lease::release`].
    Release(Lease),
}

impl Settlement {
    /// Converts a settlement the caller checked ([`delayq_core::check_settle_and_reserve`]).
    pub(crate) fn from_checked(s: &Settle) -> Self {
        match s {
            Settle::Ack(l) => Settlement::Ack(l.clone()),
            Settle::Nack(l, n) => Settlement::Nack(
                l.clone(),
                n.delay.map(delayq_core::limits::delay_ms_ceil),
                n.reason.clone().unwrap_or_default(),
            ),
            Settle::Bury(l, reason) => {
                Settlement::Bury(l.clone(), reason.clone().unwrap_or_default())
            }
            Settle::Release(l) => Settlement::Release(l.clone()),
        }
    }

    fn run<'c>(&self, tx: &mut Tx<'c>, acks: &mut Acks<'c>) -> Result<Settled> {
        match self {
            Settlement::Ack(l) => {
                acks.ack(tx, l)?;
                Ok(Settled::Acked)
            }
            Settlement::Nack(l, delay, reason) => {
                let out: NackOutcome = lease::nack(tx, l, *delay, reason)?;
                Ok(Settled::Nacked(out))
            }
            Settlement::Bury(l, reason) => {
                lease::bury(tx, l, reason, None).map(|()| Settled::Buried)
            }
            Settlement::Release(l) => lease::release(tx, l, None, None).map(|()| Settled::Released),
        }
    }
}

/// Settles each item in order, answering each: a lost lease (or any refusal) is that
/// item's answer and undoes nothing else. An error that means the engine cannot go on
/// (`Unavailable`), or one after a write, fails the whole request, which then writes
/// nothing.
pub(crate) fn settle(tx: &mut Tx<'_>, items: &[Settlement]) -> Result<Vec<Result<Settled>>> {
    let mut out = Vec::with_capacity(items.len());
    let mut acks = Acks::default();
    for item in items {
        match tx.scoped(|tx| item.run(tx, &mut acks)) {
            Scoped::Done(Err(e)) if e.is_retryable() => return Err(e),
            Scoped::Done(r) => out.push(r),
            Scoped::Abort(e) => return Err(e),
        }
    }
    Ok(out)
}
