//! The JSON wire types of API v1 and their conversions from and to the core types. This is
//! the only place that knows the wire format.
//!
//! The file is long because it holds the whole wire format, every request and answer type
//! of the API, which the OpenAPI document is built from: one place to read and change it.

use std::time::Duration;

use base64::Engine as _;
use delayq_core::limits::MAX_REASON;
use delayq_core::{
    Backoff, Bytes, Delivery, Job, JobState, MAX_PARTITIONS, NackOutcome, Pushed, Retention,
    Schedule, Timestamp, TopicConfig, TopicStats, duration_ms,
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use utoipa::ToSchema;

use super::error::ApiError;
use super::fields::locate;

/// The longest delay, in ms (10 years).
pub const MAX_DELAY_MS: u64 = 315_576_000_000;

/// How a body is written in JSON.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// The body is the string itself (UTF-8).
    #[default]
    Utf8,
    /// The body is standard base64 (with padding) of the bytes.
    Base64,
}

/// A job state.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StateDto {
    /// Waiting for its due time.
    Delayed,
    /// Due, waiting for a reserver.
    Ready,
    /// Leased to a reserver.
    Reserved,
    /// Failed too often or buried.
    Dead,
    /// Acked, and kept by its topic's retention until it runs out.
    Done,
}

impl From<JobState> for StateDto {
    fn from(s: JobState) -> Self {
        match s {
            JobState::Delayed => StateDto::Delayed,
            JobState::Ready => StateDto::Ready,
            JobState::Reserved => StateDto::Reserved,
            JobState::Dead => StateDto::Dead,
            JobState::Done => StateDto::Done,
        }
    }
}

impl From<StateDto> for JobState {
    fn from(s: StateDto) -> Self {
        match s {
            StateDto::Delayed => JobState::Delayed,
            StateDto::Ready => JobState::Ready,
            StateDto::Reserved => JobState::Reserved,
            StateDto::Dead => JobState::Dead,
            StateDto::Done => JobState::Done,
        }
    }
}

/// The shape of a retry back-off.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BackoffKind {
    /// The same delay before every retry.
    Fixed,
    /// A delay that grows by `factor` from `base_ms` up to `max_ms`.
    Exponential,
}

/// A retry back-off: the delay after n failures is `min(max_ms, base_ms · factor^(n−1))`,
/// reduced by up to `jitter` of itself.
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BackoffDto {
    /// `fixed` or `exponential`.
    pub kind: BackoffKind,
    /// The first delay in ms.
    #[schema(maximum = 315_576_000_000_u64)]
    pub base_ms: u64,
    /// The cap in ms (exponential only; default 1 h; at least `base_ms`).
    #[schema(maximum = 315_576_000_000_u64)]
    pub max_ms: Option<u64>,
    /// The growth factor (exponential only; default 2; 1 to 100).
    #[schema(minimum = 1, maximum = 100)]
    pub factor: Option<u32>,
    /// The jitter: a fraction from 0 to 1 (default 0).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub jitter: Option<f64>,
}

impl BackoffDto {
    /// The core back-off.
    pub fn into_core(self) -> Backoff {
        let base = Duration::from_millis(self.base_ms);
        let b = match self.kind {
            BackoffKind::Fixed => Backoff::fixed(base),
            BackoffKind::Exponential => Backoff::exponential(
                base,
                Duration::from_millis(self.max_ms.unwrap_or(3_600_000)),
            )
            .with_factor(self.factor.unwrap_or(2)),
        };
        b.with_jitter(self.jitter.unwrap_or(0.0))
    }

    /// The wire form of `b`.
    pub fn from_core(b: &Backoff) -> Self {
        BackoffDto {
            kind: if b.factor() <= 1 {
                BackoffKind::Fixed
            } else {
                BackoffKind::Exponential
            },
            base_ms: b.base_ms(),
            max_ms: Some(b.max_ms()),
            factor: Some(b.factor()),
            jitter: Some(f64::from(b.jitter_permille()) / 1000.0),
        }
    }
}

