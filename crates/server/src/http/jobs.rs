//! Jobs by id: push (one or a batch), get, delete, reschedule, and listing a state.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

use delayq_core::{Cursor, Error, Expiry, Limits, NewJob, Schedule, Timestamp, Topic};

use super::dto::{
    JobDto, ListResponse, OnConflictDto, PushBatchFailed, PushBatchRequest, PushBatchResponse,
    PushRequest, PushResponse, ReadyAtResponse, RescheduleRequest, apply_options, decode_body,
    delay_field, parse_rfc3339, schedule,
};
use super::error::ApiError;
use super::extract::{Json, Path, Query};
use super::fields::locate;
use super::params::{
    CommonErrors, JobPath, ListQuery, NotFound, TopicPath, WrongState, job_id, topic,
};
use super::scan::{BUDGET, check_prefix, scan};
use crate::AppState;
use delayq_core::limits::check_count;

/// A push's job, checked as far as it can be without the engine (whose body limit and clock
/// come later): a bad field is answered with its pointer, so a batch can say which item.
fn new_job(t: &Topic, req: PushRequest) -> Result<NewJob, ApiError> {
    let delay_field = delay_field(req.ready_at.is_some());
    let mut job = NewJob::new(t.clone(), decode_body(req.body, req.encoding)?)
        .with_schedule(schedule(req.delay_ms, req.ready_at.as_deref())?);
    if let Some(id) = &req.id {
        job = job.with_id(job_id(id).map_err(|e| e.at("/id"))?);
    }
    if req.max_wait_ms.is_some() && req.on_conflict != OnConflictDto::Debounce {
        return Err(ApiError::invalid_argument(
            "max_wait_ms bounds a debounce; give it with \"on_conflict\": \"debounce\", or drop it",
        )
        .at("/max_wait_ms"));
    }
    let on_conflict = req.on_conflict.into_core(req.max_wait_ms);
    let mut job = apply_options(job, req.ttr_ms, req.max_attempts, req.priority, req.backoff)
        .with_on_conflict(on_conflict);
    match (&req.expires_at, req.max_lateness_ms) {
        (Some(_), Some(_)) => {
            return Err(
                ApiError::invalid_argument("give expires_at or max_lateness_ms, not both")
                    .at("/max_lateness_ms"),
            );
        }
        (Some(at), None) => {
            job = job
                .with_expires_at(parse_rfc3339(at, "expires_at").map_err(|e| e.at("/expires_at"))?);
        }
        (None, Some(ms)) => job = job.with_max_lateness(Duration::from_millis(ms)),
        (None, None) => {
            if req.on_expire.is_some() {
                return Err(ApiError::invalid_argument(
                    "on_expire says what happens at an expiry; give expires_at or max_lateness_ms with it, or drop it",
                )
                .at("/on_expire"));
            }
        }
    }
    if let Some(o) = req.on_expire {
        job = job.with_on_expire(o.into());
    }
    let unlimited = Limits {
        max_body: usize::MAX,
    };
    job.validate(&unlimited)
        .map_err(|e| locate(e, delay_field))?;
    Ok(job)
}

/// What the engine alone can refuse in a push: a body over its limit, a due time more than
/// 10 years after its clock. Kept per job so that a refused batch can name an item at fault.
struct EngineChecked {
    body_len: usize,
    at: Option<Timestamp>,
    /// The absolute expiry, which the engine checks against the due time by its clock.
    expires_at: Option<Timestamp>,
}

impl EngineChecked {
    fn of(job: &NewJob) -> Self {
        EngineChecked {
            body_len: job.body.len(),
            at: match job.schedule {
                Schedule::At(at) => Some(at),
                Schedule::Delay(_) => None,
            },
            expires_at: match job.expiry {
                Some(Expiry::At(at)) => Some(at),
                _ => None,
            },
        }
    }

