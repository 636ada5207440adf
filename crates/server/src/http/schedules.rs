//! Schedules (issue 14): recurring jobs kept by the engine and run by every server's
//! scheduler (`delayq_worker::Scheduler`). Their wire types live here with their handlers.

use std::time::Duration;

use axum::extract::State;
use delayq_core::{
    Error, Expiry, JobSchedule, JobTemplate, Misfire, OnExpire, ScheduleName, StoredSchedule,
    Timestamp, Topic, duration_ms,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::dto::{
    BackoffDto, Encoding, OnExpireDto, decode_body, encode_body, parse_rfc3339, rfc3339,
};
use super::error::ApiError;
use super::extract::{Json, Path};
use super::fields::locate;
use super::params::CommonErrors;
use crate::AppState;

/// A schedule's name in the path.
#[derive(Deserialize, IntoParams, Debug)]
#[into_params(parameter_in = Path)]
pub struct SchedulePath {
    /// The schedule's name: 1 to 100 characters from `A-Za-z0-9_.:-`.
    #[param(pattern = "^[A-Za-z0-9_.:-]{1,100}$")]
    pub name: String,
}

/// What to do with fire times that passed while no server ran.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum MisfireDto {
    /// Push nothing for them (as cron). The default.
    #[default]
    Skip,
    /// Push one job now, for the latest of them.
    Once,
    /// Push a job now for each of them, at most `misfire_limit` (the latest ones).
    Each,
}

/// A schedule: a cron expression in a time zone, and the job each fire pushes.
///
/// Each fire pushes one job whose id is `schedule:<name>:<fire time in ms>` (so several
/// servers push one job per fire), due at the fire time (plus a jitter below `jitter_ms`).
/// Daylight-saving changes follow Vixie cron: a fire in the skipped hour fires when the
/// clock jumps; a fixed time in the repeated hour fires once.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRequest {
    /// Five fields (minute hour day-of-month month day-of-week), six with seconds first, or
    /// a nickname: `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly`. A
    /// seventh field (the year) is refused: bound the schedule with `start` and `end`.
    pub cron: String,
    /// An IANA time zone (`Europe/Berlin`); default `UTC`.
    pub time_zone: Option<String>,
    /// The topic the jobs go to.
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,200}$")]
    pub topic: String,
    /// The jobs' payload, as `encoding` says.
    #[serde(default)]
    pub body: String,
    /// `utf8` (default) or `base64`.
    #[serde(default)]
    pub encoding: Encoding,
    /// The jobs' priority (default 0).
    // A u32: utoipa would say int32, whose values stop at 2147483647 (issue 36).
    #[schema(format = Int64, maximum = 4_294_967_295_u64)]
    pub priority: Option<u32>,
    /// The jobs' lease length in ms (default: the topic's).
    #[schema(minimum = 1000, maximum = 86_400_000)]
    pub ttr_ms: Option<u64>,
    /// The jobs' deliveries before dead (default: the topic's).
    #[schema(minimum = 1, maximum = 10_000)]
    pub max_attempts: Option<u32>,
    /// The jobs' retry back-off (default: the topic's).
    pub backoff: Option<BackoffDto>,
    /// No fire before this RFC 3339 time.
    #[schema(format = DateTime)]
    pub start: Option<String>,
    /// No fire after this RFC 3339 time.
    #[schema(format = DateTime)]
    pub end: Option<String>,
    /// Each job is due up to this many ms after its fire time (0 to 3,600,000; default 0).
    #[schema(maximum = 3_600_000)]
    pub jitter_ms: Option<u64>,
    /// What to do with fires missed while no server ran (default `skip`). The fire after
    /// the one pushed last is late, not missed, and pushed whatever this says, when found
    /// less than 60 s (or the schedule's interval, when shorter) after its time. The fire
    /// pushed ahead before an outage is delivered after it, late, whatever this says (give
    /// `max_lateness_ms` to have it expire instead).
    #[serde(default)]
    pub misfire: MisfireDto,
    /// With `misfire: each`, the most missed fires pushed (1 to 1000; default 10).
    #[schema(minimum = 1, maximum = 1000)]
    pub misfire_limit: Option<u32>,
    /// Each job is not delivered more than this many ms after its due time (1 ms to 10
    /// years), as a push's `max_lateness_ms`: its fire time plus jitter, or the time a missed
    /// fire is pushed. At most one of this and `expires_at`.
    #[schema(minimum = 1, maximum = 315_576_000_000_u64)]
    pub max_lateness_ms: Option<u64>,
    /// No job is delivered after this RFC 3339 time, as a push's `expires_at` (one time for
    /// every job), and no fire whose job would be due at or after it is pushed.
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    /// With `max_lateness_ms` or `expires_at`: `dead` (default) sends an expired job to dead
    /// with the reason `expired`, `drop` deletes it.
    pub on_expire: Option<OnExpireDto>,
}

