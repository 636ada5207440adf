//! `GET /v1/series` (issue 15): the dashboard's time series, what this server did per minute
//! over the last hour and how late it delivered (see `crate::series`). Its wire types live
//! here with its handler.

use std::time::{Instant, SystemTime};

use axum::extract::State;
use delayq_core::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::dto::rfc3339;
use super::error::ApiError;
use super::extract::Query;
use super::params::{CommonErrors, topic};
use crate::AppState;
use crate::series::{BOUNDS, Counts, Minute, Snapshot};

/// What the answer says of its scope, and the dashboard shows.
const SCOPE: &str = "per server, since it started";

/// The query of `GET /v1/series`.
#[derive(Deserialize, IntoParams, Debug)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SeriesQuery {
    /// One topic; absent: every topic this server tracks, summed.
    #[param(pattern = "^[A-Za-z0-9_.:-]{1,200}$")]
    pub topic: Option<String>,
}

/// What this server did, per minute over the last hour, and how late its deliveries were.
///
/// Per server, since it started: the counts are this server's own (what it pushed, delivered
/// and settled through its API), kept in its memory; other servers of the same engine keep
/// their own, and a restart begins again at zero.
#[derive(Serialize, ToSchema, Debug)]
pub struct SeriesResponse {
    /// The topic asked for; null: every topic this server tracks (at most 256, the least
    /// recently active dropped first), summed.
    pub topic: Option<String>,
    /// Always `per server, since it started`.
    pub scope: &'static str,
    /// When this server started counting, RFC 3339 (this server's clock).
    pub since: String,
    /// `since` in ms since the Unix epoch.
    pub since_ms: u64,
    /// One per minute, oldest first: the last 60 minutes (fewer in the server's first hour);
    /// the last is the minute in progress. Minutes count from the server's start.
    pub minutes: Vec<MinuteDto>,
    /// The deliveries' lateness (delivery time minus due time, on the engine's clock).
    pub lateness: LatenessDto,
}

/// One minute of what this server did.
#[derive(Serialize, ToSchema, Debug)]
pub struct MinuteDto {
    /// When the minute began, RFC 3339.
    pub start: String,
    /// `start` in ms since the Unix epoch.
    pub start_ms: u64,
    /// Jobs created by pushes through this server.
    pub pushed: u64,
    /// Deliveries handed out by this server's reserves.
    pub delivered: u64,
    /// Deliveries acked through this server.
    pub acked: u64,
    /// Jobs this server sent to dead: buried, or nacked on their last attempt (a lease that
    /// runs out on the last attempt is not seen by any server).
    pub dead: u64,
}

/// The lateness histogram and its percentiles, over the last minute and the last hour.
#[derive(Serialize, ToSchema, Debug)]
pub struct LatenessDto {
    /// The histogram's bucket bounds in ms, smallest first: bucket `i` counts lateness up to
    /// `bounds_ms[i]` (above the one before); one more bucket counts what is above the last.
    /// The same bounds as `/metrics`' `delayq_lateness_seconds`.
    pub bounds_ms: Vec<f64>,
    /// The last 60 seconds.
    pub last_minute: LatenessWindow,
    /// The minutes of `minutes`.
    pub last_hour: LatenessWindow,
}