/// A job to push.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct PushRequest {
    /// The job id, also the idempotency key (1 to 200 visible ASCII characters); a UUIDv7 is
    /// generated when absent.
    #[schema(pattern = "^[!-~]{1,200}$")]
    pub id: Option<String>,
    /// The payload, as `encoding` says.
    pub body: String,
    /// `utf8` (default) or `base64`.
    #[serde(default)]
    pub encoding: Encoding,
    /// Due this many ms after the server receives the push (0 to 10 years). At most one of
    /// `delay_ms` and `ready_at`; neither means due now.
    #[schema(maximum = 315_576_000_000_u64)]
    pub delay_ms: Option<u64>,
    /// Due at this RFC 3339 time (`2026-01-02T15:04:05.000+00:00`, or with `Z`), on the
    /// engine's clock (at most 10 years ahead; a time in the past means now).
    #[schema(format = DateTime)]
    pub ready_at: Option<String>,
    /// The lease length of each delivery in ms (1 s to 24 h, default 30 s).
    #[schema(minimum = 1000, maximum = 86_400_000)]
    pub ttr_ms: Option<u64>,
    /// Deliveries before the job goes dead (1 to 10,000, default 3).
    #[schema(minimum = 1, maximum = 10_000)]
    pub max_attempts: Option<u32>,
    /// Among due jobs, lower runs first (default 0).
    // A u32: utoipa would say int32, whose values stop at 2147483647 (issue 36).
    #[schema(format = Int64, maximum = 4_294_967_295_u64)]
    pub priority: Option<u32>,
    /// The retry back-off (default: exponential from 1 s, doubling, up to 1 h, 10 % jitter).
    pub backoff: Option<BackoffDto>,
    /// When a live job with this id exists: `keep` it (default), `replace` a waiting one's
    /// body, due time and options, or `debounce` (replace, with each push's delay moving it
    /// back, bounded by `max_wait_ms` from its first push). A reserved or dead job is never
    /// touched.
    #[serde(default)]
    pub on_conflict: OnConflictDto,
    /// With `debounce`: the latest the job may become due, in ms after its first push.
    #[schema(maximum = 315_576_000_000_u64)]
    pub max_wait_ms: Option<u64>,
    /// Not delivered after this RFC 3339 time on the engine's clock, which must be after its
    /// due time: a job still waiting then goes dead with the reason `expired` (or is
    /// dropped, `on_expire`). At most one of `expires_at` and `max_lateness_ms`; a delivery
    /// made in time runs to its end.
    #[schema(format = DateTime)]
    pub expires_at: Option<String>,
    /// Not delivered more than this many ms after its due time (1 ms to 10 years), counted
    /// once at the push: retries do not move it.
    #[schema(minimum = 1, maximum = 315_576_000_000_u64)]
    pub max_lateness_ms: Option<u64>,
    /// With an expiry: `dead` (default) sends the expired job to dead with the reason
    /// `expired`, `drop` deletes it.
    pub on_expire: Option<OnExpireDto>,
}

/// What happens to a job whose expiry passed before a delivery.
#[derive(Deserialize, Serialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnExpireDto {
    /// It goes dead with the reason `expired` (it can be kicked).
    #[default]
    Dead,
    /// It is deleted.
    Drop,
}

impl From<OnExpireDto> for delayq_core::OnExpire {
    fn from(o: OnExpireDto) -> Self {
        match o {
            OnExpireDto::Dead => delayq_core::OnExpire::Dead,
            OnExpireDto::Drop => delayq_core::OnExpire::Drop,
        }
    }
}

impl From<delayq_core::OnExpire> for OnExpireDto {
    fn from(o: delayq_core::OnExpire) -> Self {
        match o {
            delayq_core::OnExpire::Dead => OnExpireDto::Dead,
            delayq_core::OnExpire::Drop => OnExpireDto::Drop,
        }
    }
}

/// What a push does when a live job with its id exists.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnConflictDto {
    /// Leave it as it is.
    #[default]
    Keep,
    /// Replace a waiting job.
    Replace,
    /// Replace a waiting job, its due time counted from this push, within `max_wait_ms`.
    Debounce,
}

impl OnConflictDto {
    /// The core form, with the debounce's bound.
    pub fn into_core(self, max_wait_ms: Option<u64>) -> delayq_core::OnConflict {
        match self {
            OnConflictDto::Keep => delayq_core::OnConflict::Keep,
            OnConflictDto::Replace => delayq_core::OnConflict::Replace,
            OnConflictDto::Debounce => delayq_core::OnConflict::Debounce {
                max_wait: max_wait_ms.map(Duration::from_millis),
            },
        }
    }
}

/// Up to 1000 jobs of one topic.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct PushBatchRequest {
    /// The jobs, answered in order.
    #[schema(min_items = 1, max_items = 1000)]
    pub jobs: Vec<PushRequest>,
}

/// The answer to a push.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct PushResponse {
    /// The job id (generated or given).
    pub id: String,
    /// True when this push created the job; false when a live job with this id existed (then
    /// nothing changed).
    pub created: bool,
    /// True when a live job with this id existed and this push replaced it (`on_conflict`
    /// `replace` or `debounce` of a waiting job).
    pub replaced: bool,
    /// The job's state.
    pub state: StateDto,
    /// The due time, RFC 3339.
    pub ready_at: String,
    /// The due time in ms since the Unix epoch.
    pub ready_at_ms: u64,
}

/// The answers to a batch push, in order.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct PushBatchResponse {
    /// One answer per job.
    pub results: Vec<PushResponse>,
}

