//! Reserving and the lease operations: reserve (long-poll), ack (one or a batch), nack, touch,
//! bury, release.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use delayq_core::limits::MAX_WAIT;
use delayq_core::{
    DeliveryMode, Lease, LeaseToken, Nack, NackOutcome, Reserve, Settle, Settled,
    SettledAndReserved, Topic, check_settle_and_reserve,
};

use super::dto::{
    AckBatchRequest, AckBatchResponse, AckResult, BuryRequest, DeliveryDto, ModeDto, NackRequest,
    NackResponse, OutcomeDto, ReserveRequest, ReserveResponse, SettleItem, SettleResult,
    TokenRequest, TouchRequest, TouchResponse, check_reason,
};
use super::error::ApiError;
use super::extract::{Json, Path};
use super::fields::locate;
use super::params::{CommonErrors, JobPath, LeaseLost, job_id, topic};
use super::receipt;
use crate::AppState;
use crate::metrics::LeaseEnd;

/// A lease named in a request body; errors name the field.
fn lease_of(t: &str, id: &str, token: u64) -> Result<Lease, ApiError> {
    Ok(Lease {
        topic: topic(t).map_err(|e| e.at("/topic"))?,
        id: job_id(id).map_err(|e| e.at("/id"))?,
        token: LeaseToken(token),
    })
}

/// The lease a per-job request names: the path's job with the body's `token`, or the body's
/// `receipt`, which must name the path's job.
fn lease(path: &JobPath, token: Option<u64>, receipt: Option<&str>) -> Result<Lease, ApiError> {
    let (topic, id) = path.parse()?;
    match (token, receipt) {
        (Some(token), None) => Ok(Lease {
            topic,
            id,
            token: LeaseToken(token),
        }),
        (None, Some(r)) => {
            let l = receipt::decode(r).map_err(|e| e.at("/receipt"))?;
            if l.topic != topic || l.id != id {
                return Err(ApiError::invalid_receipt(format!(
                    "this receipt is for job {} of topic {}, not for this path's job {id} of topic {topic}; send it with its own job's path, or to POST /v1/ack",
                    l.id, l.topic
                ))
                .at("/receipt"));
            }
            Ok(l)
        }
        (Some(_), Some(_)) => Err(ApiError::invalid_argument(
            "give the delivery's token or its receipt, not both",
        )
        .at("/receipt")),
        (None, None) => Err(ApiError::invalid_argument(
            "missing; give the delivery's receipt, or its token",
        )
        .at("/token")),
    }
}

/// The lease a settle item names: its `receipt`, or its `topic`, `id` and `token`.
fn settle_lease(item: &SettleItem) -> Result<Lease, ApiError> {
    match (&item.receipt, &item.topic, &item.id, item.token) {
        (Some(r), None, None, None) => receipt::decode(r).map_err(|e| e.at("/receipt")),
        (None, Some(t), Some(id), Some(token)) => lease_of(t, id, token),
        (Some(_), ..) => Err(ApiError::invalid_argument(
            "give the receipt alone, or topic, id and token without it",
        )
        .at("/receipt")),
        (None, topic, id, _) => {
            let missing = if topic.is_none() {
                "/topic"
            } else if id.is_none() {
                "/id"
            } else {
                "/token"
            };
            Err(ApiError::invalid_argument(
                "missing; give the delivery's receipt, or its topic, id and token",
            )
            .at(missing))
        }
    }
}

