//! An operator's actions on jobs that no worker holds: bury without a lease (`archive`).

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;

use super::dto::check_reason;
use super::error::ApiError;
use super::extract::{Json, Path};
use super::params::{CommonErrors, JobPath, NotFound, WrongState};
use crate::AppState;

/// An archive: why the job goes dead.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct ArchiveRequest {
    /// Why (at most 4 KiB), kept with the job as its last error.
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
}

/// Send a delayed or ready job to dead now, without a lease (an operator's bury).
///
/// Its attempts stay as they are; `kick` brings it back. A reserved job is refused
/// (`wrong_state`): its holder buries it with its lease (`POST …/bury`). The body may be `{}`.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/jobs/{id}/archive",
    tag = "jobs",
    params(JobPath),
    request_body = ArchiveRequest,
    responses((status = 204, description = "Dead now"), NotFound, WrongState, CommonErrors)
)]
pub async fn archive(
    State(state): State<AppState>,
    Path(path): Path<JobPath>,
    Json(req): Json<ArchiveRequest>,
) -> Result<StatusCode, ApiError> {
    let (t, id) = path.parse()?;
    check_reason(&req.reason)?;
    state.engine.bury_waiting(&t, &id, req.reason).await?;
    Ok(StatusCode::NO_CONTENT)
}