/// The answer to a batch push that failed: the error, and when some jobs were stored and
/// others not (on a Redis Cluster whose primary holding some of the topic's partitions is
/// down), what became of each job. `error` is the first job's not stored, `index` naming it.
#[derive(Serialize, ToSchema, Debug)]
pub struct PushBatchFailed {
    /// The error.
    pub error: super::error::ErrorDetail,
    /// Only when some jobs were stored: one per job, in order, the push's answer for a job
    /// stored, `null` for one that was not (which may still be stored: its call may run
    /// late).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<Option<PushResponse>>>,
    /// Only when some jobs were stored: every job's id, in order, generated ones included.
    /// Send the jobs whose result is `null` again with these ids: a push is idempotent by
    /// its id, so none is stored twice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<String>>,
}

/// A stored job.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct JobDto {
    /// The topic.
    pub topic: String,
    /// The id.
    pub id: String,
    /// The payload, as `encoding` says.
    pub body: String,
    /// `utf8` when the body is valid UTF-8, else `base64`.
    pub encoding: Encoding,
    /// The state.
    pub state: StateDto,
    /// Among due jobs, lower runs first.
    // A u32: utoipa would say int32, whose values stop at 2147483647 (issue 36).
    #[schema(format = Int64, maximum = 4_294_967_295_u64)]
    pub priority: u32,
    /// The due time, RFC 3339.
    pub ready_at: String,
    /// The due time in ms since the Unix epoch.
    pub ready_at_ms: u64,
    /// The lease length in ms.
    pub ttr_ms: u64,
    /// Deliveries allowed before it goes dead.
    pub max_attempts: u32,
    /// Deliveries so far; in a delivery, the attempt number of that delivery (1 for the
    /// first).
    pub attempts: u32,
    /// The retry back-off.
    pub backoff: BackoffDto,
    /// When it was pushed, RFC 3339.
    pub created_at: String,
    /// The lease deadline while reserved, the time of death while dead, the time of the ack
    /// while done (RFC 3339); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
    /// `deadline` in ms since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// The reason given by the last nack or bury, "lease expired", or "expired" (its expiry
    /// passed before a delivery); absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The latest it may be delivered, RFC 3339; absent when it has no expiry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// `expires_at` in ms since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// What happens when `expires_at` passes before a delivery; absent without an expiry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_expire: Option<OnExpireDto>,
}

/// A delivery mode.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ModeDto {
    /// Leased until acked (default).
    #[default]
    AtLeastOnce,
    /// Removed as handed out: no lease, no retry; a crash while handling loses the job.
    AtMostOnce,
}

/// A reserve (long-poll).
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct ReserveRequest {
    /// Topics to take from (1 to 64, no repeats).
    #[schema(schema_with = topics_schema)]
    pub topics: Vec<String>,
    /// The most jobs to return (1 to 1000, default 1; 0 with `settle`: settle only, no wait).
    #[schema(minimum = 0, maximum = 1000)]
    pub max: Option<usize>,
    /// How long to wait for a first job, in ms (default 0). A longer wait than the server's
    /// long-poll limit (30 s unless configured) is cut to it: the answer's `wait_ms` says the
    /// wait used. The answer comes as soon as a job is due.
    pub wait_ms: Option<u64>,
    /// `at_least_once` (default) or `at_most_once`.
    #[serde(default)]
    pub mode: ModeDto,
    /// Leases to settle before reserving (up to 1000), so that a consumer's cycle (report
    /// what it finished, take the next jobs) is one request. Each is answered in `settled`,
    /// in order; a lost lease is answered there and never fails the request.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub settle: Vec<SettleItem>,
}

/// What was done with a delivery, reported in a reserve's `settle`.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeDto {
    /// Done: the job is removed (default).
    #[default]
    Ack,
    /// Failed: retried after `delay_ms` or the job's back-off, or dead when out of attempts.
    Nack,
    /// Dead at once, with an optional `reason`.
    Bury,
    /// Given back without counting the attempt: ready again at once.
    Release,
}

/// One lease to settle: which delivery (its `receipt`, or its `topic`, `id` and `token`),
/// and its outcome.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct SettleItem {
    /// The delivery's receipt; or give `topic`, `id` and `token`.
    pub receipt: Option<String>,
    /// The topic (without `receipt`).
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,200}$")]
    pub topic: Option<String>,
    /// The job id (without `receipt`).
    #[schema(pattern = "^[!-~]{1,200}$")]
    pub id: Option<String>,
    /// The lease token from the reserve (without `receipt`).
    pub token: Option<u64>,
    /// `ack` (default), `nack`, `bury` or `release`.
    #[serde(default)]
    pub outcome: OutcomeDto,
    /// For `nack` only: retry after this many ms instead of the job's back-off.
    #[schema(maximum = 315_576_000_000_u64)]
    pub delay_ms: Option<u64>,
    /// For `nack` and `bury` only: why (at most 4 KiB, no NUL character), kept with the job.
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
}

