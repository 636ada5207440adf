//! A topic's settings ([`TopicConfig`]) as the `cfg_*` columns of `topics` store them
//! (`migrations/0005_topic_config.sql`, `0006_done.sql`, `0011_partitions.sql`; NULL:
//! unset): the column list, decoding, writing.

use std::time::Duration;

use delayq_core::{Backoff, Result, Retention, TopicConfig, duration_ms};
use rusqlite::{Row, params};

use crate::error::db_err;
use crate::tx::Tx;

/// The settings' columns, in [`decode`]'s order.
pub(crate) const CONFIG_COLS: &str = "cfg_ttr_ms, cfg_max_attempts, cfg_bo_base_ms, \
     cfg_bo_factor, cfg_bo_max_ms, cfg_bo_jitter, cfg_max_body, cfg_done_max, cfg_done_age_ms, cfg_partitions";

/// Decodes [`CONFIG_COLS`] starting at column `at`.
pub(crate) fn decode(r: &Row<'_>, at: usize) -> rusqlite::Result<TopicConfig> {
    let bo: (Option<u64>, Option<u32>, Option<u64>, Option<u32>) = (
        r.get(at + 2)?,
        r.get(at + 3)?,
        r.get(at + 4)?,
        r.get(at + 5)?,
    );
    Ok(TopicConfig {
        ttr: r.get::<_, Option<u64>>(at)?.map(Duration::from_millis),
        max_attempts: r.get(at + 1)?,
        backoff: match bo {
            (Some(base), Some(factor), Some(max), Some(jitter)) => {
                Some(Backoff::from_parts(base, factor, max, jitter))
            }
            _ => None,
        },
        max_body: r.get(at + 6)?,
        retention: match (
            r.get::<_, Option<u32>>(at + 7)?,
            r.get::<_, Option<u64>>(at + 8)?,
        ) {
            (Some(max_jobs), Some(age)) => Some(Retention {
                max_jobs,
                max_age: Duration::from_millis(age),
            }),
            _ => None,
        },
        partitions: r.get(at + 9)?,
    })
}

/// The partition count set for topic `tid` as the transaction sees it (1 when unset).
pub(crate) fn partitions(tx: &Tx<'_>, tid: i64) -> Result<u16> {
    let n: Option<u16> = tx
        .conn
        .prepare_cached("SELECT cfg_partitions FROM topics WHERE tid = ?1")
        .and_then(|mut s| s.query_row([tid], |r| r.get(0)))
        .map_err(|e| db_err("reading a topic's partitions", e))?;
    Ok(n.unwrap_or(1))
}

/// Writes the settings of topic `tid` (every column: an unset field is NULL).
pub(crate) fn write(tx: &Tx<'_>, tid: i64, c: &TopicConfig) -> Result<()> {
    let b = c.backoff.as_ref();
    tx.conn
        .prepare_cached(
            "UPDATE topics SET cfg_ttr_ms = ?2, cfg_max_attempts = ?3, cfg_bo_base_ms = ?4, \
             cfg_bo_factor = ?5, cfg_bo_max_ms = ?6, cfg_bo_jitter = ?7, cfg_max_body = ?8, \
             cfg_done_max = ?9, cfg_done_age_ms = ?10, cfg_partitions = ?11 WHERE tid = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                tid,
                c.ttr.map(duration_ms),
                c.max_attempts,
                b.map(Backoff::base_ms),
                b.map(Backoff::factor),
                b.map(Backoff::max_ms),
                b.map(Backoff::jitter_permille),
                c.max_body.map(|n| n as u64),
                c.retention.map(|r| r.max_jobs),
                c.retention.map(|r| duration_ms(r.max_age)),
                c.partitions,
            ])
        })
        .map_err(|e| db_err("setting a topic's settings", e))?;
    Ok(())
}
