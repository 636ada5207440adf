"""The wire types of the delayq HTTP API, generated from its OpenAPI document.

Do not edit: ``python tools/gen_wire.py URL > src/delayq/_wire.py`` writes it again, and
``tests/test_openapi.py`` checks that it matches what the server serves. It is long because
it holds one type for every schema of the document.
"""

from __future__ import annotations

from typing import Dict, List, Literal, NamedTuple, Optional, TypedDict


class Route(NamedTuple):
    """A method and a path template of the API."""

    method: str
    path: str


BackoffKind = Literal["fixed", "exponential"]
"""The shape of a retry back-off."""


BulkAction = Literal["kick", "delete", "run_now", "bury"]
"""What a bulk request does to each job."""


DestinationType = Literal["webhook", "rabbitmq", "nats"]
"""The kinds of destination."""


Encoding = Literal["utf8", "base64"]
"""How a body is written in JSON."""


MisfireDto = Literal["skip", "once", "each"]
"""What to do with fire times that passed while no server ran."""


ModeDto = Literal["at_least_once", "at_most_once"]
"""A delivery mode."""


OnConflictDto = Literal["keep", "replace", "debounce"]
"""What a push does when a live job with its id exists."""


OnExpireDto = Literal["dead", "drop"]
"""What happens to a job whose expiry passed before a delivery."""


OutcomeDto = Literal["ack", "nack", "bury", "release"]
"""What was done with a delivery, reported in a reserve's `settle`."""


StateDto = Literal["delayed", "ready", "reserved", "dead", "done"]
"""A job state."""


class AckBatchRequest(TypedDict, total=False):
    """Up to 1000 acks in one request: the deliveries' `receipts`, or their `leases`."""

    leases: List[LeaseRef]
    receipts: List[str]


class AckBatchResponse(TypedDict):
    """The answers to a batch ack, in order."""

    results: List[AckResult]


class _AckResultRequired(TypedDict):
    ok: bool


class AckResult(_AckResultRequired, total=False):
    """The answer to one ack of a batch."""

    error: Optional[ErrorDetail]


class ArchiveRequest(TypedDict, total=False):
    """An archive: why the job goes dead."""

    reason: Optional[str]


class _BackoffDtoRequired(TypedDict):
    base_ms: int
    kind: BackoffKind


class BackoffDto(_BackoffDtoRequired, total=False):
    """A retry back-off: the delay after n failures is `min(max_ms, base_ms · factor^(n−1))`,"""

    factor: Optional[int]
    jitter: Optional[float]
    max_ms: Optional[int]


class BulkFailure(TypedDict):
    """One job a bulk request could not act on."""

    code: str
    id: str
    message: str


class _BulkRequestRequired(TypedDict):
    action: BulkAction


class BulkRequest(_BulkRequestRequired, total=False):
    """One action on many jobs of a topic: the jobs listed in `ids`, or every job of `state`"""

    cursor: Optional[str]
    ids: Optional[List[str]]
    prefix: Optional[str]
    reason: Optional[str]
    state: Optional[StateDto]


class _BulkResponseRequired(TypedDict):
    done: int
    failed: int
    failures: List[BulkFailure]
    more: bool
    scanned: int


class BulkResponse(_BulkResponseRequired, total=False):
    """What a bulk request did."""

    next_cursor: Optional[str]


class BuryRequest(TypedDict, total=False):
    """A bury."""

    reason: Optional[str]
    receipt: Optional[str]
    token: Optional[int]


class CountResponse(TypedDict):
    """A count of jobs an operation touched."""

    count: int


class _DeliveryDtoRequired(TypedDict):
    job: JobDto
    lateness_ms: float


class DeliveryDto(_DeliveryDtoRequired, total=False):
    """A job handed to a reserver. Each fact is in one place: the attempt number is"""

    receipt: Optional[str]
    token: Optional[int]


class _DestinationDocRequired(TypedDict):
    type: DestinationType
    url: str


