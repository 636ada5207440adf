//! Topics: the list with stats, one topic's stats and settings, kicking dead jobs, purging,
//! pausing. A purge or a resume of a topic the server does not know (no jobs, no settings,
//! no pause: a typo, most likely) answers 404 and changes nothing; a pause of one is allowed
//! (a topic may be paused ahead of its first push) and says so (`known: false`).

use axum::extract::State;
use axum::http::StatusCode;
use delayq_core::{Topic, TopicConfig};

use super::dto::{
    CountResponse, PauseRequest, PauseResponse, StatsDto, TopicConfigDto, TopicsResponse,
    parse_rfc3339, rfc3339,
};
use super::error::ApiError;
use super::extract::{Json, Path};
use super::params::{
    CommonErrors, JobPath, NotFound, PartitionsInUse, TopicPath, UnknownTopic, WrongState, topic,
};
use crate::AppState;

/// Whether the engine knows `t`: it is on the topic list (pushed to since it was created or
/// last purged, or paused now) or has settings.
async fn known(state: &AppState, t: &Topic) -> Result<bool, ApiError> {
    if state.engine.topics().await?.contains(t) {
        return Ok(true);
    }
    Ok(state.engine.topic_config(t).await? != TopicConfig::default())
}

/// 404 `not_found` for a `verb` (purge, resume) of a topic the engine does not know.
fn unknown_topic(t: &Topic, verb: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "topic {t} not found: it has no jobs, no settings and no pause (never used, or purged since), so there is nothing to {verb} and nothing was changed; check the name against GET /v1/topics (`delayq topics`)"
        ),
    )
}

/// Every topic pushed to since it was created or last purged, and every paused topic (jobs
/// or not), with its stats; the topics the engine cannot reach now (a Redis Cluster primary
/// down or hung) by name alone, in `unreachable`.
#[utoipa::path(
    get,
    path = "/v1/topics",
    tag = "topics",
    responses((status = 200, description = "The topics, sorted", body = TopicsResponse), CommonErrors)
)]
pub async fn list_topics(
    State(state): State<AppState>,
) -> Result<axum::Json<TopicsResponse>, ApiError> {
    let listed = state.engine.topics().await?;
    let stats = crate::metrics::stats_or_unreachable(state.engine.as_ref(), &listed).await?;
    let mut topics = Vec::new();
    let mut unreachable = Vec::new();
    for (t, s) in listed.iter().zip(stats) {
        match s {
            Some(s) => topics.push(StatsDto::new(t, &s)),
            None => unreachable.push(t.to_string()),
        }
    }
    Ok(axum::Json(TopicsResponse {
        topics,
        unreachable,
    }))
}

/// Counts per state and the age of the oldest overdue job of one topic.
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}/stats",
    tag = "topics",
    params(TopicPath),
    responses((status = 200, description = "The stats", body = StatsDto), CommonErrors)
)]
pub async fn stats(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
) -> Result<axum::Json<StatsDto>, ApiError> {
    let t = topic(&path.topic)?;
    let s = state.engine.stats(&t).await?;
    Ok(axum::Json(StatsDto::new(&t, &s)))
}

/// A topic's settings: the defaults of jobs pushed without their own, its body limit.
///
/// Null fields are unset (the built-in default applies). Any valid topic name answers, used
/// or not.
#[utoipa::path(
    get,
    path = "/v1/topics/{topic}",
    tag = "topics",
    params(TopicPath),
    responses((status = 200, description = "The settings", body = TopicConfigDto), CommonErrors)
)]
pub async fn get_config(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
) -> Result<axum::Json<TopicConfigDto>, ApiError> {
    let t = topic(&path.topic)?;
    let c = state.engine.topic_config(&t).await?;
    Ok(axum::Json(TopicConfigDto::from_core(&c)))
}

/// Replace a topic's settings whole, for every server of the engine.
///
/// An absent or null field is unset. They apply to jobs pushed from now on (a push's own
/// fields win); a purge keeps them; setting them does not add the topic to `/v1/topics`.
#[utoipa::path(
    put,
    path = "/v1/topics/{topic}",
    tag = "topics",
    params(TopicPath),
    request_body = TopicConfigDto,
    responses(
        (status = 200, description = "The settings now in force", body = TopicConfigDto),
        PartitionsInUse,
        CommonErrors
    )
)]
pub async fn set_config(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
    Json(req): Json<TopicConfigDto>,
) -> Result<axum::Json<TopicConfigDto>, ApiError> {
    let t = topic(&path.topic)?;
    let config = req.into_core()?;
    state.engine.set_topic_config(&t, &config).await?;
    Ok(axum::Json(TopicConfigDto::from_core(&config)))
}

