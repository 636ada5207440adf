//! The PostgreSQL engine of delayq: the [`delayq_core::Engine`] contract on the database
//! most teams already run, with pushes that can join the caller's own transaction
//! ([`PostgresEngine::push_in`]).
//!
//! # Layout
//!
//! - `engine`: [`PostgresEngine`]: checks the caller's input and dispatches to `ops`; owns
//!   the tasks beside the pool.
//! - `ops`: one module per group of operations (push, reserve, lease, admin, topics,
//!   numbers, schedules, destinations), each owning its calls of the library, the decoding
//!   of their rows and what their statuses mean; they take a connection, the reserves the
//!   state the engine's clones share (`ops::Ops`).
//! - `status`: the one enum of what the library's functions answer as a status column or
//!   raise as a refusal (`SQLSTATE DQ0xx`).
//! - `library` with `migrations/*.sql` (the tables, versioned in `delayq.migrations`) and
//!   `sql/*.sql` (the functions, one file per group, each with its header): installed at
//!   connect; a newer schema is refused.
//! - `waiters`: the `LISTEN delayq` connection and the reservers waiting per topic;
//!   `sweeper`: the task that runs `delayq.tick` at the earliest lease deadline or expiry.
//! - `connect` (TLS, the pool), `config` ([`PostgresConfig`]), `row` (job rows and codes),
//!   `error` (driver errors onto [`delayq_core::Error`]).
//!
//! # How the engine works
//!
//! The same contract as the other engines, on the database most teams already run, for those
//! who want a job in the same transaction as their data (issue 21). It passes the same
//! conformance suite, on topics of 1 and of 8 partitions (a topic's jobs stay together
//! whatever its count, as on the embedded engine). Each operation checks its arguments in
//! Rust, then calls one function of the engine's library in one round trip on a pooled
//! connection: the functions play the part the Lua functions play on Redis, and mirror them.
//! A worker's cycle, `settle_and_reserve`, calls its settlements' and its reserve's functions
//! in one transaction, so one commit, in a task of its own (`delayq_core::detach_lease`), then
//! waits when nothing was due. ARCHITECTURE.md has the map of the whole project and follows
//! one job through this engine.
//!
//! The library is installed at connect in one transaction under an advisory lock. A schema or
//! a library newer than the build is refused (`InvalidConfig`); an older library, or the same
//! version with other text, is replaced (`tests/migrate.rs`).
//!
//! Connecting: TLS with rustls on ring, with libpq's meaning of `sslmode` (`prefer` and
//! `require` encrypt without checking the certificate, `verify-ca` checks the chain only,
//! `verify-full` also the name, against the system's authorities and `sslrootcert`);
//! `PostgresConfig` takes `sslmode` and `sslrootcert` out of the URL, which the driver would
//! refuse. Errors: SQLSTATEs onto `Error` (connection classes, 57P and 53 are `Unavailable`,
//! a full disk `Full`; a refused login (class 28), privilege or database and a failed TLS
//! handshake `InvalidConfig`, which `delayq serve` does not wait out, `tests/tls.rs`); the
//! library's own refusals are `DQ0xx` with a detail the engine turns into the contract's
//! error for the job they name.
//!
//! # Schema
//!
//! Everything lives in the schema `delayq` (`migrations/0001_init.sql`;
//! `0002_schedule_expiry.sql` adds the schedules' expiry columns, `0003_lease_tokens.sql` the
//! table `tokens`). Times are milliseconds on the database's clock (`delayq.now_ms()`: `clock_timestamp()`, read inside
//! each function, so a long transaction does not freeze it), stored as `bigint`.
//!
//! - `topics`: one row per topic: `tid`, name, listed, the expired-lease and expired-job
//!   counters, the settings (`cfg_*`, NULL for unset) and `paused_until`; `Engine::topics`
//!   lists the rows `listed` or paused now (`paused_until` ahead of `delayq.now_ms()`).
//! - `jobs`: one row per job, keyed `(tid, id)`: state 1 waiting (delayed before `ready_at`,
//!   ready from it on: time, not a write, makes a job due), 3 reserved (under `token` until
//!   `deadline`), 4 dead (`deadline` = time of death), 5 done (kept by a retention;
//!   `deadline` = time of the ack); priority, `seq` (push order), ttr, attempts (a reserve
//!   counts its delivery as it leases, a release takes it back), back-off, expiry, last error,
//!   body.
//! - Partial indexes, each on a literal state so the planner matches it whatever the
//!   parameters: `jobs_waiting (tid, priority, ready_at, seq) WHERE state = 1` (one band per
//!   priority, so a band's due jobs are one range), `jobs_reserved (tid, deadline)`,
//!   `jobs_dead` and `jobs_done (tid, deadline, id)`, `jobs_expiring (tid, expires_at)`.
//! - `delayq.seq`, the sequence of push order.
//! - `tokens`: per topic that has leased a job, the largest lease token it handed out
//!   (`lib.sql` `next_token`, `tokens_used`): a lease's token is after it and never below the
//!   database's clock in µs, written only under the topic's reserve lock, so each lease of a
//!   job has a larger token than every earlier one (the contract's fencing), across purges and
//!   lost commits ("Lease tokens survive lost commits", below, says why).
//! - `schedules`, `destinations`, `number_ranges` (with `meta.numbers`, the last number
//!   claimed), `meta` (the library's version and hash).
//!
//! # The hot path
//!
//! - **Push** (`sql/push.sql`): one call per run of jobs of one topic (a batch over several
//!   topics is one transaction). It reads the topic's settings, checks every job before the
//!   first write (an absolute time too far, a body over the topic's limit, an expiry not after
//!   the due time: `DQ004`-`DQ006`), takes the topic's advisory lock shared, then `INSERT … ON
//!   CONFLICT (tid, id) DO NOTHING` per job (a concurrent push of the same id waits for the
//!   other's commit, then sees its job); a conflict locks the existing row and keeps it, or
//!   replaces or debounces a waiting one, or replaces a done one. One `NOTIFY` per call names
//!   the earliest due time it placed.
//! - **Reserve** (`sql/reserve.sql`): per topic in the order asked, fail the expired leases
//!   and expire the jobs past their expiry (bounded), skip a paused topic, then walk the
//!   priority bands: one probe finds a band's earliest job (`ORDER BY priority, ready_at LIMIT
//!   1` with `priority > previous`), and when it is due one statement claims the band's due
//!   jobs: `UPDATE … FROM (SELECT … ORDER BY ready_at, seq LIMIT n FOR UPDATE SKIP LOCKED)`
//!   sets state 3, attempts + 1, deadline now + ttr, and a token numbered in that order from
//!   the topic's next one (`next_token`: after its row in `tokens`, never below the clock in
//!   µs; `tokens_used` records the last, one upsert per call that leased). The leasing reserves
//!   of one topic take turns on an advisory lock held to their commit, so a topic's tokens grow
//!   in the order its jobs are handed out, as on the other engines (the worker orders its
//!   buffer by them); rows other operations hold are skipped, never waited for. The rows come back
//!   unordered; Rust sorts them by (topic position, priority, due time, push order).
//! - **Settle** (`sql/lease.sql`): each checks the lease in the statement that changes the row
//!   (`state + 0 = 3 AND token = $t AND deadline > now`): an ack is one `DELETE` (an `UPDATE`
//!   to done under a retention, then the done jobs are trimmed), a refusal reads the row to say
//!   why (`delayq.refusal`). Nack, release, touch and bury lock the leased row first
//!   (`delayq.leased`). The row is found by the primary key: `state + 0` keeps the planner off
//!   `jobs_reserved`, whose predicate `state = 3` would otherwise match, and whose walk over
//!   every lease of the topic to filter one id made an ack cost as much as the topic's leases
//!   (BENCHMARKS.md, "delayq on PostgreSQL beside pg-boss", measured both).
//!   A worker's cycle (`settle_and_reserve`) runs its settlements and its reserve in one
//!   transaction: one commit, so one WAL flush, per cycle.
//!
//! `tests/plans.rs` checks the plans of all of this: with `auto_explain` logging the plan of
//! every statement, nested ones included, every operation runs eight times (PL/pgSQL moves to
//! generic plans after five) on 20,000 jobs and 2,000 number ranges, and no plan may scan
//! `jobs` or `number_ranges`, or filter jobs on their id (a lookup by id is an index condition
//! on the primary key).
//!
//! **Architecture Invariant:** every check that can refuse a call runs before its first write,
//! inside the function, so a refusal changes nothing, even inside a caller's own transaction.
//!
//! **Architecture Invariant:** time is the database's clock; no argument carries "now".
//!
//! # Waiting, time and the sweeper
//!
//! Every write that makes a job due now, or may make one due earlier than a waiter sleeps
//! until, sends `NOTIFY delayq, '<due ms> <topic>'` (`delayq.signal`; delivered at commit, so
//! a rolled-back push wakes no one). Each engine keeps one `LISTEN delayq` connection
//! (`waiters.rs`, made again with a back-off when lost, every waiter woken when it comes back)
//! and wakes the waiters of that topic whose planned wake-up is later than the signalled due
//! time. A reserve that finds nothing asks `delayq.next_wake` (the earliest due time, by a band
//! walk, lease deadline, expiry, or pause end of its topics) and sleeps until then, a signal,
//! its own deadline, or at most 10 s (250 ms while the listening connection is down): the
//! coarse safety wake. A due job another reserver holds makes the next look 1 ms later.
//!
//! The sweeper (`sweeper.rs`) runs `delayq.tick` (every topic's expired leases fail, expired
//! jobs go dead or are dropped) at the earliest lease deadline or expiry in the database, at
//! least every 10 s; a reserve that leases tells it its earliest deadline. So a lease runs out
//! on time whether or not anyone reserves from its topic, and whichever process gets there
//! first applies it (`SKIP LOCKED`).
//!
//! The vacuum (`vacuum.rs`) runs `VACUUM (SKIP_LOCKED) delayq.jobs` once its process has handed
//! out 10,000 jobs since the last run. Each hand-out leaves dead row versions (the lease's
//! `UPDATE`, the ack's `DELETE`) and an entry at the front of its band in `jobs_waiting`, where
//! every reserve starts its walk; the autovacuum daemon looks once a minute by default, so
//! without it a steady drain slows down as it goes (BENCHMARKS.md, "delayq on PostgreSQL
//! beside pg-boss", measured by how much). Runs are at least a second apart
//! and ten times as far apart as the last took; a table already being vacuumed is skipped; a
//! role that does not own the table gets PostgreSQL's warning and the queue is only slower
//! (`tests/vacuum.rs`, with the daemon off for the table).
//!
//! **Architecture Invariant:** no loop polls: a waiter sleeps until the next event it knows
//! of, a signal, or the coarse safety wake.
//!
//! # A push in the caller's transaction
//!
//! `PostgresEngine::push_in(&mut tokio_postgres::Transaction, job)` calls the same push
//! function on the caller's connection, inside a savepoint: the job exists if and only if the
//! caller commits, waiters hear of it at the commit, and a refused push rolls back to the
//! savepoint, leaving the caller's transaction usable (`tests/push_in.rs`). The push holds the
//! topic's advisory lock shared until the caller commits, so a purge or a change of the
//! partition count of that topic (which take it alone) waits for it.
//!
//! # What happens to a job when something fails
//!
//! | failure | what happens |
//! |---|---|
//! | A delayq process is killed (kill -9) | Its committed writes are in PostgreSQL; an unanswered call may or may not have applied (a push is idempotent). Its leases run out and the sweeper of any other process (or any reserve of the topic) fails them. Tested by `tests/crash.rs`. |
//! | The postmaster is killed and restarted | Committed transactions are recovered from the WAL; calls in flight answer `Unavailable` (the pool makes new connections; the listener connects again and wakes every waiter, which then looks). Tested by `tests/crash.rs` (half the cycles kill PostgreSQL too) and the conformance suite's restart cases. |
//! | A connection is lost mid-call | `Unavailable`: the call may or may not have applied; retrying is safe (a settlement that landed answers as a repeated one). |
//! | A NOTIFY is lost (listener down) | Waiters look every 250 ms until it is back, then all look at once. |
//! | The disk is full | `Full` (SQLSTATE 53100); reads and deletes go on. |
//! | A caller's transaction stays open after `push_in` | Its job is invisible until it commits; a purge or partition change of that topic waits for it. |
//!
//!
//! # Lease tokens survive lost commits
//!
//! `lib.sql` `next_token` hands out a token after the topic's last one in the table `tokens`,
//! never below the database's clock in µs. A failover to an asynchronous standby, or a
//! restore of an older backup, loses the last commits, the leases and the topic's last token
//! with them; those tokens were below the old server's clock (a topic hands out far fewer
//! than one token a µs), and the promoted standby or the restored server runs later, on a
//! clock that agrees within milliseconds, so its tokens are larger. Tokens were once taken in
//! blocks of 1024 from the push sequence, which the lost commits set back too:
//! `tests/fencing.rs` restores a copy of the data directory taken before a lease, and saw the
//! same token come out again then; now a larger one does.
#![deny(missing_docs)]

mod config;
mod connect;
mod engine;
mod error;
mod library;
mod ops;
mod row;
mod status;
mod sweeper;
mod vacuum;
mod waiters;

pub use config::PostgresConfig;
pub use engine::PostgresEngine;