/// The answer to one settlement of a reserve.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct SettleResult {
    /// True when the outcome was recorded.
    pub ok: bool,
    /// For a recorded nack: `retry` or `dead`.
    pub outcome: Option<String>,
    /// For a nack answered `retry`: when it will be delivered again (RFC 3339).
    pub ready_at: Option<String>,
    /// Why not: `lease_lost`, `not_found` or `wrong_state`, as the per-job lease operations
    /// answer.
    pub error: Option<super::error::ErrorDetail>,
}

/// 1 to 64 distinct topic names.
fn topics_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[A-Za-z0-9_.:-]{1,200}$")),
        )
        .min_items(Some(1))
        .max_items(Some(64))
        .unique_items(true)
        .description(Some("Topics to take from (1 to 64, no repeats)."))
        .build()
}

/// A job handed to a reserver. Each fact is in one place: the attempt number is
/// `job.attempts`, the lease deadline `job.deadline` (and `job.deadline_ms`).
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct DeliveryDto {
    /// The job, reserved: `attempts` counts this delivery, `deadline` is the lease's.
    pub job: JobDto,
    /// The fencing token of this delivery's lease, for the `topic`, `id` and `token` forms
    /// of the lease operations; absent in at-most-once mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// The one string that names this delivery's lease in every lease operation (a batch
    /// ack's `receipts`, `receipt` in ack, nack, touch, bury and release, a reserve's
    /// `settle`); absent in at-most-once mode. Opaque: pass it back unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    /// How late the delivery is in ms, to the µs (engine time at reserve minus the due time).
    pub lateness_ms: f64,
}

/// The jobs of a reserve; empty when none came within the wait.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ReserveResponse {
    /// The deliveries.
    pub jobs: Vec<DeliveryDto>,
    /// One answer per item of the request's `settle`, in order (empty without it).
    pub settled: Vec<SettleResult>,
    /// The longest this reserve waited for a first job, in ms: the request's `wait_ms` cut to
    /// the server's long-poll limit (0 when `max` is 0). Loop with it as the wait.
    pub wait_ms: u64,
    /// The asked topics the engine could not reach as it answered, in the order asked;
    /// empty when it reached them all. On a Redis Cluster, a reserve over topics of several
    /// primaries answers with the jobs of the primaries that answered and skips, for a
    /// second or so, one that did not answer within the slot timeout (500 ms): its topics
    /// are listed here (a partitioned topic when any of its partitions is on it). Their
    /// jobs are not lost: they are served again once the primary answers, or its replica
    /// took over. Elsewhere (one Redis node, the embedded engine, PostgreSQL) always empty:
    /// a failure fails the whole request.
    pub unreachable: Vec<String>,
}

/// A lease token.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// The lease token from the reserve; or give `receipt`.
    pub token: Option<u64>,
    /// The delivery's receipt, instead of `token`.
    pub receipt: Option<String>,
}

/// A nack.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct NackRequest {
    /// The lease token from the reserve; or give `receipt`.
    pub token: Option<u64>,
    /// The delivery's receipt, instead of `token`.
    pub receipt: Option<String>,
    /// Retry after this many ms instead of the job's back-off (0 to 10 years).
    #[schema(maximum = 315_576_000_000_u64)]
    pub delay_ms: Option<u64>,
    /// Why it failed (at most 4 KiB, no NUL character), kept with the job.
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
}

/// What a nack did.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct NackResponse {
    /// `retry` or `dead`.
    pub outcome: String,
    /// When it will be delivered again (RFC 3339), for `retry`.
    pub ready_at: Option<String>,
}

/// A touch.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct TouchRequest {
    /// The lease token from the reserve; or give `receipt`.
    pub token: Option<u64>,
    /// The delivery's receipt, instead of `token`.
    pub receipt: Option<String>,
    /// The new lease length from now in ms (1 s to 24 h; default the job's ttr).
    #[schema(minimum = 1000, maximum = 86_400_000)]
    pub ttr_ms: Option<u64>,
}

/// The new lease deadline.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct TouchResponse {
    /// RFC 3339.
    pub deadline: String,
    /// In ms since the Unix epoch.
    pub deadline_ms: u64,
}

/// A bury.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct BuryRequest {
    /// The lease token from the reserve; or give `receipt`.
    pub token: Option<u64>,
    /// The delivery's receipt, instead of `token`.
    pub receipt: Option<String>,
    /// Why (at most 4 KiB, no NUL character), kept with the job.
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
}

/// One lease in a batch ack.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct LeaseRef {
    /// The topic.
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,200}$")]
    pub topic: String,
    /// The job id.
    #[schema(pattern = "^[!-~]{1,200}$")]
    pub id: String,
    /// The lease token.
    pub token: u64,
}