/// Make a dead job ready now, with its attempts reset.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/jobs/{id}/kick",
    tag = "topics",
    params(JobPath),
    responses((status = 204, description = "Kicked"), NotFound, WrongState, CommonErrors)
)]
pub async fn kick(
    State(state): State<AppState>,
    Path(path): Path<JobPath>,
) -> Result<StatusCode, ApiError> {
    let (t, id) = path.parse()?;
    state.engine.kick(&t, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Kick every dead job of a topic.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/kick",
    tag = "topics",
    params(TopicPath),
    responses((status = 200, description = "How many were kicked", body = CountResponse), CommonErrors)
)]
pub async fn kick_all(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
) -> Result<axum::Json<CountResponse>, ApiError> {
    let t = topic(&path.topic)?;
    let count = state.engine.kick_all(&t).await?;
    Ok(axum::Json(CountResponse { count }))
}

/// Remove every job of a topic, in every state, and take it off `/v1/topics` (the next push
/// puts it back; a paused topic stays there until its pause ends). Its settings and its
/// pause stay. A topic with no jobs, no settings and no pause answers 404.
#[utoipa::path(
    delete,
    path = "/v1/topics/{topic}",
    tag = "topics",
    params(TopicPath),
    responses(
        (status = 200, description = "How many were removed", body = CountResponse),
        UnknownTopic,
        CommonErrors
    )
)]
pub async fn purge(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
) -> Result<axum::Json<CountResponse>, ApiError> {
    let t = topic(&path.topic)?;
    if !known(&state, &t).await? {
        return Err(unknown_topic(&t, "purge"));
    }
    let count = state.engine.purge(&t).await?;
    Ok(axum::Json(CountResponse { count }))
}

/// Pause a topic, for every server: reserves get none of its jobs until the pause ends
/// (`until`, or `for_ms` from now; neither: until resumed). Its jobs still fall due, and
/// pushes, acks and the rest work as usual. Pausing a paused topic replaces its end. A
/// paused topic is in `/v1/topics`, jobs or not; a topic the server did not know may be
/// paused ahead of its first push, and the answer says so (`known: false`).
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/pause",
    tag = "topics",
    params(TopicPath),
    request_body = PauseRequest,
    responses((status = 200, description = "Paused", body = PauseResponse), CommonErrors)
)]
pub async fn pause(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
    Json(req): Json<PauseRequest>,
) -> Result<axum::Json<PauseResponse>, ApiError> {
    let t = topic(&path.topic)?;
    let until = match (req.until, req.for_ms) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid_argument("give until or for_ms, not both").at("/for_ms"));
        }
        (Some(at), None) => Some(parse_rfc3339(&at, "until").map_err(|_| {
            ApiError::invalid_argument(format!(
                "until {at:?} is not an RFC 3339 time such as 2026-01-02T15:04:05.000+00:00"
            ))
            .at("/until")
        })?),
        (None, Some(ms)) => Some(
            state
                .engine
                .now()
                .await?
                .plus(std::time::Duration::from_millis(ms)),
        ),
        (None, None) => None,
    };
    let known = known(&state, &t).await?;
    state.engine.pause(&t, until).await.map_err(|e| {
        let field = if req.for_ms.is_some() {
            "/for_ms"
        } else {
            "/until"
        };
        ApiError::from(e).at(field)
    })?;
    let s = state.engine.stats(&t).await?;
    Ok(axum::Json(PauseResponse {
        paused: s.paused_until.is_some(),
        paused_until: s
            .paused_until
            .filter(|t| *t != delayq_core::Timestamp::NEVER)
            .map(rfc3339),
        known,
    }))
}

/// End a topic's pause at once; reserves waiting on it wake. Nothing happens when it is not
/// paused. A topic with no jobs, no settings and no pause answers 404.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/resume",
    tag = "topics",
    params(TopicPath),
    responses((status = 204, description = "Resumed"), UnknownTopic, CommonErrors)
)]
pub async fn resume(
    State(state): State<AppState>,
    Path(path): Path<TopicPath>,
) -> Result<StatusCode, ApiError> {
    let t = topic(&path.topic)?;
    if !known(&state, &t).await? {
        return Err(unknown_topic(&t, "resume"));
    }
    state.engine.resume(&t).await?;
    Ok(StatusCode::NO_CONTENT)
}