/// A stored schedule, with its state.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ScheduleDto {
    /// The name.
    pub name: String,
    /// The cron expression.
    pub cron: String,
    /// The time zone.
    pub time_zone: String,
    /// The topic.
    pub topic: String,
    /// The jobs' payload, as `encoding` says.
    pub body: String,
    /// `utf8` when the payload is valid UTF-8, else `base64`.
    pub encoding: Encoding,
    /// The jobs' priority.
    // A u32: utoipa would say int32, whose values stop at 2147483647 (issue 36).
    #[schema(format = Int64, maximum = 4_294_967_295_u64)]
    pub priority: u32,
    /// The jobs' lease length in ms; absent: the topic's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttr_ms: Option<u64>,
    /// The jobs' deliveries before dead; absent: the topic's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The jobs' retry back-off; absent: the topic's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffDto>,
    /// No fire before this time (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// No fire after this time (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// The jitter in ms.
    pub jitter_ms: u64,
    /// The misfire policy.
    pub misfire: MisfireDto,
    /// With `each`, the most missed fires pushed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misfire_limit: Option<u32>,
    /// The jobs' `max_lateness_ms`; absent: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_lateness_ms: Option<u64>,
    /// The jobs' `expires_at` (RFC 3339); absent: none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// What happens to an expired job; absent without an expiry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_expire: Option<OnExpireDto>,
    /// 1 when created, + 1 at each replacement.
    pub revision: u64,
    /// The latest fire time whose job was pushed (RFC 3339); absent before the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pushed_through: Option<String>,
    /// The next fire time (RFC 3339); absent when the schedule has ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_fire: Option<String>,
    /// `next_fire` in ms since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_fire_ms: Option<u64>,
}

/// Every schedule.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct SchedulesResponse {
    /// The schedules, by name.
    pub schedules: Vec<ScheduleDto>,
}

/// The default of `misfire_limit` with `misfire: each`.
const DEFAULT_MISFIRE_LIMIT: u32 = 10;

impl ScheduleRequest {
    fn into_core(self, name: ScheduleName) -> Result<JobSchedule, ApiError> {
        let at = |s: Option<String>, field: &'static str| -> Result<Option<Timestamp>, ApiError> {
            s.map(|s| {
                parse_rfc3339(&s, field)
                    .map_err(|_| {
                        ApiError::invalid_argument(format!(
                            "{field} {s:?} is not an RFC 3339 time such as 2026-01-02T15:04:05.000+00:00"
                        ))
                    })
                    .map_err(|e| e.at(format!("/{field}")))
            })
            .transpose()
        };
        let topic = Topic::new(&self.topic).map_err(|e| ApiError::from(e).at("/topic"))?;
        // As a push's: one expiry at most, and on_expire only with one.
        let expiry = match (at(self.expires_at, "expires_at")?, self.max_lateness_ms) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid_argument(
                    "give expires_at or max_lateness_ms, not both",
                )
                .at("/max_lateness_ms"));
            }
            (Some(t), None) => Some(Expiry::At(t)),
            (None, Some(ms)) => Some(Expiry::AfterDue(Duration::from_millis(ms))),
            (None, None) => None,
        };
        if expiry.is_none() && self.on_expire.is_some() {
            return Err(ApiError::invalid_argument(
                "on_expire says what happens at an expiry; give expires_at or max_lateness_ms with it, or drop it",
            )
            .at("/on_expire"));
        }
        let template = JobTemplate {
            body: decode_body(self.body, self.encoding)?,
            priority: self.priority.unwrap_or(0),
            ttr: self.ttr_ms.map(Duration::from_millis),
            max_attempts: self.max_attempts,
            backoff: self.backoff.map(BackoffDto::into_core),
            expiry,
            on_expire: self.on_expire.map(OnExpire::from).unwrap_or_default(),
        };
        let misfire = match self.misfire {
            MisfireDto::Skip => Misfire::Skip,
            MisfireDto::Once => Misfire::Once,
            MisfireDto::Each => Misfire::Each(self.misfire_limit.unwrap_or(DEFAULT_MISFIRE_LIMIT)),
        };
        let (start, end) = (at(self.start, "start")?, at(self.end, "end")?);
        let zone = self.time_zone.as_deref().unwrap_or("UTC");
        let s = JobSchedule::new(name, &self.cron, zone, topic, template)
            .map_err(schedule_err)?
            .with_window(start, end)
            .map_err(schedule_err)?
            .with_jitter(Duration::from_millis(self.jitter_ms.unwrap_or(0)))
            .map_err(schedule_err)?
            .with_misfire(misfire);
        s.validate().map_err(schedule_err)?;
        Ok(s)
    }
}

/// A refusal of a schedule's field, at that field.
fn schedule_err(e: Error) -> ApiError {
    match &e {
        Error::InvalidArgument {
            what: "misfire", ..
        } => ApiError::from(e).at("/misfire_limit"),
        Error::InvalidArgument { what: "jitter", .. } => ApiError::from(e).at("/jitter_ms"),
        _ => locate(e, "/start"),
    }
}