/// Up to 1000 acks in one request: the deliveries' `receipts`, or their `leases`.
#[derive(Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct AckBatchRequest {
    /// The receipts of the deliveries to ack (1 to 1000; not with `leases`).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub receipts: Vec<String>,
    /// The leases to ack, by topic, id and token (1 to 1000; not with `receipts`).
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub leases: Vec<LeaseRef>,
}

/// The answer to one ack of a batch.
#[derive(Serialize, ToSchema, Debug)]
pub struct AckResult {
    /// True when acked.
    pub ok: bool,
    /// Why not: `lease_lost`, `not_found` or `wrong_state`, as the per-job lease operations
    /// answer.
    pub error: Option<super::error::ErrorDetail>,
}

/// The answers to a batch ack, in order.
#[derive(Serialize, ToSchema, Debug)]
pub struct AckBatchResponse {
    /// One per receipt or lease.
    pub results: Vec<AckResult>,
}

/// A new due time: `{"delay_ms": n}` or `{"ready_at": "<RFC 3339>"}` (exactly one).
#[derive(Serialize, Deserialize, ToSchema, Debug)]
#[serde(deny_unknown_fields)]
pub struct RescheduleRequest {
    /// Due this many ms from now (0 to 10 years).
    #[schema(maximum = 315_576_000_000_u64)]
    pub delay_ms: Option<u64>,
    /// Due at this RFC 3339 time, at most 10 years ahead; a past time means now.
    #[schema(format = DateTime)]
    pub ready_at: Option<String>,
}

/// A due time.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ReadyAtResponse {
    /// RFC 3339.
    pub ready_at: String,
    /// In ms since the Unix epoch.
    pub ready_at_ms: u64,
}

/// One page of a listing.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct ListResponse {
    /// The jobs, in the state's order.
    pub jobs: Vec<JobDto>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    pub next_cursor: Option<String>,
    /// With a `prefix`: how many jobs the server looked at for this page (at most 10,000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scanned: Option<u64>,
}

/// Counts and health of a topic.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct StatsDto {
    /// The topic.
    pub topic: String,
    /// Jobs waiting for their due time.
    pub delayed: u64,
    /// Due jobs waiting for a reserver.
    pub ready: u64,
    /// Leased jobs.
    pub reserved: u64,
    /// Dead jobs.
    pub dead: u64,
    /// Done jobs the topic's retention keeps (0 without one).
    pub done: u64,
    /// How long the longest-waiting due job has waited, in ms.
    pub oldest_overdue_ms: Option<u64>,
    /// The earliest due time among delayed jobs, RFC 3339.
    pub next_due: Option<String>,
    /// Leases that ran out without an answer, since the topic was created or last purged.
    pub expired_leases: u64,
    /// Jobs whose expiry passed before a delivery (gone dead with the reason `expired`, or
    /// dropped), since the topic was created or last purged.
    pub expired_jobs: u64,
    /// True while the topic is paused: it hands out no job (`POST .../pause`).
    pub paused: bool,
    /// When the pause ends, RFC 3339; null while not paused or paused until resumed.
    pub paused_until: Option<String>,
}

/// Every topic with its stats.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct TopicsResponse {
    /// The topics, sorted, but for those in `unreachable`.
    pub topics: Vec<StatsDto>,
    /// The topics the engine cannot reach now, sorted (a Redis Cluster primary that did not
    /// answer their stats within the slot timeout, or did not answer in time lately; see
    /// `unreachable` in a reserve's answer): their stats are not waited for, and these
    /// topics are not in `topics`. Empty when every topic was reached.
    pub unreachable: Vec<String>,
}

/// How long to pause a topic: at most one of `until` and `for_ms`; neither pauses it until
/// resumed.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    /// The pause ends at this RFC 3339 time (at most 10 years ahead).
    #[schema(format = DateTime)]
    pub until: Option<String>,
    /// The pause ends this many ms from now (at most 10 years).
    #[schema(maximum = 315_576_000_000_u64)]
    pub for_ms: Option<u64>,
}

/// A topic's pause.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct PauseResponse {
    /// True while the topic is paused.
    pub paused: bool,
    /// When the pause ends, RFC 3339; null when paused until resumed.
    pub paused_until: Option<String>,
    /// Whether the server knew the topic before this pause: it had jobs, settings or a
    /// pause. False for a name never used (or purged since): the pause holds, ahead of the
    /// topic's first push, and lists the topic in `/v1/topics`; check the name if it was
    /// meant to be an existing topic.
    pub known: bool,
}

/// A count of jobs an operation touched.
#[derive(Serialize, Deserialize, ToSchema, Debug)]
pub struct CountResponse {
    /// How many.
    pub count: u64,
}

