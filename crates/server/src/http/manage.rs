//! An operator's actions on jobs that no worker holds: bury without a lease (`archive`),
//! and one action on many jobs (`bulk`: listed ids, or every job of a state that matches an
//! id prefix, bounded per request).

use axum::extract::State;
use axum::http::StatusCode;
use delayq_core::{Cursor, Engine, Error, JobId, JobState, Schedule, Topic};
use futures_util::{StreamExt, stream};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::dto::{StateDto, check_reason};
use super::error::ApiError;
use super::extract::{Json, Path};
use super::fields::locate;
use super::params::{CommonErrors, JobPath, NotFound, TopicPath, WrongState, job_id, topic};
use super::scan::{BUDGET, check_prefix, scan};
use crate::AppState;

/// An archive: why the job goes dead.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
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

/// What a bulk request does to each job.
#[derive(Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// A dead job back to ready, its attempts reset.
    Kick,
    /// Delete (cancel) the job, in any state.
    Delete,
    /// A delayed job due now (a reschedule to now).
    RunNow,
    /// A delayed or ready job dead now, without a lease (as `archive`).
    Bury,
}

impl BulkAction {
    /// The states this action applies to, for a bulk request by state.
    fn applies_to(self, state: JobState) -> bool {
        match self {
            BulkAction::Kick => state == JobState::Dead,
            BulkAction::Delete => true,
            BulkAction::RunNow => state == JobState::Delayed,
            BulkAction::Bury => matches!(state, JobState::Delayed | JobState::Ready),
        }
    }

    fn states(self) -> &'static str {
        match self {
            BulkAction::Kick => "dead jobs",
            BulkAction::Delete => "jobs in any state",
            BulkAction::RunNow => "delayed jobs (ready ones are due already)",
            BulkAction::Bury => "delayed and ready jobs",
        }
    }
}

/// One action on many jobs of a topic: the jobs listed in `ids`, or every job of `state`
/// whose id starts with `prefix` (all of them without one), from `cursor` on.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// What to do to each job.
    pub action: BulkAction,
    /// These jobs (1 to 10,000 ids); or give `state`.
    #[schema(max_items = 10000)]
    pub ids: Option<Vec<String>>,
    /// Every job of this state (with `prefix`, those whose id starts with it); or give `ids`.
    pub state: Option<StateDto>,
    /// With `state`: only the jobs whose id starts with this.
    #[schema(max_length = 200)]
    pub prefix: Option<String>,
    /// With `state`: the `next_cursor` of the previous answer, to go on where it stopped.
    pub cursor: Option<String>,
    /// With `bury`: why (at most 4 KiB), kept with each job.
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
}

/// One job a bulk request could not act on.
#[derive(Serialize, ToSchema, Debug)]
pub struct BulkFailure {
    /// The job id.
    pub id: String,
    /// The error code, as a single request would answer it (`not_found`, `wrong_state` ...).
    pub code: String,
    /// What happened.
    pub message: String,
}

/// What a bulk request did.
#[derive(Serialize, ToSchema, Debug)]
pub struct BulkResponse {
    /// Jobs acted on.
    pub done: u64,
    /// Jobs the action did not apply to (gone meanwhile, in another state ...).
    pub failed: u64,
    /// The first failures (at most 10).
    pub failures: Vec<BulkFailure>,
    /// Jobs looked at: the ids given, or the jobs of the state walked (at most 10,000).
    pub scanned: u64,
    /// By `state`: more jobs remain to look at; send the request again with `cursor`.
    pub more: bool,
    /// By `state`, when `more`: pass as `cursor` to go on.
    pub next_cursor: Option<String>,
}

/// Jobs acted on at a time.
const IN_FLIGHT: usize = 16;

/// Failures a bulk answer describes.
const SHOWN_FAILURES: usize = 10;

