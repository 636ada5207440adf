//! Path and query parameters, their schema, and their parsing into core types.

use delayq_core::{JobId, Topic};
use serde::Deserialize;
use utoipa::{IntoParams, IntoResponses};

use super::dto::StateDto;
use super::error::{ApiError, ErrorBody};

/// A topic in the path.
#[derive(Deserialize, IntoParams, Debug)]
#[into_params(parameter_in = Path)]
pub struct TopicPath {
    /// The topic: 1 to 200 characters from `A-Za-z0-9_.:-`.
    #[param(pattern = "^[A-Za-z0-9_.:-]{1,200}$")]
    pub topic: String,
}

/// A job in the path.
#[derive(Deserialize, IntoParams, Debug)]
#[into_params(parameter_in = Path)]
pub struct JobPath {
    /// The topic: 1 to 200 characters from `A-Za-z0-9_.:-`.
    #[param(pattern = "^[A-Za-z0-9_.:-]{1,200}$")]
    pub topic: String,
    /// The job id: 1 to 200 visible ASCII characters, percent-encoded in the path (`/` as
    /// `%2F`).
    #[param(pattern = "^[!-~]{1,200}$")]
    pub id: String,
}

/// The query of a listing.
#[derive(Deserialize, IntoParams, Debug)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// The state to list.
    pub state: StateDto,
    /// Jobs per page (1 to 1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page (of a listing with the same `prefix`).
    pub cursor: Option<String>,
    /// Only the jobs whose id starts with this (1 to 200 visible ASCII characters; empty:
    /// every job). The server walks the state for them, looking at most 10,000 jobs per
    /// request: a page may then hold fewer than `limit` jobs, even none, and still have a
    /// `next_cursor`; `scanned` says how many it looked at.
    #[param(max_length = 200)]
    pub prefix: Option<String>,
}

/// Parses a topic.
pub fn topic(s: &str) -> Result<Topic, ApiError> {
    Topic::new(s).map_err(ApiError::from)
}

/// Parses a job id.
pub fn job_id(s: &str) -> Result<JobId, ApiError> {
    JobId::new(s).map_err(ApiError::from)
}

impl JobPath {
    /// The parsed topic and id.
    pub fn parse(&self) -> Result<(Topic, JobId), ApiError> {
        Ok((topic(&self.topic)?, job_id(&self.id)?))
    }
}

/// Errors every API operation may answer.
#[derive(IntoResponses)]
#[allow(dead_code)] // Only read by the OpenAPI document.
pub enum CommonErrors {
    /// Invalid input (`invalid_*`); nothing was changed.
    #[response(status = 400)]
    BadRequest(ErrorBody),
    /// Missing or wrong bearer token (`unauthorized`).
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// The request or the job body is too large (`body_too_large`).
    #[response(status = 413)]
    TooLarge(ErrorBody),
    /// Internal error (`internal`); details are in the server log.
    #[response(status = 500)]
    Internal(ErrorBody),
    /// The store is unavailable, the server is overloaded or the request took too long
    /// (`unavailable`, `overloaded`, `timeout`); the store is full (`engine_full`: Redis at
    /// its maxmemory, or a full disk; nothing was written: free space by acking, deleting or
    /// purging jobs, or raise the limit); or the write was applied but fewer Redis
    /// replicas than the server's `--redis-wait-replicas` acknowledged it in time
    /// (`not_replicated`: it may not survive a failover). Retry later; a retried push is
    /// idempotent.
    #[response(status = 503)]
    Unavailable(ErrorBody),
}

/// The job does not exist.
#[derive(IntoResponses)]
#[allow(dead_code)] // Only read by the OpenAPI document.
pub enum NotFound {
    /// No such job (`not_found`).
    #[response(status = 404)]
    NotFound(ErrorBody),
}

/// The topic is unknown to the server.
#[derive(IntoResponses)]
#[allow(dead_code)] // Only read by the OpenAPI document.
pub enum UnknownTopic {
    /// No such topic (`not_found`): it has no jobs, no settings and no pause (never used,
    /// or purged since); nothing was changed. `GET /v1/topics` lists the topics.
    #[response(status = 404)]
    NotFound(ErrorBody),
}

/// The lease is not the job's live lease: why, for a lease operation.
#[derive(IntoResponses)]
#[allow(dead_code)] // Only read by the OpenAPI document.
pub enum LeaseLost {
    /// No such job (`not_found`): never pushed, or acked, deleted or purged since; nothing was
    /// changed.
    #[response(status = 404)]
    NotFound(ErrorBody),
    /// The lease expired or the job moved on since it was delivered (`lease_lost`), or the job
    /// has no lease to settle: it has not been delivered since it was pushed, released or
    /// kicked (`wrong_state`); nothing was changed.
    #[response(status = 409)]
    LeaseLost(ErrorBody),
}

/// A topic's partition count cannot change while it holds jobs.
#[derive(IntoResponses)]
#[allow(dead_code)] // Only read by the OpenAPI document.
pub enum PartitionsInUse {
    /// The request changes the partition count of a topic that holds jobs
    /// (`partitions_in_use`); nothing was changed.
    #[response(status = 409)]
    PartitionsInUse(ErrorBody),
}

/// The job is in a state where the operation does not apply.
#[derive(IntoResponses)]
#[allow(dead_code)] // Only read by the OpenAPI document.
pub enum WrongState {
    /// Wrong state for this operation (`wrong_state`); nothing was changed.
    #[response(status = 409)]
    WrongState(ErrorBody),
}
