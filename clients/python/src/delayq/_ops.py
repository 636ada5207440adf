"""Every API call as a value: its route, path parameters, query, JSON body and how to read
its answer. The sync and the async client send the same :class:`Call`; only the sending
differs, so both speak exactly the same API.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Sequence, TypeVar, Union

from . import _wire as wire
from ._errors import ApiError, from_detail
from ._models import (
    AckResult,
    Delivery,
    Job,
    Lease,
    LeaseRef,
    NackResult,
    NewJob,
    Page,
    Pause,
    Reservation,
    Seconds,
    Settled,
    Settlement,
    State,
    Stats,
    TopicConfig,
    lease_ref,
    name_lease,
    opt_time,
    to_ms,
    to_rfc3339,
)
from ._pushed import PushResult, from_ms

T = TypeVar("T")

Answer = Any
"""A decoded JSON answer, read through the wire TypedDict of its route."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the reading of its answer (``None`` for an empty 204 answer)."""

    route: wire.Route
    path: Mapping[str, str]
    read: Callable[[Answer], T]
    body: Optional[Mapping[str, Any]] = None
    """A wire TypedDict (JSON values, hence ``Any``)."""
    query: Optional[Mapping[str, Any]] = None
    """A wire TypedDict of the route's query parameters."""
    wait: float = 0.0
    """How long the server may hold the request open on purpose (a long-poll), in seconds:
    added to the client's timeout."""
    read_error: Optional[Callable[[ApiError, Answer], None]] = None
    """Reads what an error answer carries besides its ``error`` into the exception."""


def _nothing(_: Answer) -> None:
    return None


def _job_path(topic: str, id: str) -> Dict[str, str]:
    return {"topic": topic, "id": id}


def push(topic: str, job: NewJob) -> Call[PushResult]:
    body: wire.PushRequest = job.to_wire()
    return Call(wire.POST_TOPICS_TOPIC_JOBS, {"topic": topic}, PushResult.from_wire, body)


def _push_results(d: wire.PushBatchResponse) -> List[PushResult]:
    return [PushResult.from_wire(r) for r in d["results"]]


def _push_failed(e: ApiError, d: wire.PushBatchFailed) -> None:
    """A batch push some of whose jobs were stored: which, and every job's id."""
    results = d.get("results")
    ids = d.get("ids")
    if results is not None and ids is not None:
        e.results = [None if r is None else PushResult.from_wire(r) for r in results]
        e.ids = list(ids)


def push_batch(topic: str, jobs: Sequence[NewJob]) -> Call[List[PushResult]]:
    body: wire.PushBatchRequest = {"jobs": [j.to_wire() for j in jobs]}
    return Call(
        wire.POST_TOPICS_TOPIC_BATCH,
        {"topic": topic},
        _push_results,
        body,
        read_error=_push_failed,
    )


def get(topic: str, id: str) -> Call[Job]:
    return Call(wire.GET_TOPICS_TOPIC_JOBS_ID, _job_path(topic, id), Job.from_wire)


def delete(topic: str, id: str) -> Call[None]:
    return Call(wire.DELETE_TOPICS_TOPIC_JOBS_ID, _job_path(topic, id), _nothing)


def _ready_at(d: wire.ReadyAtResponse) -> datetime:
    return from_ms(d["ready_at_ms"])


def reschedule(
    topic: str, id: str, delay: Optional[Seconds], at: Optional[datetime]
) -> Call[datetime]:
    body: wire.RescheduleRequest = {}
    if delay is not None:
        body["delay_ms"] = to_ms(delay)
    if at is not None:
        body["ready_at"] = to_rfc3339(at)
    return Call(wire.POST_TOPICS_TOPIC_JOBS_ID_RESCHEDULE, _job_path(topic, id), _ready_at, body)


def _page(d: wire.ListResponse) -> Page:
    return Page(
        jobs=[Job.from_wire(j) for j in d["jobs"]],
        next_cursor=d.get("next_cursor"),
        scanned=d.get("scanned"),
    )