/// Act on many jobs: kick, delete, run now or bury the listed ones, or every one of a state
/// that matches an id prefix.
///
/// Bounded per request: at most 10,000 ids, or 10,000 jobs of the state looked at; then
/// `more` says whether jobs remain to look at, and the same request with `cursor` set to
/// `next_cursor` goes on (the jobs acted on have left the state, so nothing is done twice).
/// A job the action does not apply to is counted in `failed`, not fatal. By `state`, the
/// action must apply to it: kick to dead, run_now to delayed, bury to delayed and ready.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/bulk",
    tag = "jobs",
    params(TopicPath),
    request_body = BulkRequest,
    responses((status = 200, description = "What was done", body = BulkResponse), CommonErrors)
)]
pub async fn bulk(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
    Json(req): Json<BulkRequest>,
) -> Result<axum::Json<BulkResponse>, ApiError> {
    let t = topic(&path.topic)?;
    check_reason(&req.reason)?;
    if req.reason.is_some() && req.action != BulkAction::Bury {
        return Err(
            ApiError::invalid_argument("reason is kept only by a bury; remove it").at("/reason"),
        );
    }
    let (ids, scanned, next) = match (&req.ids, req.state) {
        (Some(ids), None) => {
            if req.prefix.is_some() || req.cursor.is_some() {
                let field = if req.prefix.is_some() {
                    "/prefix"
                } else {
                    "/cursor"
                };
                return Err(ApiError::invalid_argument(
                    "prefix and cursor go with state, not with ids; remove them",
                )
                .at(field));
            }
            check_count_of(ids)?;
            let ids = ids
                .iter()
                .enumerate()
                .map(|(i, id)| job_id(id).map_err(|e| e.at(format!("/ids/{i}"))))
                .collect::<Result<Vec<JobId>, ApiError>>()?;
            let n = ids.len() as u64;
            (ids, n, None)
        }
        (None, Some(s)) => {
            let s: JobState = s.into();
            if !req.action.applies_to(s) {
                return Err(ApiError::invalid_argument(format!(
                    "this action applies to {}; pick another state or action",
                    req.action.states()
                ))
                .at("/state"));
            }
            let prefix = req.prefix.clone().unwrap_or_default();
            check_prefix(&prefix).map_err(|e| e.at("/prefix"))?;
            let found = scan(
                state.engine.as_ref(),
                &t,
                s,
                &prefix,
                BUDGET,
                BUDGET,
                req.cursor.clone().map(Cursor),
            )
            .await
            .map_err(|e| locate(e, ""))?;
            let ids = found.jobs.into_iter().map(|j| j.id).collect();
            (ids, found.scanned, found.next)
        }
        _ => {
            return Err(ApiError::invalid_argument(
                "give exactly one of ids (the jobs to act on) and state (every job in that state, with an optional prefix)",
            )
            .at("/ids"));
        }
    };

    let (engine, t) = (state.engine.as_ref(), &t);
    let reason = req.reason.as_deref();
    let outcomes: Vec<(JobId, delayq_core::Result<()>)> = stream::iter(ids)
        .map(|id| async move {
            let r = act(engine, t, &id, req.action, reason).await;
            (id, r)
        })
        .buffered(IN_FLIGHT)
        .collect()
        .await;
    let mut answer = BulkResponse {
        done: 0,
        failed: 0,
        failures: Vec::new(),
        scanned,
        more: next.is_some(),
        next_cursor: next.map(|c| c.0),
    };
    for (id, r) in outcomes {
        match r {
            Ok(()) => answer.done += 1,
            // The engine failing is the request failing: what was done stays done, and
            // the same request again does the rest.
            Err(e @ (Error::Unavailable { .. } | Error::Full { .. } | Error::Internal { .. })) => {
                return Err(e.into());
            }
            Err(e) => {
                answer.failed += 1;
                if answer.failures.len() < SHOWN_FAILURES {
                    let e = ApiError::from(e);
                    answer.failures.push(BulkFailure {
                        id: id.as_str().to_string(),
                        code: e.code().to_string(),
                        message: e.message(),
                    });
                }
            }
        }
    }
    Ok(axum::Json(answer))
}

/// 1 to [`BUDGET`] ids.
fn check_count_of(ids: &[String]) -> Result<(), ApiError> {
    if ids.is_empty() || ids.len() > BUDGET {
        return Err(ApiError::invalid_argument(format!(
            "{} ids; give 1 to {BUDGET}, and send more in further requests",
            ids.len()
        ))
        .at("/ids"));
    }
    Ok(())
}

/// One job's action.
async fn act(
    engine: &dyn Engine,
    t: &Topic,
    id: &JobId,
    action: BulkAction,
    reason: Option<&str>,
) -> delayq_core::Result<()> {
    match action {
        BulkAction::Kick => engine.kick(t, id).await,
        BulkAction::Delete => match engine.delete(t, id).await? {
            true => Ok(()),
            false => Err(Error::NotFound {
                topic: t.clone(),
                id: id.clone(),
            }),
        },
        BulkAction::RunNow => engine.reschedule(t, id, Schedule::NOW).await.map(|_| ()),
        BulkAction::Bury => engine.bury_waiting(t, id, reason.map(str::to_string)).await,
    }
}
