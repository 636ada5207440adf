//! The operations: each module owns its library functions' arguments, the decoding of their
//! rows and what their statuses mean ([`crate::status::Status`]); `engine.rs` checks the
//! caller's input and dispatches here. Every operation takes a connection (a pooled one, or
//! a transaction); only the reserves, which wait and tell the sweeper and the vacuum what
//! they leased, take [`Ops`], the state the engine's clones share.
//!
//! - `push`: push, one call per run of jobs of one topic (in the caller's transaction too).
//! - `reserve`: reserve (the long-poll), settle-and-reserve, the next wake-up of a waiter.
//! - `lease`: ack (many at once), nack, release, touch, bury.
//! - `admin`: get, delete, reschedule, kick, kick-all, bury without a lease, reserve by id,
//!   list, stats, the topic list, purge, the clock.
//! - `topics`: a topic's settings and its pause.
//! - `numbers`: the engine-wide number sequence and the topic of each claimed range.
//! - `schedules`: stored schedules (put, read, list, delete, progress).
//! - `destinations`: the topics' push destinations (put, read, list, delete).

pub(crate) mod admin;
pub(crate) mod destinations;
pub(crate) mod lease;
pub(crate) mod numbers;
pub(crate) mod push;
pub(crate) mod reserve;
pub(crate) mod schedules;
pub(crate) mod topics;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use deadpool_postgres::{GenericClient, Object, Pool};
use delayq_core::{Delivery, Error, Limits, Result};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::{db_err, pool_err};
use crate::sweeper::Sweeper;
use crate::vacuum::Vacuum;
use crate::waiters::Waiters;

/// What the engine's clones share: the pool, the limits, and whom a reserve tells.
pub(crate) struct Ops {
    pub(crate) pool: Pool,
    pub(crate) limits: Limits,
    pub(crate) waiters: Arc<Waiters>,
    pub(crate) sweeper: Arc<Sweeper>,
    pub(crate) vacuum: Arc<Vacuum>,
    /// Where the next reserve over several topics starts (they take turns being first).
    pub(crate) rotate: AtomicUsize,
}

impl Ops {
    /// A pooled connection.
    pub(crate) async fn client(&self) -> Result<Object> {
        self.pool
            .get()
            .await
            .map_err(|e| pool_err("getting a connection", e))
    }

    /// Tells the sweeper of the earliest deadline of the leases in `got`, and the vacuum
    /// how many jobs were handed out.
    pub(crate) fn note_leases(&self, got: &[Delivery]) {
        self.vacuum.note(got.len());
        if let Some(d) = got.iter().filter_map(|d| d.job.deadline).min() {
            self.sweeper
                .note(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        }
    }
}

/// Runs `sql` with `params` on `client` (a statement prepared once per connection) and
/// answers its rows, a failure naming `what`.
pub(crate) async fn query<C: GenericClient>(
    client: &C,
    what: &str,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>> {
    let stmt = client
        .prepare_cached(sql)
        .await
        .map_err(|err| db_err(what, err))?;
    client
        .query(&stmt, params)
        .await
        .map_err(|err| db_err(what, err))
}

/// The one row a statement that always answers one row answered.
pub(crate) fn one(rows: Vec<Row>, what: &str) -> Result<Row> {
    rows.into_iter()
        .next()
        .ok_or_else(|| Error::Internal(format!("{what}: PostgreSQL answered no row")))
}