/// A topic's settings, shared by every server of the engine: the defaults of the jobs
/// pushed to it without their own (a push's own fields win) and the largest body it takes.
/// A `PUT` replaces them whole: an absent or null field is unset (the built-in default, or
/// the server's limit). A purge keeps them; jobs keep what they were pushed with.
#[derive(Serialize, Deserialize, ToSchema, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct TopicConfigDto {
    /// The lease length in ms of jobs pushed without `ttr_ms` (1 s to 24 h); null: 30 s.
    #[schema(minimum = 1000, maximum = 86_400_000)]
    pub ttr_ms: Option<u64>,
    /// The deliveries allowed to jobs pushed without `max_attempts` (1 to 10,000); null: 3.
    #[schema(minimum = 1, maximum = 10_000)]
    pub max_attempts: Option<u32>,
    /// The retry back-off of jobs pushed without one; null: exponential from 1 s, doubling,
    /// up to 1 h, 10 % jitter.
    pub backoff: Option<BackoffDto>,
    /// The largest body of this topic's jobs in bytes (1 to 536870912); the server's
    /// `--max-body` stays in force when it is smaller. null: the server's.
    #[schema(minimum = 1, maximum = 536_870_912)]
    pub max_body: Option<u64>,
    /// Keep acked jobs, in state `done` (listed with `state=done`, read by id), within these
    /// bounds; null: an acked job is removed at once. A change applies at once: the done
    /// jobs beyond the new bounds go (all of them when it is null).
    pub retention: Option<RetentionDto>,
    /// How many partitions hold the topic's jobs (1 to 1024); null: 1. A job's partition
    /// follows from its id. The order (priority, then due time, then push order) is
    /// promised within a partition, across partitions it is best effort: keep 1 where
    /// strict order matters. It can change only while the topic holds no job (else 409
    /// `partitions_in_use`, nothing changed): a `PUT` that leaves it out asks for 1.
    #[schema(minimum = 1, maximum = 1024)]
    pub partitions: Option<u32>,
}

/// How many acked jobs a topic keeps, and for how long: a done job stays until `max_age_ms`
/// after its ack, or until `max_jobs` later ones were acked, whichever comes first.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct RetentionDto {
    /// The most done jobs kept (1 to 100,000); the oldest go first.
    #[schema(minimum = 1, maximum = 100_000)]
    pub max_jobs: u32,
    /// How long after its ack a done job is kept, in ms (1 s to 30 days).
    #[schema(minimum = 1000, maximum = 2_592_000_000_u64)]
    pub max_age_ms: u64,
}

impl TopicConfigDto {
    /// The settings, checked; an error names the field at fault.
    pub fn into_core(self) -> Result<TopicConfig, ApiError> {
        let config = TopicConfig {
            ttr: self.ttr_ms.map(Duration::from_millis),
            max_attempts: self.max_attempts,
            backoff: self.backoff.map(BackoffDto::into_core),
            max_body: self
                .max_body
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            retention: self.retention.map(|r| Retention {
                max_jobs: r.max_jobs,
                max_age: Duration::from_millis(r.max_age_ms),
            }),
            partitions: match self.partitions {
                // Out of u16's range: refused here, with the number as sent.
                Some(n) if u16::try_from(n).is_err() => {
                    return Err(locate(
                        delayq_core::Error::invalid(
                            "partitions",
                            format!("{n} is outside 1 to {MAX_PARTITIONS}"),
                        ),
                        "/ttr_ms",
                    ));
                }
                n => n.and_then(|n| u16::try_from(n).ok()),
            },
        };
        config.validate().map_err(|e| locate(e, "/ttr_ms"))?;
        Ok(config)
    }

    /// The wire form of `c`.
    pub fn from_core(c: &TopicConfig) -> Self {
        TopicConfigDto {
            ttr_ms: c.ttr.map(duration_ms),
            max_attempts: c.max_attempts,
            backoff: c.backoff.as_ref().map(BackoffDto::from_core),
            max_body: c.max_body.map(|n| n as u64),
            retention: c.retention.map(|r| RetentionDto {
                max_jobs: r.max_jobs,
                max_age_ms: duration_ms(r.max_age),
            }),
            partitions: c.partitions.map(u32::from),
        }
    }
}