def list_jobs(
    topic: str,
    state: State,
    limit: Optional[int],
    cursor: Optional[str],
    prefix: Optional[str],
) -> Call[Page]:
    query: wire.GetTopicsTopicJobsQuery = {"state": state}
    if limit is not None:
        query["limit"] = limit
    if cursor is not None:
        query["cursor"] = cursor
    if prefix is not None:
        query["prefix"] = prefix
    return Call(wire.GET_TOPICS_TOPIC_JOBS, {"topic": topic}, _page, query=query)


def stats(topic: str) -> Call[Stats]:
    return Call(wire.GET_TOPICS_TOPIC_STATS, {"topic": topic}, Stats.from_wire)


def _topics(d: wire.TopicsResponse) -> List[Stats]:
    return [Stats.from_wire(s) for s in d["topics"]]


def topics() -> Call[List[Stats]]:
    return Call(wire.GET_TOPICS, {}, _topics)


def _count(d: wire.CountResponse) -> int:
    return d["count"]


def kick(topic: str, id: str) -> Call[None]:
    return Call(wire.POST_TOPICS_TOPIC_JOBS_ID_KICK, _job_path(topic, id), _nothing)


def kick_all(topic: str) -> Call[int]:
    return Call(wire.POST_TOPICS_TOPIC_KICK, {"topic": topic}, _count)


def archive(topic: str, id: str, reason: Optional[str]) -> Call[None]:
    body: wire.ArchiveRequest = {} if reason is None else {"reason": reason}
    return Call(wire.POST_TOPICS_TOPIC_JOBS_ID_ARCHIVE, _job_path(topic, id), _nothing, body)


def purge(topic: str) -> Call[int]:
    return Call(wire.DELETE_TOPICS_TOPIC, {"topic": topic}, _count)


def _pause(d: wire.PauseResponse) -> Pause:
    return Pause(paused=d["paused"], until=opt_time(d.get("paused_until")))


def pause(topic: str, duration: Optional[Seconds], until: Optional[datetime]) -> Call[Pause]:
    body: wire.PauseRequest = {}
    if duration is not None:
        body["for_ms"] = to_ms(duration)
    if until is not None:
        body["until"] = to_rfc3339(until)
    return Call(wire.POST_TOPICS_TOPIC_PAUSE, {"topic": topic}, _pause, body)


def resume(topic: str) -> Call[None]:
    return Call(wire.POST_TOPICS_TOPIC_RESUME, {"topic": topic}, _nothing)


def topic_config(topic: str) -> Call[TopicConfig]:
    return Call(wire.GET_TOPICS_TOPIC, {"topic": topic}, TopicConfig.from_wire)


def set_topic_config(topic: str, config: TopicConfig) -> Call[TopicConfig]:
    body: wire.TopicConfigDto = config.to_wire()
    return Call(wire.PUT_TOPICS_TOPIC, {"topic": topic}, TopicConfig.from_wire, body)


def _settled(d: wire.SettleResult, status: int) -> Settled:
    error = d.get("error")
    ready_at = d.get("ready_at")
    return Settled(
        ok=d["ok"],
        error=None if error is None else from_detail(error, status),
        outcome=d.get("outcome"),
        ready_at=opt_time(ready_at),
    )


def _status_of(detail: Optional[wire.ErrorDetail]) -> int:
    """The status a single request would have answered for a batch item's error."""
    code = None if detail is None else detail["code"]
    return {"not_found": 404, "lease_lost": 409, "wrong_state": 409}.get(code or "", 400)


def _reservation(d: wire.ReserveResponse) -> Reservation:
    return Reservation(
        deliveries=[Delivery.from_wire(j) for j in d["jobs"]],
        settled=[_settled(s, _status_of(s.get("error"))) for s in d["settled"]],
        wait=d["wait_ms"] / 1000,
        # A server from before issue 37 does not send it.
        unreachable=list(d.get("unreachable", [])),
    )