class DestinationDoc(_DestinationDocRequired, total=False):
    """Where a topic's due jobs go: a webhook (`url`, `secrets`, `headers`, `content_type`), a"""

    content_type: Optional[str]
    exchange: Optional[str]
    headers: Optional[Dict[str, str]]
    max_concurrency: Optional[int]
    routing_key: Optional[str]
    secrets: Optional[List[str]]
    subject: Optional[str]
    timeout_ms: Optional[int]


class _DestinationViewRequired(TypedDict):
    max_concurrency: int
    type: DestinationType
    url: str


class DestinationView(_DestinationViewRequired, total=False):
    """A destination as `GET` shows it: no secrets, the values of headers that carry"""

    content_type: Optional[str]
    exchange: Optional[str]
    headers: Optional[Dict[str, str]]
    routing_key: Optional[str]
    secret_count: Optional[int]
    subject: Optional[str]
    timeout_ms: Optional[int]


class ErrorBody(TypedDict):
    """The JSON body of every error response."""

    error: ErrorDetail


class _ErrorDetailRequired(TypedDict):
    code: str
    message: str


class ErrorDetail(_ErrorDetailRequired, total=False):
    """One error: a stable machine-readable code and a message for people; for a bad field of"""

    field: Optional[str]
    index: Optional[int]


class _JobDtoRequired(TypedDict):
    attempts: int
    backoff: BackoffDto
    body: str
    created_at: str
    encoding: Encoding
    id: str
    max_attempts: int
    priority: int
    ready_at: str
    ready_at_ms: int
    state: StateDto
    topic: str
    ttr_ms: int


class JobDto(_JobDtoRequired, total=False):
    """A stored job."""

    deadline: Optional[str]
    deadline_ms: Optional[int]
    expires_at: Optional[str]
    expires_at_ms: Optional[int]
    last_error: Optional[str]
    on_expire: Optional[OnExpireDto]


class LatenessDto(TypedDict):
    """The lateness histogram and its percentiles, over the last minute and the last hour."""

    bounds_ms: List[float]
    last_hour: LatenessWindow
    last_minute: LatenessWindow


class _LatenessWindowRequired(TypedDict):
    count: int
    counts: List[int]


class LatenessWindow(_LatenessWindowRequired, total=False):
    """The lateness of the deliveries of a window of time."""

    max_ms: Optional[float]
    p50_ms: Optional[float]
    p90_ms: Optional[float]
    p99_ms: Optional[float]


class LeaseRef(TypedDict):
    """One lease in a batch ack."""

    id: str
    token: int
    topic: str


class _ListResponseRequired(TypedDict):
    jobs: List[JobDto]


class ListResponse(_ListResponseRequired, total=False):
    """One page of a listing."""

    next_cursor: Optional[str]
    scanned: Optional[int]


class MinuteDto(TypedDict):
    """One minute of what this server did."""

    acked: int
    dead: int
    delivered: int
    pushed: int
    start: str
    start_ms: int


class NackRequest(TypedDict, total=False):
    """A nack."""

    delay_ms: Optional[int]
    reason: Optional[str]
    receipt: Optional[str]
    token: Optional[int]


class _NackResponseRequired(TypedDict):
    outcome: str


class NackResponse(_NackResponseRequired, total=False):
    """What a nack did."""

    ready_at: Optional[str]


class PauseRequest(TypedDict, total=False):
    """How long to pause a topic: at most one of `until` and `for_ms`; neither pauses it until"""

    for_ms: Optional[int]
    until: Optional[str]


class _PauseResponseRequired(TypedDict):
    known: bool
    paused: bool


class PauseResponse(_PauseResponseRequired, total=False):
    """A topic's pause."""

    paused_until: Optional[str]


class _PushBatchFailedRequired(TypedDict):
    error: ErrorDetail


class PushBatchFailed(_PushBatchFailedRequired, total=False):
    """The answer to a batch push that failed: the error, and when some jobs were stored and"""

    ids: Optional[List[str]]
    results: Optional[List[Optional[PushResponse]]]


class PushBatchRequest(TypedDict):
    """Up to 1000 jobs of one topic."""

    jobs: List[PushRequest]