fn name_of(path: &SchedulePath) -> Result<ScheduleName, ApiError> {
    ScheduleName::new(&path.name).map_err(ApiError::from)
}

/// The wire form of a stored schedule at the engine's `now`.
fn dto(stored: &StoredSchedule, now: Timestamp) -> ScheduleDto {
    let s = &stored.schedule;
    let t = s.template();
    let (body, encoding) = encode_body(&t.body);
    let (misfire, misfire_limit) = match s.misfire() {
        Misfire::Skip => (MisfireDto::Skip, None),
        Misfire::Once => (MisfireDto::Once, None),
        Misfire::Each(n) => (MisfireDto::Each, Some(n)),
    };
    let (max_lateness_ms, expires_at) = match t.expiry {
        Some(Expiry::AfterDue(d)) => (Some(duration_ms(d)), None),
        Some(Expiry::At(at)) => (None, Some(rfc3339(at))),
        None => (None, None),
    };
    let next = delayq_worker::next_fire(stored, now);
    ScheduleDto {
        name: s.name().to_string(),
        cron: s.cron().to_string(),
        time_zone: s.time_zone().to_string(),
        topic: s.topic().to_string(),
        body,
        encoding,
        priority: t.priority,
        ttr_ms: t.ttr.map(duration_ms),
        max_attempts: t.max_attempts,
        backoff: t.backoff.as_ref().map(BackoffDto::from_core),
        start: s.start().map(rfc3339),
        end: s.end().map(rfc3339),
        jitter_ms: duration_ms(s.jitter()),
        misfire,
        misfire_limit,
        max_lateness_ms,
        expires_at,
        on_expire: t.expiry.map(|_| t.on_expire.into()),
        revision: stored.revision,
        pushed_through: stored.through.map(rfc3339),
        next_fire: next.map(rfc3339),
        next_fire_ms: next.map(Timestamp::as_millis),
    }
}

/// Every schedule, with its next fire time.
#[utoipa::path(
    get,
    path = "/v1/schedules",
    tag = "schedules",
    responses((status = 200, description = "The schedules, by name", body = SchedulesResponse), CommonErrors)
)]
pub async fn list_schedules(
    State(state): State<AppState>,
) -> Result<axum::Json<SchedulesResponse>, ApiError> {
    let all = state.engine.schedules().await?;
    let now = state.engine.now().await?;
    Ok(axum::Json(SchedulesResponse {
        schedules: all.iter().map(|s| dto(s, now)).collect(),
    }))
}

/// One schedule, with its next fire time.
#[utoipa::path(
    get,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 200, description = "The schedule", body = ScheduleDto),
        (status = 404, description = "No such schedule", body = super::error::ErrorBody),
        CommonErrors
    )
)]
pub async fn get_schedule(
    State(state): State<AppState>,
    Path(path): Path<SchedulePath>,
) -> Result<axum::Json<ScheduleDto>, ApiError> {
    let name = name_of(&path)?;
    let stored = state
        .engine
        .schedule(&name)
        .await?
        .ok_or_else(|| missing(&name))?;
    let now = state.engine.now().await?;
    Ok(axum::Json(dto(&stored, now)))
}

/// Create or replace a schedule, for every server; its next fire is pushed at once.
///
/// A replaced schedule starts afresh (revision + 1): the fire its old definition had pushed
/// ahead is deleted if still delayed; jobs already due stay.
#[utoipa::path(
    put,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    params(SchedulePath),
    request_body = ScheduleRequest,
    responses((status = 200, description = "The schedule as stored", body = ScheduleDto), CommonErrors)
)]
pub async fn put_schedule(
    State(state): State<AppState>,
    Path(path): Path<SchedulePath>,
    Json(req): Json<ScheduleRequest>,
) -> Result<axum::Json<ScheduleDto>, ApiError> {
    let name = name_of(&path)?;
    let schedule = req.into_core(name)?;
    let stored = delayq_worker::put_schedule(state.engine.as_ref(), &schedule).await?;
    state.scheduler.notify_one();
    let now = state.engine.now().await?;
    Ok(axum::Json(dto(&stored, now)))
}

/// Delete a schedule, and its fire pushed ahead if still delayed; jobs already due stay.
#[utoipa::path(
    delete,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 200, description = "The schedule that was deleted", body = ScheduleDto),
        (status = 404, description = "No such schedule", body = super::error::ErrorBody),
        CommonErrors
    )
)]
pub async fn delete_schedule(
    State(state): State<AppState>,
    Path(path): Path<SchedulePath>,
) -> Result<axum::Json<ScheduleDto>, ApiError> {
    let name = name_of(&path)?;
    let old = delayq_worker::delete_schedule(state.engine.as_ref(), &name)
        .await?
        .ok_or_else(|| missing(&name))?;
    let now = state.engine.now().await?;
    Ok(axum::Json(dto(&old, now)))
}

fn missing(name: &ScheduleName) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "not_found",
        format!("no schedule named {name}; GET /v1/schedules lists them"),
    )
}