    /// An engine's refusal of a push of `jobs`, about the item at fault when one can be
    /// named: the first body over the limit, or the latest absolute due time (if any is too
    /// far ahead, that one is).
    fn locate(e: Error, jobs: &[EngineChecked], list: Option<&str>) -> ApiError {
        let (field, index) = match &e {
            Error::BodyTooLarge { limit, .. } => {
                ("/body", jobs.iter().position(|j| j.body_len > *limit))
            }
            Error::InvalidDelay { .. } => {
                let latest = jobs.iter().filter_map(|j| j.at).max();
                (
                    "/ready_at",
                    jobs.iter().position(|j| j.at.is_some() && j.at == latest),
                )
            }
            // The first absolute expiry not after its absolute due time, else the earliest.
            Error::InvalidArgument {
                what: "expires_at", ..
            } => {
                let at_fault = jobs
                    .iter()
                    .position(|j| j.expires_at.is_some() && j.expires_at <= j.at)
                    .or_else(|| {
                        let earliest = jobs.iter().filter_map(|j| j.expires_at).min();
                        jobs.iter()
                            .position(|j| j.expires_at.is_some() && j.expires_at == earliest)
                    });
                ("/expires_at", at_fault)
            }
            // Too many jobs (or none): the list itself is at fault.
            Error::InvalidArgument { what: "jobs", .. } if list.is_some() => {
                return ApiError::from(e).at("/jobs");
            }
            _ => return ApiError::from(e),
        };
        let e = ApiError::from(e).at(field);
        match (list, index) {
            (Some(list), Some(i)) => e.in_item(list, i),
            _ => e,
        }
    }
}

/// Push one job.
///
/// Idempotent on (topic, id): pushing a live job's id again changes nothing and answers 200
/// with `created: false`.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/jobs",
    tag = "jobs",
    params(TopicPath),
    request_body = PushRequest,
    responses(
        (status = 201, description = "Created", body = PushResponse),
        (status = 200, description = "A live job with this id existed; nothing changed", body = PushResponse),
        CommonErrors,
    )
)]
pub async fn push(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
    Json(req): Json<PushRequest>,
) -> Result<Response, ApiError> {
    let t = topic(&path.topic)?;
    let job = new_job(&t, req)?;
    let checked = [EngineChecked::of(&job)];
    let pushed = state
        .engine
        .push(job)
        .await
        .map_err(|e| EngineChecked::locate(e, &checked, None))?;
    let status = if pushed.created {
        state.metrics.pushed(&t, 1);
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(PushResponse::from(pushed))).into_response())
}

/// Push up to 1000 jobs of one topic in one request; answered in order.
///
/// When some jobs are stored and others not (on a Redis Cluster, a topic partitioned over
/// several primaries, one of them down), the answer is the first failed job's error
/// (`index` names it) with `results` and `ids`: which jobs were stored, and every job's id
/// to send the others again under.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/batch",
    tag = "jobs",
    params(TopicPath),
    request_body = PushBatchRequest,
    responses(
        (status = 200, description = "One answer per job, in order", body = PushBatchResponse),
        CommonErrors,
        (status = 503, description = "As for every operation (`unavailable`, `overloaded`, `timeout`, `engine_full`, `not_replicated`). On a Redis Cluster whose primary is down, the jobs routed to it fail while the others are stored: then `results` and `ids` say which were stored and under which ids to send the others again.", body = PushBatchFailed),
    )
)]
pub async fn push_batch(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
    Json(req): Json<PushBatchRequest>,
) -> Result<Response, ApiError> {
    let t = topic(&path.topic)?;
    let jobs = req
        .jobs
        .into_iter()
        .enumerate()
        .map(|(i, j)| new_job(&t, j).map_err(|e| e.in_item("jobs", i)))
        .collect::<Result<Vec<_>, _>>()?;
    let checked: Vec<EngineChecked> = jobs.iter().map(EngineChecked::of).collect();
    let ids: Vec<String> = jobs.iter().map(|j| j.id.as_str().to_string()).collect();
    let answers = state
        .engine
        .push_each(jobs)
        .await
        .map_err(|e| EngineChecked::locate(e, &checked, Some("jobs")))?;
    let created = answers
        .iter()
        .filter(|a| a.as_ref().is_ok_and(|p| p.created))
        .count();
    state.metrics.pushed(&t, created as u64);
    let total = answers.len();
    let mut first_error = None;
    let mut results = Vec::with_capacity(total);
    for (i, answer) in answers.into_iter().enumerate() {
        match answer {
            Ok(p) => results.push(Some(PushResponse::from(p))),
            Err(e) => {
                first_error.get_or_insert((i, e));
                results.push(None);
            }
        }
    }
    let Some((first, error)) = first_error else {
        let results = results.into_iter().flatten().collect();
        return Ok(axum::Json(PushBatchResponse { results }).into_response());
    };
    let stored = results.iter().filter(|r| r.is_some()).count();
    let error = ApiError::from(error).about_item(
        first,
        &format!(
            "{stored} of {total} jobs were stored (`results`); send the others again with their ids (`ids`), and none is stored twice"
        ),
    );
    let body = PushBatchFailed {
        error: error.detail(),
        results: Some(results),
        ids: Some(ids),
    };
    Ok((error.status(), axum::Json(body)).into_response())
}