class PushBatchResponse(TypedDict):
    """The answers to a batch push, in order."""

    results: List[PushResponse]


class _PushRequestRequired(TypedDict):
    body: str


class PushRequest(_PushRequestRequired, total=False):
    """A job to push."""

    backoff: Optional[BackoffDto]
    delay_ms: Optional[int]
    encoding: Encoding
    expires_at: Optional[str]
    id: Optional[str]
    max_attempts: Optional[int]
    max_lateness_ms: Optional[int]
    max_wait_ms: Optional[int]
    on_conflict: OnConflictDto
    on_expire: Optional[OnExpireDto]
    priority: Optional[int]
    ready_at: Optional[str]
    ttr_ms: Optional[int]


class PushResponse(TypedDict):
    """The answer to a push."""

    created: bool
    id: str
    ready_at: str
    ready_at_ms: int
    replaced: bool
    state: StateDto


class ReadyAtResponse(TypedDict):
    """A due time."""

    ready_at: str
    ready_at_ms: int


class RescheduleRequest(TypedDict, total=False):
    """A new due time: `{"delay_ms": n}` or `{"ready_at": "<RFC 3339>"}` (exactly one)."""

    delay_ms: Optional[int]
    ready_at: Optional[str]


class _ReserveRequestRequired(TypedDict):
    topics: List[str]


class ReserveRequest(_ReserveRequestRequired, total=False):
    """A reserve (long-poll)."""

    max: Optional[int]
    mode: ModeDto
    settle: List[SettleItem]
    wait_ms: Optional[int]


class ReserveResponse(TypedDict):
    """The jobs of a reserve; empty when none came within the wait."""

    jobs: List[DeliveryDto]
    settled: List[SettleResult]
    unreachable: List[str]
    wait_ms: int


class RetentionDto(TypedDict):
    """How many acked jobs a topic keeps, and for how long: a done job stays until `max_age_ms`"""

    max_age_ms: int
    max_jobs: int


class _ScheduleDtoRequired(TypedDict):
    body: str
    cron: str
    encoding: Encoding
    jitter_ms: int
    misfire: MisfireDto
    name: str
    priority: int
    revision: int
    time_zone: str
    topic: str


class ScheduleDto(_ScheduleDtoRequired, total=False):
    """A stored schedule, with its state."""

    backoff: Optional[BackoffDto]
    end: Optional[str]
    expires_at: Optional[str]
    max_attempts: Optional[int]
    max_lateness_ms: Optional[int]
    misfire_limit: Optional[int]
    next_fire: Optional[str]
    next_fire_ms: Optional[int]
    on_expire: Optional[OnExpireDto]
    pushed_through: Optional[str]
    start: Optional[str]
    ttr_ms: Optional[int]


class _ScheduleRequestRequired(TypedDict):
    cron: str
    topic: str


class ScheduleRequest(_ScheduleRequestRequired, total=False):
    """A schedule: a cron expression in a time zone, and the job each fire pushes."""

    backoff: Optional[BackoffDto]
    body: str
    encoding: Encoding
    end: Optional[str]
    expires_at: Optional[str]
    jitter_ms: Optional[int]
    max_attempts: Optional[int]
    max_lateness_ms: Optional[int]
    misfire: MisfireDto
    misfire_limit: Optional[int]
    on_expire: Optional[OnExpireDto]
    priority: Optional[int]
    start: Optional[str]
    time_zone: Optional[str]
    ttr_ms: Optional[int]


class SchedulesResponse(TypedDict):
    """Every schedule."""

    schedules: List[ScheduleDto]


class _SeriesResponseRequired(TypedDict):
    lateness: LatenessDto
    minutes: List[MinuteDto]
    scope: str
    since: str
    since_ms: int


class SeriesResponse(_SeriesResponseRequired, total=False):
    """What this server did, per minute over the last hour, and how late its deliveries were."""

    topic: Optional[str]