/// Take up to `max` due jobs from one or more topics, waiting up to `wait_ms` for a first one;
/// first settle the leases listed in `settle`.
///
/// Answers as soon as a job is due (long-poll); with nothing due by then, answers an empty
/// list. A `wait_ms` over the server's long-poll limit is cut to it; the answer's `wait_ms`
/// is the wait used. Jobs come lowest priority number first, then earliest due time, then push order.
/// While the server shuts down, open reserves answer empty at once.
///
/// With `settle`, a consumer's whole cycle is one request: the outcomes of the jobs it
/// finished (ack, nack, bury, release) are recorded first, each answered in `settled` (a lost
/// lease there never fails the request), then jobs are reserved; a job settled back to ready
/// can come back in the same answer. `max` 0 settles only.
///
/// `unreachable` names the asked topics the engine could not reach (a Redis Cluster primary
/// down or hung): the answer holds the other topics' jobs.
#[utoipa::path(
    post,
    path = "/v1/reserve",
    tag = "leases",
    request_body = ReserveRequest,
    responses((status = 200, description = "The jobs (possibly none) and the settlements' answers", body = ReserveResponse), CommonErrors)
)]
pub async fn reserve(
    State(state): State<AppState>,
    Json(req): Json<ReserveRequest>,
) -> Result<axum::Json<ReserveResponse>, ApiError> {
    let topics = req
        .topics
        .iter()
        .enumerate()
        .map(|(i, t)| topic(t).map_err(|e| e.in_item("topics", i)))
        .collect::<Result<Vec<Topic>, _>>()?;
    let max = req.max.unwrap_or(1);
    // A client cannot know the server's --max-wait: a longer wait is cut to it (and the
    // answer says so), never refused. Settling only (max 0) never waits.
    let wait = if max == 0 {
        Duration::ZERO
    } else {
        Duration::from_millis(req.wait_ms.unwrap_or(0))
            .min(state.config.max_wait)
            .min(MAX_WAIT)
    };
    if max == 0 && req.settle.is_empty() {
        return Err(ApiError::invalid_argument(
            "max is 0 and nothing is settled; ask for 1 to 1000 jobs, or list leases in settle",
        )
        .at("/max"));
    }
    let settle = req
        .settle
        .into_iter()
        .enumerate()
        .map(|(i, item)| settle_of(item).map_err(|e| e.in_item("settle", i)))
        .collect::<Result<Vec<Settle>, ApiError>>()?;
    let r = Reserve::topics(topics)
        .max(max)
        .wait(wait)
        .mode(match req.mode {
            ModeDto::AtLeastOnce => DeliveryMode::AtLeastOnce,
            ModeDto::AtMostOnce => DeliveryMode::AtMostOnce,
        });
    check_settle_and_reserve(&settle, &r).map_err(|e| locate(e, "/delay_ms"))?;
    // The settlements and a first look go out in one engine call that does not wait, so
    // their answers are never lost to a shutdown; only when it found nothing does the
    // request go on to long-poll (an idle consumer, where one more call costs nothing).
    // With nothing to settle, the first look is shared with the other requests for the same
    // topics that arrive meanwhile (`AppState::coalescers`).
    let mut got = if settle.is_empty() {
        let served = state.coalescers.serve(&r.topics, r.mode, max, None).await?;
        SettledAndReserved {
            settled: Vec::new(),
            deliveries: served.jobs,
        }
    } else {
        state
            .engine
            .settle_and_reserve(&settle, &r.clone().wait(Duration::ZERO))
            .await?
    };
    if got.deliveries.is_empty() && max > 0 && !wait.is_zero() {
        got.deliveries = tokio::select! {
            got = state.engine.reserve(&r) => got?,
            _ = state.shutdown.cancelled() => Vec::new(),
        };
    }
    let settled = settle
        .iter()
        .zip(got.settled)
        .map(|(s, r)| settled_dto(&state, s, r))
        .collect();
    for d in &got.deliveries {
        state.metrics.delivered(
            &d.job.topic,
            &d.job.id,
            d.lease.as_ref().map(|l| l.token.0),
            d.lateness,
        );
    }
    // What the engine's record says as it answers: no call, so it costs nothing.
    let unreachable = state.engine.unreachable(&r.topics);
    Ok(axum::Json(ReserveResponse {
        jobs: got.deliveries.iter().map(DeliveryDto::from).collect(),
        settled,
        wait_ms: wait.as_millis() as u64,
        unreachable: unreachable.iter().map(Topic::to_string).collect(),
    }))
}