/// Formats engine milliseconds as RFC 3339, always UTC with millisecond precision and a
/// numeric offset (`2026-11-23T05:14:57.120+00:00`): the form every RFC 3339 parser reads,
/// Python 3.10's `datetime.fromisoformat` included (it reads neither `Z` nor other digit
/// counts).
pub fn rfc3339(t: Timestamp) -> String {
    let nanos = i128::from(t.as_millis()) * 1_000_000;
    // Written digit by digit: every delivery carries two or three of these, and `format!`'s
    // padding machinery cost more than the rest of the job's answer.
    let Ok(d) = OffsetDateTime::from_unix_timestamp_nanos(nanos) else {
        return t.as_millis().to_string();
    };
    let Ok(year) = u32::try_from(d.year()) else {
        return t.as_millis().to_string();
    };
    fn digits(s: &mut String, v: u32, width: u32) {
        for place in (0..width).rev() {
            s.push(char::from(b'0' + (v / 10u32.pow(place) % 10) as u8));
        }
    }
    let mut s = String::with_capacity(29);
    digits(&mut s, year, 4);
    let fields = [
        ('-', u32::from(u8::from(d.month())), 2),
        ('-', u32::from(d.day()), 2),
        ('T', u32::from(d.hour()), 2),
        (':', u32::from(d.minute()), 2),
        (':', u32::from(d.second()), 2),
        ('.', u32::from(d.millisecond()), 3),
    ];
    for (sep, v, width) in fields {
        s.push(sep);
        digits(&mut s, v, width);
    }
    s.push_str("+00:00");
    s
}

/// Parses an RFC 3339 time into engine milliseconds (rounded up, so never early).
pub fn parse_rfc3339(s: &str, field: &str) -> Result<Timestamp, ApiError> {
    let bad = || {
        ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "invalid_delay",
            format!("{field} {s:?} is not an RFC 3339 time such as 2026-01-02T15:04:05.000+00:00"),
        )
    };
    let d = OffsetDateTime::parse(s, &Rfc3339).map_err(|_| bad())?;
    let nanos = d.unix_timestamp_nanos();
    if nanos < 0 {
        return Err(bad());
    }
    let ms = u64::try_from((nanos as u128).div_ceil(1_000_000)).map_err(|_| bad())?;
    Ok(Timestamp::from_millis(ms))
}

/// The schedule of a push or reschedule: at most one of `delay_ms` and `ready_at`, checked
/// as far as it can be without the engine's clock; errors name the field.
pub fn schedule(delay_ms: Option<u64>, ready_at: Option<&str>) -> Result<Schedule, ApiError> {
    let when = match (delay_ms, ready_at) {
        (Some(_), Some(_)) => {
            return Err(ApiError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "invalid_delay",
                "give delay_ms or ready_at, not both",
            )
            .at("/ready_at"));
        }
        (Some(ms), None) => Schedule::Delay(Duration::from_millis(ms)),
        (None, Some(at)) => {
            Schedule::At(parse_rfc3339(at, "ready_at").map_err(|e| e.at("/ready_at"))?)
        }
        (None, None) => Schedule::NOW,
    };
    when.validate()
        .map_err(|e| locate(e, delay_field(ready_at.is_some())))?;
    Ok(when)
}

/// The pointer of the field that sets a due time.
pub fn delay_field(absolute: bool) -> &'static str {
    if absolute { "/ready_at" } else { "/delay_ms" }
}

/// Decodes a request body.
pub fn decode_body(body: String, encoding: Encoding) -> Result<Bytes, ApiError> {
    match encoding {
        Encoding::Utf8 => Ok(Bytes::from(body)),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD
            .decode(body.as_bytes())
            .map(Bytes::from)
            .map_err(|e| {
                ApiError::invalid_argument(format!(
                    "not valid base64 ({e}); send standard base64 with padding, or drop \"encoding\" to send text"
                ))
                .at("/body")
            }),
    }
}

/// Encodes a body: the text when it is UTF-8, else base64.
pub fn encode_body(body: &Bytes) -> (String, Encoding) {
    match std::str::from_utf8(body) {
        Ok(s) => (s.to_string(), Encoding::Utf8),
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(body),
            Encoding::Base64,
        ),
    }
}

/// Applies the optional fields of a push to a job.
pub fn apply_options(
    mut job: delayq_core::NewJob,
    req_ttr: Option<u64>,
    max_attempts: Option<u32>,
    priority: Option<u32>,
    backoff: Option<BackoffDto>,
) -> delayq_core::NewJob {
    if let Some(ms) = req_ttr {
        job = job.with_ttr(Duration::from_millis(ms));
    }
    if let Some(n) = max_attempts {
        job = job.with_max_attempts(n);
    }
    if let Some(p) = priority {
        job = job.with_priority(p);
    }
    if let Some(b) = backoff {
        job = job.with_backoff(b.into_core());
    }
    job
}

/// Checks a reason's length and characters before it reaches the engine (which checks
/// them too).
pub fn check_reason(reason: &Option<String>) -> Result<(), ApiError> {
    match reason {
        Some(r) if r.len() > MAX_REASON => Err(ApiError::invalid_argument(format!(
            "reason is {} bytes, the limit is {MAX_REASON}; shorten it",
            r.len()
        ))
        .at("/reason")),
        Some(r) if r.contains('\0') => Err(ApiError::invalid_argument(
            "reason holds a NUL character (U+0000); remove it or replace it".to_string(),
        )
        .at("/reason")),
        _ => Ok(()),
    }
}