class SettleItem(TypedDict, total=False):
    """One lease to settle: which delivery (its `receipt`, or its `topic`, `id` and `token`),"""

    delay_ms: Optional[int]
    id: Optional[str]
    outcome: OutcomeDto
    reason: Optional[str]
    receipt: Optional[str]
    token: Optional[int]
    topic: Optional[str]


class _SettleResultRequired(TypedDict):
    ok: bool


class SettleResult(_SettleResultRequired, total=False):
    """The answer to one settlement of a reserve."""

    error: Optional[ErrorDetail]
    outcome: Optional[str]
    ready_at: Optional[str]


class _StatsDtoRequired(TypedDict):
    dead: int
    delayed: int
    done: int
    expired_jobs: int
    expired_leases: int
    paused: bool
    ready: int
    reserved: int
    topic: str


class StatsDto(_StatsDtoRequired, total=False):
    """Counts and health of a topic."""

    next_due: Optional[str]
    oldest_overdue_ms: Optional[int]
    paused_until: Optional[str]


class TokenRequest(TypedDict, total=False):
    """A lease token."""

    receipt: Optional[str]
    token: Optional[int]


class TopicConfigDto(TypedDict, total=False):
    """A topic's settings, shared by every server of the engine: the defaults of the jobs"""

    backoff: Optional[BackoffDto]
    max_attempts: Optional[int]
    max_body: Optional[int]
    partitions: Optional[int]
    retention: Optional[RetentionDto]
    ttr_ms: Optional[int]


class TopicsResponse(TypedDict):
    """Every topic with its stats."""

    topics: List[StatsDto]
    unreachable: List[str]


class TouchRequest(TypedDict, total=False):
    """A touch."""

    receipt: Optional[str]
    token: Optional[int]
    ttr_ms: Optional[int]


class TouchResponse(TypedDict):
    """The new lease deadline."""

    deadline: str
    deadline_ms: int


class GetSeriesQuery(TypedDict, total=False):
    """The query of GET /v1/series."""

    topic: str


class _GetTopicsTopicJobsQueryRequired(TypedDict):
    state: StateDto


class GetTopicsTopicJobsQuery(_GetTopicsTopicJobsQueryRequired, total=False):
    """The query of GET /v1/topics/{topic}/jobs."""

    limit: int
    cursor: str
    prefix: str


POST_ACK = Route("POST", "/v1/ack")
POST_RESERVE = Route("POST", "/v1/reserve")
GET_SCHEDULES = Route("GET", "/v1/schedules")
DELETE_SCHEDULES_NAME = Route("DELETE", "/v1/schedules/{name}")
GET_SCHEDULES_NAME = Route("GET", "/v1/schedules/{name}")
PUT_SCHEDULES_NAME = Route("PUT", "/v1/schedules/{name}")
GET_SERIES = Route("GET", "/v1/series")
GET_TOPICS = Route("GET", "/v1/topics")
DELETE_TOPICS_TOPIC = Route("DELETE", "/v1/topics/{topic}")
GET_TOPICS_TOPIC = Route("GET", "/v1/topics/{topic}")
PUT_TOPICS_TOPIC = Route("PUT", "/v1/topics/{topic}")
POST_TOPICS_TOPIC_BATCH = Route("POST", "/v1/topics/{topic}/batch")
POST_TOPICS_TOPIC_BULK = Route("POST", "/v1/topics/{topic}/bulk")
DELETE_TOPICS_TOPIC_DESTINATION = Route("DELETE", "/v1/topics/{topic}/destination")
GET_TOPICS_TOPIC_DESTINATION = Route("GET", "/v1/topics/{topic}/destination")
PUT_TOPICS_TOPIC_DESTINATION = Route("PUT", "/v1/topics/{topic}/destination")
GET_TOPICS_TOPIC_JOBS = Route("GET", "/v1/topics/{topic}/jobs")
POST_TOPICS_TOPIC_JOBS = Route("POST", "/v1/topics/{topic}/jobs")
DELETE_TOPICS_TOPIC_JOBS_ID = Route("DELETE", "/v1/topics/{topic}/jobs/{id}")
GET_TOPICS_TOPIC_JOBS_ID = Route("GET", "/v1/topics/{topic}/jobs/{id}")
POST_TOPICS_TOPIC_JOBS_ID_ACK = Route("POST", "/v1/topics/{topic}/jobs/{id}/ack")
POST_TOPICS_TOPIC_JOBS_ID_ARCHIVE = Route("POST", "/v1/topics/{topic}/jobs/{id}/archive")
POST_TOPICS_TOPIC_JOBS_ID_BURY = Route("POST", "/v1/topics/{topic}/jobs/{id}/bury")
POST_TOPICS_TOPIC_JOBS_ID_KICK = Route("POST", "/v1/topics/{topic}/jobs/{id}/kick")
POST_TOPICS_TOPIC_JOBS_ID_NACK = Route("POST", "/v1/topics/{topic}/jobs/{id}/nack")
POST_TOPICS_TOPIC_JOBS_ID_RELEASE = Route("POST", "/v1/topics/{topic}/jobs/{id}/release")
POST_TOPICS_TOPIC_JOBS_ID_RESCHEDULE = Route("POST", "/v1/topics/{topic}/jobs/{id}/reschedule")
POST_TOPICS_TOPIC_JOBS_ID_TOUCH = Route("POST", "/v1/topics/{topic}/jobs/{id}/touch")
POST_TOPICS_TOPIC_KICK = Route("POST", "/v1/topics/{topic}/kick")
POST_TOPICS_TOPIC_PAUSE = Route("POST", "/v1/topics/{topic}/pause")
POST_TOPICS_TOPIC_RESUME = Route("POST", "/v1/topics/{topic}/resume")
GET_TOPICS_TOPIC_STATS = Route("GET", "/v1/topics/{topic}/stats")