/// An item of a reserve's `settle`, checked (errors name the field within the item): an
/// option that does not belong to its outcome is refused rather than ignored.
fn settle_of(item: SettleItem) -> Result<Settle, ApiError> {
    let lease = settle_lease(&item)?;
    // An option its outcome does not use is refused rather than ignored.
    let refuse = |field: &str, present: bool, outcome: &str| {
        if !present {
            return Ok(());
        }
        Err(ApiError::invalid_argument(format!(
            "{field} is not used by outcome {outcome}; remove it, or set the outcome to nack{}",
            if field == "reason" { " or bury" } else { "" }
        ))
        .at(format!("/{field}")))
    };
    let (delay, reason) = (item.delay_ms.is_some(), item.reason.is_some());
    match item.outcome {
        OutcomeDto::Ack => {
            refuse("delay_ms", delay, "ack")?;
            refuse("reason", reason, "ack")?;
            Ok(Settle::Ack(lease))
        }
        OutcomeDto::Release => {
            refuse("delay_ms", delay, "release")?;
            refuse("reason", reason, "release")?;
            Ok(Settle::Release(lease))
        }
        OutcomeDto::Nack => {
            check_reason(&item.reason)?;
            let nack = Nack {
                delay: item.delay_ms.map(Duration::from_millis),
                reason: item.reason,
            };
            nack.validate().map_err(|e| locate(e, "/delay_ms"))?;
            Ok(Settle::Nack(lease, nack))
        }
        OutcomeDto::Bury => {
            refuse("delay_ms", delay, "bury")?;
            check_reason(&item.reason)?;
            Ok(Settle::Bury(lease, item.reason))
        }
    }
}

/// One settlement's answer, counted in the metrics when it was recorded.
fn settled_dto(state: &AppState, s: &Settle, r: delayq_core::Result<Settled>) -> SettleResult {
    let l = s.lease();
    match r {
        Ok(done) => {
            let (end, nack) = match done {
                Settled::Acked => (LeaseEnd::Acked, None),
                Settled::Nacked(o) => (
                    LeaseEnd::Nacked {
                        dead: o == NackOutcome::Dead,
                    },
                    Some(NackResponse::from(o)),
                ),
                Settled::Buried => (LeaseEnd::Buried, None),
                Settled::Released => (LeaseEnd::Released, None),
            };
            state.metrics.lease_ended(&l.topic, &l.id, l.token.0, end);
            SettleResult {
                ok: true,
                outcome: nack.as_ref().map(|n| n.outcome.clone()),
                ready_at: nack.and_then(|n| n.ready_at),
                error: None,
            }
        }
        Err(e) => {
            let e = ApiError::from(e);
            SettleResult {
                ok: false,
                outcome: None,
                ready_at: None,
                error: Some(e.detail()),
            }
        }
    }
}

/// Ack a delivery: the job is done and removed.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/jobs/{id}/ack",
    tag = "leases",
    params(JobPath),
    request_body = TokenRequest,
    responses((status = 204, description = "Acked"), LeaseLost, CommonErrors)
)]
pub async fn ack(
    State(state): State<AppState>,
    Path(path): Path<JobPath>,
    Json(req): Json<TokenRequest>,
) -> Result<StatusCode, ApiError> {
    let l = lease(&path, req.token, req.receipt.as_deref())?;
    state.acker.ack(&l).await?;
    state
        .metrics
        .lease_ended(&l.topic, &l.id, l.token.0, LeaseEnd::Acked);
    Ok(StatusCode::NO_CONTENT)
}

/// Ack up to 1000 deliveries in one request, by their receipts (or their leases); each is
/// answered in order.
#[utoipa::path(
    post,
    path = "/v1/ack",
    tag = "leases",
    request_body = AckBatchRequest,
    responses((status = 200, description = "One answer per lease", body = AckBatchResponse), CommonErrors)
)]
pub async fn ack_batch(
    State(state): State<AppState>,
    Json(req): Json<AckBatchRequest>,
) -> Result<axum::Json<AckBatchResponse>, ApiError> {
    let leases = match (req.receipts.is_empty(), req.leases.is_empty()) {
        (false, true) => req
            .receipts
            .iter()
            .enumerate()
            .map(|(i, r)| receipt::decode(r).map_err(|e| e.in_item("receipts", i)))
            .collect::<Result<Vec<_>, ApiError>>()?,
        (true, false) => req
            .leases
            .iter()
            .enumerate()
            .map(|(i, l)| lease_of(&l.topic, &l.id, l.token).map_err(|e| e.in_item("leases", i)))
            .collect::<Result<Vec<_>, ApiError>>()?,
        (false, false) => {
            return Err(ApiError::invalid_argument(
                "give receipts or leases, not both; send two requests",
            )
            .at("/leases"));
        }
        (true, true) => {
            return Err(ApiError::invalid_argument(
                "missing; give the receipts of 1 to 1000 deliveries (or leases: topic, id and token)",
            )
            .at("/receipts"));
        }
    };
    let results = state
        .engine
        .ack_batch(&leases)
        .await
        .map_err(|e| locate(e, ""))?;
    let results = leases
        .iter()
        .zip(results)
        .map(|(l, r)| match r {
            Ok(()) => {
                state
                    .metrics
                    .lease_ended(&l.topic, &l.id, l.token.0, LeaseEnd::Acked);
                AckResult {
                    ok: true,
                    error: None,
                }
            }
            Err(e) => {
                let e = ApiError::from(e);
                AckResult {
                    ok: false,
                    error: Some(e.detail()),
                }
            }
        })
        .collect();
    Ok(axum::Json(AckBatchResponse { results }))
}