impl From<&Job> for JobDto {
    fn from(j: &Job) -> Self {
        let (body, encoding) = encode_body(&j.body);
        JobDto {
            topic: j.topic.to_string(),
            id: j.id.to_string(),
            body,
            encoding,
            state: j.state.into(),
            priority: j.priority,
            ready_at: rfc3339(j.ready_at),
            ready_at_ms: j.ready_at.as_millis(),
            ttr_ms: j.ttr.as_millis() as u64,
            max_attempts: j.max_attempts,
            attempts: j.attempts,
            backoff: BackoffDto::from_core(&j.backoff),
            created_at: rfc3339(j.created_at),
            deadline: j.deadline.map(rfc3339),
            deadline_ms: j.deadline.map(Timestamp::as_millis),
            last_error: j.last_error.clone(),
            expires_at: j.expires_at.map(rfc3339),
            expires_at_ms: j.expires_at.map(Timestamp::as_millis),
            on_expire: j.expires_at.map(|_| j.on_expire.into()),
        }
    }
}

impl From<&Delivery> for DeliveryDto {
    fn from(d: &Delivery) -> Self {
        DeliveryDto {
            job: JobDto::from(&d.job),
            token: d.lease.as_ref().map(|l| l.token.0),
            receipt: d.lease.as_ref().map(super::receipt::encode),
            lateness_ms: d.lateness.as_micros() as f64 / 1000.0,
        }
    }
}

impl From<Pushed> for PushResponse {
    fn from(p: Pushed) -> Self {
        PushResponse {
            id: p.id.to_string(),
            created: p.created,
            replaced: p.replaced,
            state: p.state.into(),
            ready_at: rfc3339(p.ready_at),
            ready_at_ms: p.ready_at.as_millis(),
        }
    }
}

impl From<NackOutcome> for NackResponse {
    fn from(o: NackOutcome) -> Self {
        match o {
            NackOutcome::Retry { ready_at } => NackResponse {
                outcome: "retry".into(),
                ready_at: Some(rfc3339(ready_at)),
            },
            NackOutcome::Dead => NackResponse {
                outcome: "dead".into(),
                ready_at: None,
            },
        }
    }
}

impl StatsDto {
    /// The stats of `topic`.
    pub fn new(topic: &delayq_core::Topic, s: &TopicStats) -> Self {
        StatsDto {
            topic: topic.to_string(),
            delayed: s.delayed,
            ready: s.ready,
            reserved: s.reserved,
            dead: s.dead,
            done: s.done,
            oldest_overdue_ms: s.oldest_overdue.map(|d| d.as_millis() as u64),
            next_due: s.next_due.map(rfc3339),
            expired_leases: s.expired_leases,
            expired_jobs: s.expired_jobs,
            paused: s.paused_until.is_some(),
            paused_until: s
                .paused_until
                .filter(|t| *t != Timestamp::NEVER)
                .map(rfc3339),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_and_round_up() {
        let t = Timestamp::from_millis(1_767_366_245_123);
        assert_eq!(rfc3339(t), "2026-01-02T15:04:05.123+00:00");
        assert_eq!(
            rfc3339(Timestamp::from_millis(1_767_366_245_000)),
            "2026-01-02T15:04:05.000+00:00",
            "always three digits"
        );
        assert_eq!(
            rfc3339(Timestamp::from_millis(1_767_366_245_020)),
            "2026-01-02T15:04:05.020+00:00"
        );
        assert_eq!(parse_rfc3339(&rfc3339(t), "t").ok(), Some(t));
        assert_eq!(parse_rfc3339("2026-01-02T15:04:05.123Z", "t").ok(), Some(t));
        assert_eq!(
            parse_rfc3339("2026-01-02T16:04:05.1225+01:00", "t").ok(),
            Some(t),
            "sub-millisecond parts round up"
        );
        assert!(parse_rfc3339("yesterday", "t").is_err());
        assert!(parse_rfc3339("1960-01-01T00:00:00Z", "t").is_err());
    }

    #[test]
    fn bodies_say_their_encoding() {
        assert_eq!(
            encode_body(&Bytes::from_static(b"hi")),
            ("hi".into(), Encoding::Utf8)
        );
        assert_eq!(
            encode_body(&Bytes::from_static(&[0xff, 0])),
            ("/wA=".into(), Encoding::Base64)
        );
        assert_eq!(
            decode_body("/wA=".into(), Encoding::Base64).ok(),
            Some(Bytes::from_static(&[0xff, 0]))
        );
        assert!(decode_body("***".into(), Encoding::Base64).is_err());
    }
}