/// The lateness of the deliveries of a window of time.
#[derive(Serialize, ToSchema, Debug)]
pub struct LatenessWindow {
    /// Deliveries.
    pub count: u64,
    /// Median lateness in ms, estimated from the histogram (linear within a bucket, never
    /// above `max_ms`); null without deliveries.
    pub p50_ms: Option<f64>,
    /// 90th percentile, as `p50_ms`.
    pub p90_ms: Option<f64>,
    /// 99th percentile, as `p50_ms`.
    pub p99_ms: Option<f64>,
    /// The largest lateness in ms; null without deliveries.
    pub max_ms: Option<f64>,
    /// Deliveries per bucket: one count per bound of `bounds_ms`, then the count above it.
    pub counts: Vec<u64>,
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl From<&Minute> for MinuteDto {
    fn from(m: &Minute) -> Self {
        let start_ms = millis(m.start);
        MinuteDto {
            start: rfc3339(Timestamp::from_millis(start_ms)),
            start_ms,
            pushed: m.counts.pushed.into(),
            delivered: m.counts.delivered.into(),
            acked: m.counts.acked.into(),
            dead: m.counts.dead.into(),
        }
    }
}

impl From<&Counts> for LatenessWindow {
    fn from(c: &Counts) -> Self {
        let count = c.observed();
        let max_ms = c.max_lateness_us as f64 / 1000.0;
        // Seconds to milliseconds can round a quantile capped at the max (7.827 ms read as
        // 0.007827 s) just above the max in milliseconds (7.827000000000001): cap it again.
        let ms = |s: Option<f64>| s.map(|s| (s * 1000.0).min(max_ms));
        LatenessWindow {
            count,
            p50_ms: ms(c.quantile(0.5)),
            p90_ms: ms(c.quantile(0.9)),
            p99_ms: ms(c.quantile(0.99)),
            max_ms: (count > 0).then_some(max_ms),
            counts: c.lateness.iter().map(|&n| u64::from(n)).collect(),
        }
    }
}

impl SeriesResponse {
    fn new(topic: Option<String>, s: &Snapshot) -> Self {
        let since_ms = millis(s.since);
        SeriesResponse {
            topic,
            scope: SCOPE,
            since: rfc3339(Timestamp::from_millis(since_ms)),
            since_ms,
            minutes: s.minutes.iter().map(MinuteDto::from).collect(),
            lateness: LatenessDto {
                bounds_ms: BOUNDS.iter().map(|b| b * 1000.0).collect(),
                last_minute: LatenessWindow::from(&s.last_minute),
                last_hour: LatenessWindow::from(&s.last_hour),
            },
        }
    }
}

/// What this server did per minute over the last hour (pushed, delivered, acked, dead) and
/// the lateness of its deliveries (percentiles and histogram, last minute and last hour).
///
/// Per server, since it started: kept in this server's memory, not in the engine. A topic
/// this server has not seen (or no longer tracks: purged, or dropped beyond 256 topics)
/// answers zeros, not an error.
#[utoipa::path(
    get,
    path = "/v1/series",
    tag = "series",
    params(SeriesQuery),
    responses((status = 200, description = "The series (per server, since it started)", body = SeriesResponse), CommonErrors)
)]
pub async fn series(
    State(state): State<AppState>,
    Query(q): Query<SeriesQuery>,
) -> Result<axum::Json<SeriesResponse>, ApiError> {
    let t = q.topic.as_deref().map(topic).transpose()?;
    // A topic purged since (through any server) leaves the series, as it leaves /metrics.
    let listed = state.engine.topics().await?;
    state.metrics.sync_topics(&listed);
    let snapshot = state.metrics.series().snapshot(t.as_ref(), Instant::now());
    Ok(axum::Json(SeriesResponse::new(q.topic, &snapshot)))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use delayq_core::Topic;

    use super::LatenessWindow;
    use crate::series::Series;

    #[test]
    fn no_quantile_reads_above_the_max() {
        // 7.827 ms is 0.007827 s, which times 1000 is 7.827000000000001: the quantiles,
        // capped at the max in seconds, must not read above the max in milliseconds.
        let s = Series::new(Instant::now());
        let t = Topic::new("q").expect("topic");
        s.delivered(&t, Duration::from_micros(4250));
        s.delivered(&t, Duration::from_micros(4250));
        s.delivered(&t, Duration::from_micros(7827));
        let w = LatenessWindow::from(&s.snapshot(Some(&t), Instant::now()).last_minute);
        let max = w.max_ms.expect("a max");
        assert_eq!(max, 7.827);
        for p in [w.p50_ms, w.p90_ms, w.p99_ms] {
            let p = p.expect("a quantile");
            assert!(p <= max, "{p} > {max}: {w:?}");
        }
    }
}
