//! This server's counters: the commands, jobs and connections `stats` reports ([`Stats`]),
//! and how many connections use, watch and wait on each tube ([`Tubes`], for `stats-tube`,
//! `stats` and `list-tubes`). They count what happens here; the job counts are the engine's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use delayq_core::Topic;

use crate::proto::Command;
use crate::tube::Tube;

/// The commands `stats` counts, in beanstalkd 1.12's order.
pub(crate) const COMMANDS: [&str; 22] = [
    "put",
    "peek",
    "peek-ready",
    "peek-delayed",
    "peek-buried",
    "reserve",
    "reserve-with-timeout",
    "delete",
    "release",
    "use",
    "watch",
    "ignore",
    "bury",
    "kick",
    "touch",
    "stats",
    "stats-job",
    "stats-tube",
    "list-tubes",
    "list-tube-used",
    "list-tubes-watched",
    "pause-tube",
];

/// This server's counters.
#[derive(Default)]
pub(crate) struct Stats {
    /// One per command of [`COMMANDS`], in its order (`cmd-*`).
    pub(crate) commands: [AtomicU64; COMMANDS.len()],
    /// Jobs put (`total-jobs`).
    pub(crate) puts: AtomicU64,
    reserves: AtomicU64,
    deletes: AtomicU64,
    /// Connections open now (`current-connections`).
    pub(crate) connections: AtomicU64,
    /// Connections accepted since the start (`total-connections`).
    pub(crate) total_connections: AtomicU64,
    pub(crate) producers: AtomicU64,
    pub(crate) workers: AtomicU64,
    pub(crate) waiting: AtomicU64,
}

fn add(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A counter's value.
pub(crate) fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

impl Stats {
    /// Counts a `put` that was refused before it became a command (its body too big, or
    /// not followed by CRLF): beanstalkd counts those.
    pub(crate) fn refused_put(&self) {
        self.count_put();
    }

    /// Counts a `put`.
    pub(crate) fn count_put(&self) {
        if let Some(i) = COMMANDS.iter().position(|c| *c == "put") {
            add(&self.commands[i]);
        }
    }

    /// Counts a command under its `cmd-*` name.
    pub(crate) fn count(&self, cmd: &Command) {
        let name = match cmd {
            Command::Put { .. } => "put",
            Command::Peek(_) => "peek",
            Command::PeekReady => "peek-ready",
            Command::PeekDelayed => "peek-delayed",
            Command::PeekBuried => "peek-buried",
            Command::Reserve => "reserve",
            Command::ReserveWithTimeout(_) => "reserve-with-timeout",
            Command::Touch(_) => "touch",
            Command::Use(_) => "use",
            Command::Watch(_) => "watch",
            Command::Ignore(_) => "ignore",
            Command::Delete(_) => "delete",
            Command::Release { .. } => "release",
            Command::Bury { .. } => "bury",
            Command::Kick(_) => "kick",
            Command::Stats => "stats",
            Command::StatsJob(_) => "stats-job",
            Command::StatsTube(_) => "stats-tube",
            Command::ListTubes => "list-tubes",
            Command::ListTubeUsed => "list-tube-used",
            Command::ListTubesWatched => "list-tubes-watched",
            Command::PauseTube { .. } => "pause-tube",
            // beanstalkd 1.12 has no counter of these in `stats`.
            Command::ReserveJob(_) | Command::KickJob(_) | Command::Quit => return,
        };
        if let Some(i) = COMMANDS.iter().position(|c| *c == name) {
            add(&self.commands[i]);
        }
    }
    pub(crate) fn put(&self) {
        add(&self.puts);
    }
    pub(crate) fn reserved(&self) {
        add(&self.reserves);
    }
    pub(crate) fn deleted(&self) {
        add(&self.deletes);
    }
    pub(crate) fn connected(&self) {
        add(&self.connections);
        add(&self.total_connections);
    }
    pub(crate) fn disconnected(&self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How many connections use, watch and wait on each tube (this server's, for `stats-tube`
/// and `stats`), and the per-tube command counters.
#[derive(Default)]
pub(crate) struct Tubes {
    inner: Mutex<HashMap<Tube, TubeCounts>>,
}

/// One tube's counts in this server.
#[derive(Default, Clone, Copy)]
pub(crate) struct TubeCounts {
    pub(crate) using: u64,
    pub(crate) watching: u64,
    pub(crate) waiting: u64,
    pub(crate) puts: u64,
    pub(crate) deletes: u64,
    pub(crate) pauses: u64,
}

/// Counts a connection as waiting on its watched tubes while it lives.
pub(crate) struct Waiting<'a> {
    tubes: &'a Tubes,
    names: Vec<Tube>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut m = self.tubes.lock();
        for t in &self.names {
            if let Some(c) = m.get_mut(t) {
                c.waiting = c.waiting.saturating_sub(1);
            }
        }
    }
}

impl Tubes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Tube, TubeCounts>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn change(&self, t: &Tube, f: impl FnOnce(&mut TubeCounts)) {
        f(self.lock().entry(t.clone()).or_default());
    }

    pub(crate) fn r#use(&self, t: &Tube) {
        self.change(t, |c| c.using += 1);
    }
    pub(crate) fn unuse(&self, t: &Tube) {
        self.change(t, |c| c.using = c.using.saturating_sub(1));
    }
    pub(crate) fn watch(&self, t: &Tube) {
        self.change(t, |c| c.watching += 1);
    }
    pub(crate) fn unwatch(&self, t: &Tube) {
        self.change(t, |c| c.watching = c.watching.saturating_sub(1));
    }
    pub(crate) fn put(&self, t: &Tube) {
        self.change(t, |c| c.puts += 1);
    }
    pub(crate) fn deleted(&self, t: &Tube) {
        self.change(t, |c| c.deletes += 1);
    }
    pub(crate) fn paused(&self, t: &Tube) {
        self.change(t, |c| c.pauses += 1);
    }
    pub(crate) fn waiting(&self, watched: &[(Tube, Topic)]) -> Waiting<'_> {
        let names: Vec<Tube> = watched.iter().map(|(t, _)| t.clone()).collect();
        for t in &names {
            self.change(t, |c| c.waiting += 1);
        }
        Waiting { tubes: self, names }
    }
    /// One tube's counts (zeros for a tube no one here has touched).
    pub(crate) fn counts(&self, t: &Tube) -> TubeCounts {
        self.lock().get(t).copied().unwrap_or_default()
    }
    /// Tubes some connection here uses or watches.
    pub(crate) fn in_use(&self) -> Vec<Tube> {
        self.lock()
            .iter()
            .filter(|(_, c)| c.using > 0 || c.watching > 0)
            .map(|(t, _)| t.clone())
            .collect()
    }
}
