//! The embedded engine of delayq: the [`delayq_core::Engine`] contract on SQLite, durable on
//! one machine with nothing else installed, or in memory for tests and in-process use. It
//! passes the same conformance suite as the other engines, unchanged.
//!
//! This is the engine's own map: its layout, its schema, the writer and its group commit,
//! time and waiting, checkpoints, durability, recovery, and what a failure does to a job.
//! ARCHITECTURE.md has the map of the whole project and follows one job through this engine.
//!
//! # Layout
//!
//! - `engine`: [`SqliteEngine`], the `Engine` implementation: argument checks, then each
//!   write sent to the writer thread and each read run on a read connection.
//! - `writer`: the writer thread, the engine's only writing connection and its timer: group
//!   commit of many requests per transaction, answers after the commit.
//! - `checkpoint`: the checkpointer thread, which copies the log into the database file
//!   off the writer's path.
//! - `ops/*`: one function per write, mirroring the Redis engine's Lua scripts: `push`,
//!   `reserve`, `lease` (ack, nack, release, touch, bury), `admin` (kick, reschedule, bury
//!   without a lease, delete, purge, settings), `tick` (what time does: leases expire, jobs
//!   that fell due wake their waiters), `settle` (the settlements of `settle_and_reserve`),
//!   `place` (the steps they share), `done` (the done jobs a retention keeps: an ack marks
//!   the row done instead of deleting it, then trims them, keeping `topics.done` their
//!   count; reads check their age), `schedules`; `ops/numbers`, the engine-wide number
//!   sequence (the beanstalkd protocol's job ids) and the topic each claimed range names
//!   (`migrations/0012_numbers.sql`); `ops/destinations`, the topics' push destinations
//!   (`migrations/0013_destinations.sql`).
//! - `read`: get, list (with key cursors, `delayq_core::ListKey`), stats and topics; `waiting`: the
//!   waiting jobs of a topic by due time, band by priority band.
//! - `tx`: what a write sees inside the group transaction (topic ids, the per-topic counter).
//! - `shared`, `registry`, `timers`, `waiters`: the in-memory state shared by the writer and
//!   the handles: topic ids, the timer index (next due time and lease deadline per topic),
//!   and the reservers waiting per topic.
//! - `open`, `schema` and `migrations/*.sql`: the data directory and its lock, WAL and
//!   `synchronous`, schema migrations, recovery at open; `readers`: the read connections.
//! - `clock`: the engine clock (wall clock at open + monotonic time).
//! - `row`: the `jobs` row and its decoding; `settings`: a topic's settings in its
//!   `topics` row; `error`: SQLite and I/O errors onto
//!   [`delayq_core::Error`]; `diagnose`: names a read-only file system when a write fails
//!   (SQLite says only "disk I/O error") and, after a commit, tells the writer whether the
//!   file system is still writable; `config`: [`SqliteConfig`].
//!
//! # Data directory and schema
//!
//! A data directory holds `delayq.db` (with its `-wal` and `-shm` files) and `delayq.lock`.
//! The schema lives in `migrations/NNNN_*.sql`, loaded with `include_str!`; `PRAGMA
//! user_version` is the number of migrations applied and `PRAGMA application_id` marks the file
//! as delayq's. Opening applies the missing migrations in order, each in its own transaction,
//! and refuses a database with a newer version or one delayq did not write. A new database
//! gets 1 KiB pages (`SqliteConfig::page_size`): a commit writes every page it changed to the
//! log whole, and jobs change pages at random places (a push by its due time, a reserve and
//! an ack by where the row lies), so the page size is about the bytes of log per job; an
//! existing database keeps the page size it was created with.
//!
//! | table | row | notes |
//! |---|---|---|
//! | `topics` | `tid`, `name`, `seq`, `expired`, `listed`, `cfg_*` | one row per topic ever pushed to or given settings; the `cfg_*` columns are its settings, NULL when unset (0005), also held in memory by the registry (loaded at open, changed after the commit that set them; a push reads them there, so settings apply to pushes sent after the change was answered); `seq` is the counter of push order and lease tokens; `expired` counts leases that ran out (0002); `listed` says whether it was pushed to since it was created or last purged (0004; `Engine::topics` lists these and the topics the registry holds paused now); `done` counts its done jobs and `cfg_done_max`, `cfg_done_age_ms` are its retention (0006); `paused_until` the end of its pause, NULL when not paused (0008, held in memory by the registry: reserve skips a paused topic, and a waiting reserve also wakes at the end of a pause); `expired_jobs` counts jobs whose expiry passed before a delivery (0009); `cfg_partitions` is its partition count (0011: every job of a topic stays in one table, so the order holds across its partitions; a change is refused while any row of the topic exists); `purge` keeps the row, resets `expired`, `expired_jobs`, `listed` and `done`, and a push that creates a job sets `listed` again (reading the row, so a purge earlier in the same group commit is seen) |
//! | `jobs` | `jid`, `tid`, `id`, `state` (1 waiting, 3 reserved, 4 dead, 5 done), `priority`, `ready_at`, `seq`, `ttr_ms`, `max_attempts`, `attempts`, back-off (4 columns), `created_at`, `token`, `deadline`, `last_error`, `body`, `expires_at` (ms, 0: none), `on_expire` (0 dead, 1 drop) | one row per live job (the expiry columns since 0009); a waiting job is delayed before `ready_at` and ready from then on (0003; before, 1 delayed and 2 ready were stored apart); `deadline` is the lease deadline while reserved, the time of death while dead, the time of its ack while done (0006), 0 otherwise |
//! | `schedules` | `name`, `revision`, `through`, then `ScheduleParts` (`cron`, `time_zone`, `topic`, `body`, `priority`, `ttr_ms`, `max_attempts`, back-off (4 columns), `start_ms`, `end_ms`, `jitter_ms`, `misfire`, `misfire_limit`, and since 0014 the jobs' expiry: `max_lateness_ms`, `expires_at_ms`, `on_expire`) | one row per schedule (0007, issue 14): `revision` 1 at the first put, + 1 at each later one; `through` the latest fire time pushed (NULL until the first and after each put); written by `ops/schedules.rs` on the writer, read on a read connection |
//! | `number_ranges` | `first`, `last`, `topic` (a name) | one row per claim of numbers (0012, issue 19: `Engine::claim_numbers`, the beanstalkd protocol's job ids); `meta` `numbers` is the last number claimed, raised in the same transaction; `first` is the rowid, so `Engine::number_topic` is one seek (`first <= n ORDER BY first DESC LIMIT 1`); nothing deletes a range |
//!
//! | index | on | serves |
//! |---|---|---|
//! | `jobs_id` (unique) | `(tid, id)` | idempotent push, lookups by id, purge |
//! | `jobs_waiting` | `(tid, priority, ready_at, seq) WHERE state = 1` | reserve order, list ready and delayed, next due time, counts: the jobs of one priority due by some time are one range |
//! | `jobs_reserved` | `(tid, deadline, id) WHERE state = 3` | lease expiry, next deadline, list reserved |
//! | `jobs_dead` | `(tid, deadline, id) WHERE state = 4` | list dead, kick_all |
//! | `jobs_done` | `(tid, deadline, id) WHERE state = 5` | list done, the oldest done jobs to trim, the count by age (0006) |
//! | `jobs_expiring` | `(tid, expires_at) WHERE state = 1 AND expires_at > 0` | the waiting jobs past their expiry, the next expiry (0009); empty while no job has one |
//!
//! **A job falling due is not a write.** Reserve takes waiting jobs whose `ready_at` has passed:
//! it walks the topic's priority bands in `jobs_waiting` from the lowest (`waiting.rs`: one
//! seek for a band's head, one range for its due jobs when the head is due). Jobs of one
//! priority (the common case) cost three seeks per reserve; each further distinct priority
//! among the topic's waiting jobs costs one seek more, in reserve and in the questions the
//! timer and the reads ask by due time (next due time, counts), which walk the bands too.
//! There is deliberately no second index on waiting jobs ordered by due time alone: a push
//! with a random due time dirties a random page of every index ordered by it, and each such
//! page is one more page the commit writes to the log (BENCHMARKS.md, "Embedded engine: under
//! load", measures it).
//!
//! **Architecture Invariant:** a waiting job is in `jobs_waiting`, a reserved one in
//! `jobs_reserved`, a dead one in `jobs_dead`, a done one in `jobs_done`, and in no other
//! partial index; `topics.done` is the count of the topic's done jobs; every statement
//! the engine runs reads through an index: no statement scans the `jobs` table (checked by
//! `plans.rs`, which explains every statement of every operation).
//!
//! **Architecture Invariant:** a migration file, once released, is never edited; a schema
//! change is a new file. The engine refuses a database whose `user_version` is newer than its
//! own.
//!
//! # The writer and group commit
//!
//! Every write goes through one thread with one connection. It sleeps on its request channel
//! until a request arrives or the timer fires, then drains up to `max_group` (512) pending
//! requests and runs them in one `BEGIN IMMEDIATE … COMMIT`: first what time did (expired
//! leases fail; jobs that fell due are counted to wake their waiters, which reads only, so a
//! group with nothing else is a read transaction), then each request, so that a request that
//! fails (a lost lease, a wrong state, an SQLite error) leaves no trace while the others commit:
//! one refused before its first write (every check runs first) needs nothing undone, and one
//! that fails after writing makes the group run again without it. (A savepoint per request
//! did the same, but made SQLite copy every page a request wrote into a statement journal.) A request records its effects (a new
//! topic, a timer entry, jobs made ready) as it runs; they are applied to the shared state only
//! after the commit, then every caller of the group is answered. When SQLite loses the
//! transaction while a request runs (a full disk, an I/O error), that request is answered with
//! its error and the rest of the group runs again in a new transaction, so one failing request
//! does not fail the others (tested by `tests/full.rs`). A failed `BEGIN` answers the whole
//! group "not committed" (`Unavailable`), and nothing is applied. A failed `COMMIT` answers that
//! the write may or may not be stored, whole or not at all: the commit may have reached the log
//! before its sync failed, and an open replays it. The next successful commit overwrites those
//! log frames, so within one run it stays unapplied; a crash or a failed file system before then
//! can make it reappear. Retrying is safe, as after a network cut (tested under load on a full
//! tmpfs and a read-only ext4 by `tests/faults/`).
//!
//! `settle_and_reserve` is one request: its settlements (a lost lease is that item's answer and
//! writes nothing, as any refusal; a settlement that fails after writing fails the request),
//! then the reserve, in the same group transaction; when that first pass finds nothing, the caller waits as a reserve does
//! and later passes are plain reserves.
//!
//! Reads (get, list, stats, topics) run on a small pool of read connections, each in one read
//! transaction; in WAL mode they see the last commit and never wait for the writer. In memory
//! mode the writer's connection is the only one, and reads run on the writer thread after its
//! group's commit.
//!
//! **Architecture Invariant:** one connection writes, from one thread; no other code path
//! writes to the database. Concurrency control is the request queue, not SQLite locks.
//!
//! **Architecture Invariant:** a caller is answered only after the commit that holds its
//! write, and the in-memory state (registry, timer index, wake-ups) changes only after that
//! commit: nothing anyone sees can be rolled back.
//!
//! **Architecture Invariant:** every check that can refuse a request runs before its first
//! write, as in the Lua scripts; a refused request writes nothing.
//!
//! # Time, the timer index and waiting
//!
//! The engine clock is the wall clock read once at open plus the monotonic time since, so a
//! step of the system clock (NTP) neither fires jobs early nor holds them. A reopen anchors
//! again, but never earlier than the engine's high-water mark: every group commit that writes
//! records the engine's time in `meta.clock_ms` (migration 0010), inside that commit (no extra
//! sync), and opening anchors at `max(wall clock, mark)`, with a warning when the wall clock is
//! behind. A system clock set back before a restart therefore does not turn the engine's time
//! back (leases granted before keep their real length, due jobs their place); the time spent
//! closed is then not counted. A system clock stepped forward while the engine was closed cannot
//! be told from real elapsed time. Delays are rounded up to the millisecond, and so is the
//! engine's now (read in µs) that they count from (ARCHITECTURE.md, "Cross-cutting concerns").
//!
//! **Architecture Invariant:** the engine's time never goes backwards, within a run or across
//! reopens of one data directory.
//!
//! The timer index holds, per topic, a lower bound of the earliest due time among waiting jobs
//! not yet due, of the earliest lease deadline and of the earliest expiry among waiting jobs,
//! ordered by time. Writes lower the entries as
//! they create earlier events (push, nack, reserve); the tick of a topic sets them exactly (a
//! band walk on `jobs_waiting`, or a `min()` lookup on `jobs_reserved`). A delete or an ack may leave an entry
//! early: that costs one wake-up that finds nothing. The writer sleeps until the earliest entry
//! (`recv_timeout` on its channel, the instant computed so that the engine clock has reached the
//! entry), then, per due topic: expired leases fail with "lease expired" (retry after the
//! back-off, or dead when attempts are used up), waiting jobs past their expiry go dead
//! ("expired") or are dropped, at most `tick_batch` (1000) of each per topic per
//! commit, so a large backlog is worked off in bounded steps between other requests; and for a
//! due time, nothing is written: the jobs due since the entry are counted (at most `tick_batch`)
//! to wake that many waiters.
//!
//! A reserve that finds nothing registers on the per-topic `Notify` of each of its topics,
//! enabling the wake-up before each look, and sleeps until woken or its wait ends. After a
//! commit, the writer wakes as many waiters of a topic as jobs became ready in it (pushed or
//! put back due, or fallen due); a reserve that leaves due jobs in a topic with waiters wakes
//! one more (the baton), so a waiter woken for a job another reserver took does not leave later
//! jobs unseen. Reads derive delayed or ready from the due time and the engine's now, and
//! first let the writer fail the expired leases and expire the jobs past their expiry when the
//! earliest such entry has passed, so
//! get, list and stats report the state time gives a job.
//!
//! **Architecture Invariant:** no loop polls. The writer sleeps until its earliest timer or a
//! request; a waiting reserver sleeps until woken or its wait ends.
//!
//! **Architecture Invariant:** a timer entry is never later than the event it stands for, so a
//! due job or an expired lease is never handled late because of the index.
//!
//! # Checkpoints
//!
//! SQLite's automatic checkpoint would run on the writer thread after a commit, with two
//! fsyncs every 4 MiB of log: a stall of several milliseconds for the whole next group. It is
//! replaced: the writer's WAL hook pokes the checkpointer thread each time the log has grown by
//! 1 MiB, and the checkpointer, on its own connection, runs a PASSIVE checkpoint (which never
//! blocks the writer) and syncs the database file. A log that is appended to without pause is
//! never fully copied by a checkpoint running beside it, so it could never start over; when it
//! reaches 64 MiB the writer's hook runs one PASSIVE checkpoint itself (a few milliseconds: the
//! checkpointer has copied and synced almost everything), and the next transaction starts the
//! log over. BENCHMARKS.md ("Lateness", under the embedded engine) measures what this does to
//! the lateness tail.
//!
//! **Architecture Invariant:** the writer never waits for a checkpoint except once per 64 MiB
//! of log; checkpoints never block the writer.
//!
//! # Durability modes
//!
//! `synchronous = NORMAL` (the default): a commit appends to the WAL without an fsync, so every
//! acknowledged write survives a crash of the process (kill -9, OOM kill, panic); an operating
//! system crash or a power loss may lose the last commits. `synchronous = FULL`: each group
//! commit syncs the WAL once, so acknowledged writes also survive power loss. Group commit
//! amortises that fsync over every request of the group.
//!
//! # Recovery and ownership
//!
//! Opening takes an exclusive `flock` on `delayq.lock` (a second engine, in this process or
//! another, gets `Unavailable` naming the directory), opens the database in WAL mode (SQLite
//! replays a WAL left by a crash), applies migrations, then rebuilds the in-memory state: the
//! topic registry and, per topic, the earliest due time and lease deadline (an index lookup
//! per priority band and one for the leases). Jobs stay on disk, so opening costs the same with one job or millions; a job
//! that fell due while the engine was closed is simply ready, and leases that expired meanwhile
//! are failed by the writer's first ticks. A database of an older schema version is migrated at
//! open (from version 2: `tests/migrate.rs`). A lease keeps
//! its absolute deadline across a reopen, so a lease that expired meanwhile fails at once and a
//! live one stays live. The last handle dropped closes the read connections, stops the checkpointer, stops the
//! writer (whose connection, the last, checkpoints and removes the WAL) and then releases the
//! lock. The lock is retried for up to 250 ms before an open reports the directory as in use:
//! the lock belongs to the open file, and a child being spawned elsewhere in the process holds
//! it between fork and exec.
//!
//! **Architecture Invariant:** one engine owns a data directory; the lock is taken before the
//! database is opened and released only after every connection is closed.
//!
//! | failure | what happens |
//! |---|---|
//! | The process is killed (kill -9) | Every acknowledged write is in the WAL and is there at the next open; a write not yet answered may or may not be. Tested by `tests/crash.rs`: 24 kill -9 cycles at random moments, alternating NORMAL and FULL. |
//! | A worker dies holding a lease | The timer fires at the deadline and fails the delivery ("lease expired"): back to delayed with the back-off, or dead. |
//! | The disk is full, or a write fails | A request that fails is answered with its error (`Full` when the disk or the size cap is full: nothing written) and the rest of the group runs again; a failed `COMMIT` answers every request of the group that its write may or may not be stored (retry). Tested under load by `tests/faults/` (the size cap, a full tmpfs grown again without a reopen). |
//! | The file system turns read-only (the kernel's `errors=remount-ro`) | Writes answer `Unavailable` naming the read-only file system; reads go on. A commit after which the file system is found read-only is answered "may or may not be stored": its `fsync` can succeed while its pages are dropped (RELIABILITY.md, section 4), so the writer opens `delayq.lock` for appending after every commit that wrote (`Writer::landed`). A commit confirmed in the milliseconds while the kernel handles the error, before it marks the file system read-only, can still be lost, unseen (tested: allowed only inside that window). The kernel refuses `remount,rw` after such an error: stop delayq, repair (`e2fsck`), mount and start again. Tested by `tests/faults/` on an ext4 image. |
//! | The system clock steps (NTP, `date`) | Nothing fires early or late while running (monotonic clock); a restart with the clock set back keeps the engine's time (the high-water mark). Tested by `crates/cli/tests/clock.rs` under libfaketime. |
//! | The directory cannot be created or written, the database is corrupt, foreign or newer | `open` fails with `InvalidConfig` saying what to do; nothing is written to the database. |
//!
//!
//! # Lease tokens survive lost commits
//!
//! `tx.rs` `next_token` raises the topic counter to the engine's clock in µs before it hands
//! out a token. A power loss under `synchronous=normal`, or a restore of an older copy of the
//! file, loses the last commits, and the leases and the counter's last steps with them; the
//! lost tokens were below the engine's clock when they were handed out, and the reopened
//! engine's clock is later (the wall clock has moved on), so the next token is larger. `tests/fencing.rs` restores a copy taken before a
//! lease and checks that the job's next token is larger.
#![deny(missing_docs)]

mod checkpoint;
mod clock;
mod config;
mod diagnose;
mod engine;
mod error;
mod open;
mod ops;
#[cfg(test)]
mod plans;
mod read;
mod readers;
mod registry;
mod row;
mod schema;
mod settings;
mod shared;
mod timers;
mod tx;
mod waiters;
mod waiting;
mod writer;

pub use config::{SqliteConfig, Storage, Synchronous};
pub use engine::SqliteEngine;
pub use open::{DB_FILE, LOCK_FILE};
