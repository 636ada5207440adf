//! [`Tx`]: what one request sees while it runs inside the writer's transaction: the
//! connection, the clock, topic lookups, the per-topic counter and the effects it records.

use delayq_core::{Result, Topic};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::db_err;
use crate::shared::{Effect, Shared};

/// How a [`Tx::scoped`] step ended.
pub(crate) enum Scoped<T> {
    /// It succeeded, or was refused having written nothing.
    Done(Result<T>),
    /// It failed after writing: the whole request must fail with this error.
    Abort(delayq_core::Error),
}

/// One request's view of the writer's transaction. When the request fails its writes are
/// undone together (the writer runs its group again without it); its effects are applied
/// only after the commit.
pub(crate) struct Tx<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) shared: &'a Shared,
    /// The most expired leases and due jobs of a topic one tick moves.
    pub(crate) tick_batch: usize,
    effects: Vec<Effect>,
    /// The `topics.seq` counters this request read or advanced: (tid, value, advanced).
    seqs: Vec<(i64, u64, bool)>,
    /// The topics this request put back on the topic list.
    listed: Vec<i64>,
}

impl<'a> Tx<'a> {
    pub(crate) fn new(conn: &'a Connection, shared: &'a Shared, tick_batch: usize) -> Self {
        Tx {
            conn,
            shared,
            tick_batch,
            effects: Vec::new(),
            seqs: Vec::new(),
            listed: Vec::new(),
        }
    }

    /// Now on the engine clock, in milliseconds.
    pub(crate) fn now_ms(&self) -> u64 {
        self.shared.clock.now_ms()
    }

    /// Now on the engine clock, in microseconds.
    pub(crate) fn now_us(&self) -> u64 {
        self.shared.clock.now_us()
    }

    /// Records an effect of this request.
    pub(crate) fn effect(&mut self, e: Effect) {
        self.effects.push(e);
    }

    /// The id of an existing topic (committed, or created earlier in this transaction).
    pub(crate) fn topic(&mut self, topic: &Topic) -> Result<Option<i64>> {
        if let Some(tid) = self.shared.registry.tid(topic) {
            return Ok(Some(tid));
        }
        self.conn
            .prepare_cached("SELECT tid FROM topics WHERE name = ?1")
            .and_then(|mut s| s.query_row([topic.as_str()], |r| r.get(0)).optional())
            .map_err(|e| db_err("looking up a topic", e))
    }

    /// The id of a topic, creating it when it is new (on the topic list when `listed`: a
    /// push creates a listed topic, setting its settings an unlisted one).
    pub(crate) fn topic_or_create(&mut self, topic: &Topic, listed: bool) -> Result<i64> {
        if let Some(tid) = self.topic(topic)? {
            return Ok(tid);
        }
        self.conn
            .prepare_cached("INSERT INTO topics (name, seq, listed) VALUES (?1, 0, ?2)")
            .and_then(|mut s| s.execute(params![topic.as_str(), listed]))
            .map_err(|e| db_err("creating a topic", e))?;
        let tid = self.conn.last_insert_rowid();
        self.effects.push(Effect::NewTopic(tid, topic.clone()));
        Ok(tid)
    }

    /// Puts a topic back on the topic list when a purge took it off (once per topic per
    /// request). It reads the table, not the registry, so a purge earlier in the same group
    /// transaction is seen.
    pub(crate) fn list_topic(&mut self, tid: i64) -> Result<()> {
        if self.listed.contains(&tid) {
            return Ok(());
        }
        self.conn
            .prepare_cached("UPDATE topics SET listed = 1 WHERE tid = ?1 AND listed = 0")
            .and_then(|mut s| s.execute([tid]))
            .map_err(|e| db_err("listing a topic", e))?;
        self.listed.push(tid);
        Ok(())
    }

    /// The value the topic's counter would take next, without taking it.
    pub(crate) fn peek_seq(&mut self, tid: i64) -> Result<u64> {
        Ok(self.seq_slot(tid)?.1 + 1)
    }

    /// Advances the topic's counter and returns its new value (a push order or a lease token).
    pub(crate) fn next_seq(&mut self, tid: i64) -> Result<u64> {
        let slot = self.seq_slot(tid)?;
        slot.1 += 1;
        slot.2 = true;
        Ok(slot.1)
    }

    /// A fresh lease token of the topic: its counter advanced, first raised to `now_us` when
    /// it is behind it, so that a token is never below the clock of the call that made it.
    /// A commit the file lost (a power loss under `synchronous=normal`, a restore of an older
    /// copy) can leave the counter behind tokens it handed out; those were below the clock
    /// then, and the clock has moved on since, so a token is never handed out twice
    /// (`tests/fencing.rs`). The counter runs ahead of the clock only by the tokens of one
    /// µs. Push order takes [`Tx::next_seq`]: it needs no fence and only raises the counter.
    pub(crate) fn next_token(&mut self, tid: i64, now_us: u64) -> Result<u64> {
        let slot = self.seq_slot(tid)?;
        slot.1 = slot.1.max(now_us) + 1;
        slot.2 = true;
        Ok(slot.1)
    }

    fn seq_slot(&mut self, tid: i64) -> Result<&mut (i64, u64, bool)> {
        let pos = match self.seqs.iter().position(|s| s.0 == tid) {
            Some(pos) => pos,
            None => {
                let seq: u64 = self
                    .conn
                    .prepare_cached("SELECT seq FROM topics WHERE tid = ?1")
                    .and_then(|mut s| s.query_row([tid], |r| r.get(0)))
                    .map_err(|e| db_err("reading a topic counter", e))?;
                self.seqs.push((tid, seq, false));
                self.seqs.len() - 1
            }
        };
        Ok(&mut self.seqs[pos])
    }

    /// Writes the advanced counters back; called once when the request succeeded.
    pub(crate) fn flush(&mut self) -> Result<()> {
        for &(tid, seq, advanced) in &self.seqs {
            if advanced {
                self.conn
                    .prepare_cached("UPDATE topics SET seq = ?1 WHERE tid = ?2")
                    .and_then(|mut s| s.execute(params![seq, tid]))
                    .map_err(|e| db_err("advancing a topic counter", e))?;
            }
        }
        self.seqs.clear();
        Ok(())
    }

    /// Runs `f` as one step of this request that may be refused on its own: when it fails
    /// having written nothing (a refusal: every check runs before the first write), its
    /// effects and counter steps are dropped and the rest of the request goes on. One that
    /// fails after writing cannot be undone alone: its error is returned as
    /// [`Scoped::Abort`], and the request must fail (the writer then leaves no trace of it).
    /// This gives what a savepoint per step would, without SQLite copying every page the
    /// step writes into a statement journal.
    pub(crate) fn scoped<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Scoped<T> {
        let (effects, seqs, listed) = (self.effects.len(), self.seqs.clone(), self.listed.len());
        let changes = self.conn.total_changes();
        match f(self) {
            Ok(v) => Scoped::Done(Ok(v)),
            Err(e) if self.conn.total_changes() == changes => {
                self.effects.truncate(effects);
                self.seqs = seqs;
                self.listed.truncate(listed);
                Scoped::Done(Err(e))
            }
            Err(e) => Scoped::Abort(e),
        }
    }

    /// The effects recorded so far.
    pub(crate) fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }
}