def reserve(
    topics: Sequence[str],
    max: int,
    wait: Seconds,
    settle: Sequence[Settlement],
    at_most_once: bool,
) -> Call[Reservation]:
    body: wire.ReserveRequest = {"topics": list(topics), "max": max, "wait_ms": to_ms(wait)}
    if settle:
        body["settle"] = [s.to_wire() for s in settle]
    if at_most_once:
        body["mode"] = "at_most_once"
    waits = to_ms(wait) / 1000 if max > 0 else 0.0
    return Call(wire.POST_RESERVE, {}, _reservation, body, wait=waits)


def _lease_path(lease: Lease) -> Dict[str, str]:
    ref: LeaseRef = lease_ref(lease)
    return _job_path(ref.topic, ref.id)


def ack(lease: Lease) -> Call[None]:
    body: wire.TokenRequest = {}
    name_lease(body, lease)
    return Call(wire.POST_TOPICS_TOPIC_JOBS_ID_ACK, _lease_path(lease), _nothing, body)


def _ack_result(d: wire.AckResult) -> AckResult:
    error = d.get("error")
    return AckResult(
        ok=d["ok"], error=None if error is None else from_detail(error, _status_of(error))
    )


def _ack_results(d: wire.AckBatchResponse) -> List[AckResult]:
    return [_ack_result(r) for r in d["results"]]


def ack_many(leases: Sequence[Union[Lease, str]]) -> Call[List[AckResult]]:
    receipts: List[str] = []
    refs: List[wire.LeaseRef] = []
    for lease in leases:
        if isinstance(lease, str):
            receipts.append(lease)
        elif isinstance(lease, Delivery) and lease.receipt is not None:
            receipts.append(lease.receipt)
        else:
            ref = lease_ref(lease)
            refs.append({"topic": ref.topic, "id": ref.id, "token": ref.token})
    if receipts and refs:
        raise ValueError(
            "ack_many takes receipts (deliveries with one) or leases, not both in one call"
        )
    body: wire.AckBatchRequest = {"receipts": receipts} if receipts else {"leases": refs}
    return Call(wire.POST_ACK, {}, _ack_results, body)


def _nack(d: wire.NackResponse) -> NackResult:
    return NackResult(outcome=d["outcome"], ready_at=opt_time(d.get("ready_at")))


def nack(lease: Lease, delay: Optional[Seconds], reason: Optional[str]) -> Call[NackResult]:
    body: wire.NackRequest = {}
    name_lease(body, lease)
    if delay is not None:
        body["delay_ms"] = to_ms(delay)
    if reason is not None:
        body["reason"] = reason
    return Call(wire.POST_TOPICS_TOPIC_JOBS_ID_NACK, _lease_path(lease), _nack, body)


def _deadline(d: wire.TouchResponse) -> datetime:
    return from_ms(d["deadline_ms"])


def touch(lease: Lease, ttr: Optional[Seconds]) -> Call[datetime]:
    body: wire.TouchRequest = {}
    name_lease(body, lease)
    if ttr is not None:
        body["ttr_ms"] = to_ms(ttr)
    return Call(wire.POST_TOPICS_TOPIC_JOBS_ID_TOUCH, _lease_path(lease), _deadline, body)


def bury(lease: Lease, reason: Optional[str]) -> Call[None]:
    body: wire.BuryRequest = {}
    name_lease(body, lease)
    if reason is not None:
        body["reason"] = reason
    return Call(wire.POST_TOPICS_TOPIC_JOBS_ID_BURY, _lease_path(lease), _nothing, body)


def release(lease: Lease) -> Call[None]:
    body: wire.TokenRequest = {}
    name_lease(body, lease)
    return Call(wire.POST_TOPICS_TOPIC_JOBS_ID_RELEASE, _lease_path(lease), _nothing, body)
