//! A topic's settings and its pause: the `cfg_*` columns and `paused_until` of its row of
//! `delayq.topics` (NULL: unset, not paused). Reading the settings is one plain query;
//! setting them and pausing are calls of `sql/topics.sql`, which check before they write.
//! Nothing is cached: every call reads the row, so every process sees a change at once.

use std::time::Duration;

use deadpool_postgres::Object;
use delayq_core::limits::MAX_DELAY;
use delayq_core::{Backoff, Error, Result, Retention, Timestamp, Topic, TopicConfig, duration_ms};
use tokio_postgres::Row;

use crate::error::db_err;
use crate::row::{signed, unsigned};
use crate::status::{Refusal, Status, refusal};

/// The pause of a topic until resumed, as `paused_until` stores it.
const UNTIL_RESUMED: i64 = i64::MAX;

/// Answers the settings of `topic`: what was set last, or the default (nothing set, or no
/// such topic).
pub(crate) async fn topic_config(client: &Object, topic: &Topic) -> Result<TopicConfig> {
    const DOING: &str = "reading a topic's settings";
    let stmt = client
        .prepare_cached(
            "SELECT tp.cfg_ttr_ms, tp.cfg_max_attempts, tp.cfg_bo_base_ms, tp.cfg_bo_factor, \
             tp.cfg_bo_max_ms, tp.cfg_bo_jitter, tp.cfg_max_body, tp.cfg_done_max, \
             tp.cfg_done_age_ms, tp.cfg_partitions \
             FROM delayq.topics tp WHERE tp.name = $1",
        )
        .await
        .map_err(|err| db_err(DOING, err))?;
    let row = client
        .query_opt(&stmt, &[&topic.as_str()])
        .await
        .map_err(|err| db_err(DOING, err))?;
    match row {
        Some(row) => decode(&row),
        None => Ok(TopicConfig::default()),
    }
}

/// Decodes the settings' columns as [`topic_config`] selects them.
fn decode(r: &Row) -> Result<TopicConfig> {
    let get = |i: usize| -> Result<Option<i64>> {
        r.try_get(i)
            .map_err(|err| Error::Internal(format!("a topic's settings: {err}")))
    };
    let ms = |i: usize, what: &str| -> Result<Option<u64>> {
        get(i)?.map(|v| unsigned(v, what)).transpose()
    };
    let small = |i: usize, what: &str| -> Result<Option<u32>> {
        get(i)?
            .map(|v| {
                u32::try_from(v)
                    .map_err(|_| Error::Internal(format!("a stored {what} is out of range: {v}")))
            })
            .transpose()
    };
    let backoff = match (
        ms(2, "back-off")?,
        small(3, "back-off factor")?,
        ms(4, "back-off")?,
        small(5, "back-off jitter")?,
    ) {
        (Some(base), Some(factor), Some(max), Some(jitter)) => {
            Some(Backoff::from_parts(base, factor, max, jitter))
        }
        _ => None,
    };
    let retention = match (small(7, "retained count")?, ms(8, "retention age")?) {
        (Some(max_jobs), Some(age)) => Some(Retention {
            max_jobs,
            max_age: Duration::from_millis(age),
        }),
        _ => None,
    };
    let partitions: Option<i32> = r
        .try_get(9)
        .map_err(|err| Error::Internal(format!("a topic's settings: {err}")))?;
    Ok(TopicConfig {
        ttr: ms(0, "ttr")?.map(Duration::from_millis),
        max_attempts: small(1, "max attempts")?,
        backoff,
        max_body: ms(6, "body limit")?.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        retention,
        partitions: partitions
            .map(|n| {
                u16::try_from(n).map_err(|_| {
                    Error::Internal(format!("a stored partition count is out of range: {n}"))
                })
            })
            .transpose()?,
    })
}

/// Replaces the settings of `topic` whole (validated by the caller), creating the topic off
/// the topic list when missing (`delayq.set_topic_config`); a change of the partition count
/// while the topic holds jobs is refused with [`Error::PartitionsInUse`], changing nothing.
pub(crate) async fn set_topic_config(
    client: &Object,
    topic: &Topic,
    config: &TopicConfig,
) -> Result<()> {
    const DOING: &str = "setting a topic's settings";
    let stmt = client
        .prepare_cached(
            "SELECT delayq.set_topic_config($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .await
        .map_err(|err| db_err(DOING, err))?;
    let b = config.backoff.as_ref();
    let ttr = config.ttr.map(|t| signed(duration_ms(t)));
    let max_attempts = config.max_attempts.map(i64::from);
    let bo_base = b.map(|b| signed(b.base_ms()));
    let bo_factor = b.map(|b| i64::from(b.factor()));
    let bo_max = b.map(|b| signed(b.max_ms()));
    let bo_jitter = b.map(|b| i64::from(b.jitter_permille()));
    let max_body = config
        .max_body
        .map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    let done_max = config.retention.map(|r| i64::from(r.max_jobs));
    let done_age = config.retention.map(|r| signed(duration_ms(r.max_age)));
    let partitions = config.partitions.map(i32::from);
    client
        .execute(
            &stmt,
            &[
                &topic.as_str(),
                &ttr,
                &max_attempts,
                &bo_base,
                &bo_factor,
                &bo_max,
                &bo_jitter,
                &max_body,
                &done_max,
                &done_age,
                &partitions,
            ],
        )
        .await
        .map_err(|err| match refusal(&err) {
            Some(Refusal {
                status: Status::PartitionsInUse,
                numbers,
            }) => Error::PartitionsInUse {
                topic: topic.clone(),
                from: numbers
                    .first()
                    .and_then(|&n| u16::try_from(n).ok())
                    .unwrap_or(1),
                to: config.partition_count(),
            },
            _ => db_err(DOING, err),
        })?;
    Ok(())
}

/// Pauses `topic` until `until` (`None`, or [`Timestamp::NEVER`]: until resumed); an
/// `until` not after the engine's clock ends its pause (`delayq.pause`, which wakes the
/// topic's waiters when it ends or shortens one). An end more than [`MAX_DELAY`] ahead is
/// refused, changing nothing.
pub(crate) async fn pause(client: &Object, topic: &Topic, until: Option<Timestamp>) -> Result<()> {
    const DOING: &str = "pausing a topic";
    let until = match until {
        None => UNTIL_RESUMED,
        Some(t) if t == Timestamp::NEVER => UNTIL_RESUMED,
        // Any other end is a time, refused when too far: never the stored "until resumed".
        Some(t) => signed(t.as_millis()).min(UNTIL_RESUMED - 1),
    };
    let stmt = client
        .prepare_cached("SELECT delayq.pause($1, $2, $3)")
        .await
        .map_err(|err| db_err(DOING, err))?;
    client
        .execute(
            &stmt,
            &[&topic.as_str(), &until, &signed(duration_ms(MAX_DELAY))],
        )
        .await
        .map_err(|err| match refusal(&err) {
            Some(Refusal {
                status: Status::TooFar,
                ..
            }) => Error::invalid(
                "until",
                "the pause would end more than 10 years from now; pause without an end instead",
            ),
            _ => db_err(DOING, err),
        })?;
    Ok(())
}