/// Report a failed delivery: retry after `delay_ms` or the job's back-off, or dead when the
/// job has used all its attempts.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/jobs/{id}/nack",
    tag = "leases",
    params(JobPath),
    request_body = NackRequest,
    responses((status = 200, description = "What happened to the job", body = NackResponse), LeaseLost, CommonErrors)
)]
pub async fn nack(
    State(state): State<AppState>,
    Path(path): Path<JobPath>,
    Json(req): Json<NackRequest>,
) -> Result<axum::Json<NackResponse>, ApiError> {
    let l = lease(&path, req.token, req.receipt.as_deref())?;
    check_reason(&req.reason)?;
    let out = state
        .engine
        .nack(
            &l,
            Nack {
                delay: req.delay_ms.map(Duration::from_millis),
                reason: req.reason,
            },
        )
        .await
        .map_err(|e| locate(e, "/delay_ms"))?;
    let dead = out == NackOutcome::Dead;
    state
        .metrics
        .lease_ended(&l.topic, &l.id, l.token.0, LeaseEnd::Nacked { dead });
    Ok(axum::Json(NackResponse::from(out)))
}

/// Extend a lease to now + `ttr_ms` (or the job's ttr).
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/jobs/{id}/touch",
    tag = "leases",
    params(JobPath),
    request_body = TouchRequest,
    responses((status = 200, description = "The new deadline", body = TouchResponse), LeaseLost, CommonErrors)
)]
pub async fn touch(
    State(state): State<AppState>,
    Path(path): Path<JobPath>,
    Json(req): Json<TouchRequest>,
) -> Result<axum::Json<TouchResponse>, ApiError> {
    let l = lease(&path, req.token, req.receipt.as_deref())?;
    let deadline = state
        .engine
        .touch(&l, req.ttr_ms.map(Duration::from_millis))
        .await
        .map_err(|e| locate(e, ""))?;
    Ok(axum::Json(TouchResponse {
        deadline: super::dto::rfc3339(deadline),
        deadline_ms: deadline.as_millis(),
    }))
}

/// Send a reserved job to dead at once.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/jobs/{id}/bury",
    tag = "leases",
    params(JobPath),
    request_body = BuryRequest,
    responses((status = 204, description = "Buried"), LeaseLost, CommonErrors)
)]
pub async fn bury(
    State(state): State<AppState>,
    Path(path): Path<JobPath>,
    Json(req): Json<BuryRequest>,
) -> Result<StatusCode, ApiError> {
    let l = lease(&path, req.token, req.receipt.as_deref())?;
    check_reason(&req.reason)?;
    state.engine.bury(&l, req.reason).await?;
    state
        .metrics
        .lease_ended(&l.topic, &l.id, l.token.0, LeaseEnd::Buried);
    Ok(StatusCode::NO_CONTENT)
}

/// Give a delivery back without counting the attempt: the job is ready again at once.
#[utoipa::path(
    post,
    path = "/v1/topics/{topic}/jobs/{id}/release",
    tag = "leases",
    params(JobPath),
    request_body = TokenRequest,
    responses((status = 204, description = "Released"), LeaseLost, CommonErrors)
)]
pub async fn release(
    State(state): State<AppState>,
    Path(path): Path<JobPath>,
    Json(req): Json<TokenRequest>,
) -> Result<StatusCode, ApiError> {
    let l = lease(&path, req.token, req.receipt.as_deref())?;
    state.engine.release(&l).await?;
    state
        .metrics
        .lease_ended(&l.topic, &l.id, l.token.0, LeaseEnd::Released);
    Ok(StatusCode::NO_CONTENT)
}
