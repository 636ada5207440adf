//! The timer index: per topic, a lower bound of the earliest due time among its waiting jobs
//! not yet due, of its earliest lease deadline and of its waiting jobs' earliest expiry, ordered by time so the writer knows how
//! long it may sleep.
//!
//! Entries are lower bounds, never later than the truth: a push, a nack or a reserve lowers
//! them as it happens; a delete or an ack may leave an entry early, which costs one wake-up
//! that finds nothing and then sets the exact time. Only the writer changes the index, after
//! each commit; engine handles read the earliest lease entry to decide whether a read must
//! first let the writer fail the expired leases (a due time needs nothing: time alone makes
//! a waiting job ready).

use std::collections::{BTreeSet, HashMap};

/// Which event of a topic an entry is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Kind {
    /// A lease deadline: the job fails with "lease expired".
    Lease,
    /// A waiting job's expiry: it goes dead ("expired") or is dropped. (Before `Due`, which
    /// must stay the last kind: [`Timers::due`] bounds its range with it.)
    Expiry,
    /// A waiting job's due time: it is ready from then on, and its waiters are woken.
    Due,
}

/// The index.
#[derive(Default, Debug)]
pub(crate) struct Timers {
    by_time: BTreeSet<(u64, i64, Kind)>,
    /// The lease and expiry entries alone, by time, for [`Timers::earliest_lease`]: what
    /// changes a job's state when it comes, so a read lets the writer apply it first.
    leases: BTreeSet<(u64, i64, Kind)>,
    at: HashMap<(i64, Kind), u64>,
}

impl Timers {
    /// Lowers the entry of `(tid, kind)` to `ms` when that is earlier (or there is none).
    pub(crate) fn note(&mut self, tid: i64, kind: Kind, ms: u64) {
        match self.at.get(&(tid, kind)) {
            Some(&cur) if cur <= ms => {}
            _ => self.set(tid, kind, Some(ms)),
        }
    }

    /// Sets the entry of `(tid, kind)` to the exact earliest time, or removes it.
    pub(crate) fn set(&mut self, tid: i64, kind: Kind, ms: Option<u64>) {
        if let Some(old) = self.at.remove(&(tid, kind)) {
            self.by_time.remove(&(old, tid, kind));
            if kind != Kind::Due {
                self.leases.remove(&(old, tid, kind));
            }
        }
        if let Some(ms) = ms {
            self.at.insert((tid, kind), ms);
            self.by_time.insert((ms, tid, kind));
            if kind != Kind::Due {
                self.leases.insert((ms, tid, kind));
            }
        }
    }

    /// Removes every entry of a topic (it was purged).
    pub(crate) fn clear(&mut self, tid: i64) {
        self.set(tid, Kind::Lease, None);
        self.set(tid, Kind::Expiry, None);
        self.set(tid, Kind::Due, None);
    }

    /// The earliest entry's time.
    pub(crate) fn earliest(&self) -> Option<u64> {
        self.by_time.first().map(|(ms, _, _)| *ms)
    }

    /// The earliest lease or expiry entry's time: when a job's state next changes by time
    /// alone (a lease runs out, a waiting job expires).
    pub(crate) fn earliest_lease(&self) -> Option<u64> {
        self.leases.first().map(|(ms, _, _)| *ms)
    }

    /// True when topic `tid` has an entry of `kind` due at `now`.
    pub(crate) fn due_in(&self, tid: i64, kind: Kind, now: u64) -> bool {
        self.at.get(&(tid, kind)).is_some_and(|&ms| ms <= now)
    }

    /// The entries due at `now`, earliest first: (topic, kind, the entry's time).
    pub(crate) fn due(&self, now: u64) -> Vec<(i64, Kind, u64)> {
        self.by_time
            .range(..=(now, i64::MAX, Kind::Due))
            .map(|(ms, tid, kind)| (*tid, *kind, *ms))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn note_keeps_the_earliest_and_set_is_exact() {
        let mut t = Timers::default();
        t.note(1, Kind::Due, 50);
        t.note(1, Kind::Due, 70);
        t.note(2, Kind::Lease, 60);
        assert_eq!(t.earliest(), Some(50));
        assert_eq!(t.earliest_lease(), Some(60));
        assert_eq!(t.due(59), vec![(1, Kind::Due, 50)]);
        assert!(t.due_in(1, Kind::Due, 50) && !t.due_in(1, Kind::Due, 49));
        assert!(!t.due_in(1, Kind::Lease, 100) && !t.due_in(3, Kind::Due, 100));
        t.set(1, Kind::Due, Some(80));
        assert_eq!(t.due(60), vec![(2, Kind::Lease, 60)]);
        assert_eq!(t.due(80), vec![(2, Kind::Lease, 60), (1, Kind::Due, 80)]);
        t.clear(2);
        assert_eq!(t.earliest_lease(), None);
        t.set(1, Kind::Due, None);
        assert_eq!(t.earliest(), None);
        assert!(t.at.is_empty() && t.leases.is_empty());
    }
}