/// Read a job in any state.
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}/jobs/{id}",
    tag = "jobs",
    params(JobPath),
    responses((status = 200, description = "The job", body = JobDto), NotFound, CommonErrors)
)]
pub async fn get_job(
    State(state): State<AppState>,
    Path(path): Path<JobPath>,
) -> Result<axum::Json<JobDto>, ApiError> {
    let (t, id) = path.parse()?;
    match state.engine.get(&t, &id).await? {
        Some(job) => Ok(axum::Json(JobDto::from(&job))),
        None => Err(delayq_core::Error::NotFound { topic: t, id }.into()),
    }
}

/// Delete (cancel) a job in any state; a reserved job's lease is lost.
#[utoipa::path(
    delete,
    path = "/v1/topics/{topic}/jobs/{id}",
    tag = "jobs",
    params(JobPath),
    responses((status = 204, description = "Deleted"), NotFound, CommonErrors)
)]
pub async fn delete_job(
    State(state): State<AppState>,
    Path(path): Path<JobPath>,
) -> Result<StatusCode, ApiError> {
    let (t, id) = path.parse()?;
    if state.engine.delete(&t, &id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(delayq_core::Error::NotFound { topic: t, id }.into())
    }
}

/// Move a delayed or ready job to a new due time, keeping its id and attempts.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/jobs/{id}/reschedule",
    tag = "jobs",
    params(JobPath),
    request_body = RescheduleRequest,
    responses((status = 200, description = "The new due time", body = ReadyAtResponse), NotFound, WrongState, CommonErrors)
)]
pub async fn reschedule(
    State(state): State<AppState>,
    Path(path): Path<JobPath>,
    Json(req): Json<RescheduleRequest>,
) -> Result<axum::Json<ReadyAtResponse>, ApiError> {
    let (t, id) = path.parse()?;
    if req.delay_ms.is_none() && req.ready_at.is_none() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_delay",
            "missing; give delay_ms (ms from now, 0 to 10 years) or ready_at (an RFC 3339 time)",
        )
        .at("/delay_ms"));
    }
    let when = schedule(req.delay_ms, req.ready_at.as_deref())?;
    let at = state
        .engine
        .reschedule(&t, &id, when)
        .await
        .map_err(|e| locate(e, delay_field(req.ready_at.is_some())))?;
    Ok(axum::Json(ReadyAtResponse {
        ready_at: super::dto::rfc3339(at),
        ready_at_ms: at.as_millis(),
    }))
}

/// List the jobs of a topic in one state, page by page.
///
/// With `prefix`, only the jobs whose id starts with it: the server walks the state for
/// them, looking at most 10,000 jobs per request, and answers where it stopped as
/// `next_cursor` (a page may hold fewer than `limit` jobs, even none) and how many it looked
/// at as `scanned`.
///
/// `done` lists the acked jobs a topic's retention keeps (none without one).
///
/// Orders: delayed by (due time, id), ready by (priority, due time, push order), reserved by
/// (lease deadline, id), dead by (time of death, id), done by (time of the ack, id).
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}/jobs",
    tag = "jobs",
    params(TopicPath, ListQuery),
    responses((status = 200, description = "One page", body = ListResponse), CommonErrors)
)]
pub async fn list_jobs(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<ListResponse>, ApiError> {
    let t = topic(&path.topic)?;
    let cursor = q.cursor.map(Cursor);
    let limit = q.limit.unwrap_or(100);
    let prefix = q.prefix.unwrap_or_default();
    if !prefix.is_empty() {
        check_prefix(&prefix)?;
        check_count("limit", limit)?;
        let found = scan(
            state.engine.as_ref(),
            &t,
            q.state.into(),
            &prefix,
            limit,
            BUDGET,
            cursor,
        )
        .await?;
        return Ok(axum::Json(ListResponse {
            jobs: found.jobs.iter().map(JobDto::from).collect(),
            next_cursor: found.next.map(|c| c.0),
            scanned: Some(found.scanned),
        }));
    }
    let page = state
        .engine
        .list(&t, q.state.into(), limit, cursor.as_ref())
        .await?;
    Ok(axum::Json(ListResponse {
        jobs: page.jobs.iter().map(JobDto::from).collect(),
        next_cursor: page.next.map(|c| c.0),
        scanned: None,
    }))
}
