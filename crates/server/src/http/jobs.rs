//! Jobs by id: push (one or a batch), get, delete, reschedule, and listing a state.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use delayq_core::{Cursor, NewJob};

use super::dto::{
    JobDto, ListResponse, PushBatchRequest, PushBatchResponse, PushRequest, PushResponse,
    ReadyAtResponse, RescheduleRequest, apply_options, decode_body, schedule,
};
use super::error::ApiError;
use super::extract::{Json, Path, Query};
use super::params::{
    CommonErrors, JobPath, ListQuery, NotFound, TopicPath, WrongState, job_id, topic,
};
use crate::AppState;

fn new_job(t: &delayq_core::Topic, req: PushRequest) -> Result<NewJob, ApiError> {
    let mut job = NewJob::new(t.clone(), decode_body(req.body, req.encoding)?)
        .with_schedule(schedule(req.delay_ms, req.ready_at.as_deref())?);
    if let Some(id) = &req.id {
        job = job.with_id(job_id(id)?);
    }
    Ok(apply_options(
        job,
        req.ttr_ms,
        req.max_attempts,
        req.priority,
        req.backoff,
    ))
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
    let pushed = state.engine.push(new_job(&t, req)?).await?;
    let status = if pushed.created {
        state.metrics.pushed(&t, 1);
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(PushResponse::from(pushed))).into_response())
}

/// Push up to 1000 jobs of one topic in one request; answered in order.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/batch",
    tag = "jobs",
    params(TopicPath),
    request_body = PushBatchRequest,
    responses((status = 200, description = "One answer per job, in order", body = PushBatchResponse), CommonErrors)
)]
pub async fn push_batch(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
    Json(req): Json<PushBatchRequest>,
) -> Result<axum::Json<PushBatchResponse>, ApiError> {
    let t = topic(&path.topic)?;
    let jobs = req
        .jobs
        .into_iter()
        .map(|j| new_job(&t, j))
        .collect::<Result<Vec<_>, _>>()?;
    let pushed = state.engine.push_batch(jobs).await?;
    state
        .metrics
        .pushed(&t, pushed.iter().filter(|p| p.created).count() as u64);
    Ok(axum::Json(PushBatchResponse {
        results: pushed.into_iter().map(PushResponse::from).collect(),
    }))
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
    let when = match req {
        RescheduleRequest::Delay(d) => schedule(Some(d.delay_ms), None)?,
        RescheduleRequest::At(a) => schedule(None, Some(&a.ready_at))?,
    };
    let at = state.engine.reschedule(&t, &id, when).await?;
    Ok(axum::Json(ReadyAtResponse {
        ready_at: super::dto::rfc3339(at),
        ready_at_ms: at.as_millis(),
    }))
}

/// List the jobs of a topic in one state, page by page.
///
/// Orders: delayed by (due time, id), ready by (priority, due time, push order), reserved by
/// (lease deadline, id), dead by (time of death, id).
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}/jobs",
    tag = "jobs",
    params(TopicPath, ListQuery),
    responses((status = 200, description = "One page", body = ListResponse), CommonErrors)
)]
pub async fn list(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<ListResponse>, ApiError> {
    let t = topic(&path.topic)?;
    let cursor = q.cursor.map(Cursor);
    let page = state
        .engine
        .list(&t, q.state.into(), q.limit.unwrap_or(100), cursor.as_ref())
        .await?;
    Ok(axum::Json(ListResponse {
        jobs: page.jobs.iter().map(JobDto::from).collect(),
        next_cursor: page.next.map(|c| c.0),
    }))
}