ROUTES = (
    POST_ACK,
    POST_RESERVE,
    GET_SCHEDULES,
    DELETE_SCHEDULES_NAME,
    GET_SCHEDULES_NAME,
    PUT_SCHEDULES_NAME,
    GET_SERIES,
    GET_TOPICS,
    DELETE_TOPICS_TOPIC,
    GET_TOPICS_TOPIC,
    PUT_TOPICS_TOPIC,
    POST_TOPICS_TOPIC_BATCH,
    POST_TOPICS_TOPIC_BULK,
    DELETE_TOPICS_TOPIC_DESTINATION,
    GET_TOPICS_TOPIC_DESTINATION,
    PUT_TOPICS_TOPIC_DESTINATION,
    GET_TOPICS_TOPIC_JOBS,
    POST_TOPICS_TOPIC_JOBS,
    DELETE_TOPICS_TOPIC_JOBS_ID,
    GET_TOPICS_TOPIC_JOBS_ID,
    POST_TOPICS_TOPIC_JOBS_ID_ACK,
    POST_TOPICS_TOPIC_JOBS_ID_ARCHIVE,
    POST_TOPICS_TOPIC_JOBS_ID_BURY,
    POST_TOPICS_TOPIC_JOBS_ID_KICK,
    POST_TOPICS_TOPIC_JOBS_ID_NACK,
    POST_TOPICS_TOPIC_JOBS_ID_RELEASE,
    POST_TOPICS_TOPIC_JOBS_ID_RESCHEDULE,
    POST_TOPICS_TOPIC_JOBS_ID_TOUCH,
    POST_TOPICS_TOPIC_KICK,
    POST_TOPICS_TOPIC_PAUSE,
    POST_TOPICS_TOPIC_RESUME,
    GET_TOPICS_TOPIC_STATS,
)
"""Every route of the document."""


ERROR_CODES = (
    "invalid_topic",
    "invalid_id",
    "invalid_delay",
    "invalid_ttr",
    "invalid_receipt",
    "invalid_argument",
    "invalid_request",
    "body_too_large",
    "unauthorized",
    "read_only",
    "not_found",
    "lease_lost",
    "already_exists",
    "wrong_state",
    "partitions_in_use",
    "unavailable",
    "engine_full",
    "not_replicated",
    "timeout",
    "overloaded",
    "method_not_allowed",
    "internal",
)
"""The error codes the document lists."""
