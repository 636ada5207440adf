"""The values the client sends and returns: jobs, deliveries, settlements, stats, topic
settings; and their conversion from and to the wire types.

Durations are seconds (``float``) or :class:`datetime.timedelta`; times are timezone-aware
:class:`datetime.datetime` (UTC when they come from the server). Bodies are ``bytes`` in
answers (``Job.text`` and ``Job.json()`` decode them) and ``str`` or ``bytes`` in pushes.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, List, Optional, Union

from . import _wire as wire
from ._errors import ApiError
from ._pushed import from_ms

Seconds = Union[float, timedelta]
"""A duration: seconds, or a timedelta."""

Body = Union[str, bytes]
"""A job body: text (sent as UTF-8) or bytes (sent as base64)."""

State = wire.StateDto
"""A job state: ``"delayed"``, ``"ready"``, ``"reserved"``, ``"dead"`` or ``"done"``."""

Outcome = wire.OutcomeDto
"""What a settlement does: ``"ack"``, ``"nack"``, ``"bury"`` or ``"release"``."""


def to_ms(d: Seconds) -> int:
    """A duration in whole milliseconds (the server checks the range)."""
    secs = d.total_seconds() if isinstance(d, timedelta) else d
    return round(secs * 1000)


def to_rfc3339(t: datetime) -> str:
    """An aware datetime as RFC 3339 with milliseconds, in UTC."""
    if t.tzinfo is None:
        raise ValueError(f"{t!r} has no time zone: give an aware datetime (tz=timezone.utc)")
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def from_rfc3339(s: str) -> datetime:
    """An RFC 3339 time of the server (``2026-11-23T05:14:57.123+00:00``)."""
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def opt_time(s: Optional[str]) -> Optional[datetime]:
    return None if s is None else from_rfc3339(s)


def opt_ms(ms: Optional[int]) -> Optional[datetime]:
    return None if ms is None else from_ms(ms)


def decode_body(body: str, encoding: wire.Encoding) -> bytes:
    return base64.b64decode(body) if encoding == "base64" else body.encode("utf-8")


@dataclass(frozen=True)
class Backoff:
    """A retry back-off: the delay after n failures is ``min(max, base · factor^(n−1))``,
    reduced by up to ``jitter`` (a fraction) of itself. ``kind`` is ``"exponential"`` or
    ``"fixed"``."""

    base: Seconds
    kind: wire.BackoffKind = "exponential"
    factor: Optional[int] = None
    max: Optional[Seconds] = None
    jitter: Optional[float] = None

    def to_wire(self) -> wire.BackoffDto:
        out: wire.BackoffDto = {"kind": self.kind, "base_ms": to_ms(self.base)}
        if self.factor is not None:
            out["factor"] = self.factor
        if self.max is not None:
            out["max_ms"] = to_ms(self.max)
        if self.jitter is not None:
            out["jitter"] = self.jitter
        return out

    @staticmethod
    def from_wire(d: wire.BackoffDto) -> Backoff:
        max_ms = d.get("max_ms")
        return Backoff(
            base=timedelta(milliseconds=d["base_ms"]),
            kind=d["kind"],
            factor=d.get("factor"),
            max=None if max_ms is None else timedelta(milliseconds=max_ms),
            jitter=d.get("jitter"),
        )


@dataclass(frozen=True)
class NewJob:
    """A job to push (see :meth:`delayq.Client.push` for the fields)."""

    body: Body
    id: Optional[str] = None
    delay: Optional[Seconds] = None
    at: Optional[datetime] = None
    priority: Optional[int] = None
    ttr: Optional[Seconds] = None
    max_attempts: Optional[int] = None
    backoff: Optional[Backoff] = None
    on_conflict: Optional[wire.OnConflictDto] = None
    max_wait: Optional[Seconds] = None
    max_lateness: Optional[Seconds] = None
    expires_at: Optional[datetime] = None
    on_expire: Optional[wire.OnExpireDto] = None

    def to_wire(self) -> wire.PushRequest:
        if isinstance(self.body, bytes):
            out: wire.PushRequest = {
                "body": base64.b64encode(self.body).decode("ascii"),
                "encoding": "base64",
            }
        else:
            out = {"body": self.body}
        if self.id is not None:
            out["id"] = self.id
        if self.delay is not None:
            out["delay_ms"] = to_ms(self.delay)
        if self.at is not None:
            out["ready_at"] = to_rfc3339(self.at)
        if self.priority is not None:
            out["priority"] = self.priority
        if self.ttr is not None:
            out["ttr_ms"] = to_ms(self.ttr)
        if self.max_attempts is not None:
            out["max_attempts"] = self.max_attempts
        if self.backoff is not None:
            out["backoff"] = self.backoff.to_wire()
        if self.on_conflict is not None:
            out["on_conflict"] = self.on_conflict
        if self.max_wait is not None:
            out["max_wait_ms"] = to_ms(self.max_wait)
        if self.max_lateness is not None:
            out["max_lateness_ms"] = to_ms(self.max_lateness)
        if self.expires_at is not None:
            out["expires_at"] = to_rfc3339(self.expires_at)
        if self.on_expire is not None:
            out["on_expire"] = self.on_expire
        return out


@dataclass(frozen=True)
class Job:
    """A stored job. In a delivery, ``attempts`` is the attempt number of that delivery
    and ``deadline`` its lease deadline; for a dead job ``deadline`` is when it died, for a
    done one when it was acked."""

    topic: str
    id: str
    body: bytes
    state: State
    priority: int
    ready_at: datetime
    ttr: timedelta
    max_attempts: int
    attempts: int
    backoff: Backoff
    created_at: datetime
    deadline: Optional[datetime] = None
    last_error: Optional[str] = None
    expires_at: Optional[datetime] = None
    on_expire: Optional[wire.OnExpireDto] = None

    @property
    def text(self) -> str:
        """The body as UTF-8 text."""
        return self.body.decode("utf-8")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)

    @staticmethod
    def from_wire(d: wire.JobDto) -> Job:
        return Job(
            topic=d["topic"],
            id=d["id"],
            body=decode_body(d["body"], d["encoding"]),
            state=d["state"],
            priority=d["priority"],
            ready_at=from_ms(d["ready_at_ms"]),
            ttr=timedelta(milliseconds=d["ttr_ms"]),
            max_attempts=d["max_attempts"],
            attempts=d["attempts"],
            backoff=Backoff.from_wire(d["backoff"]),
            created_at=from_rfc3339(d["created_at"]),
            deadline=opt_ms(d.get("deadline_ms")),
            last_error=d.get("last_error"),
            expires_at=opt_ms(d.get("expires_at_ms")),
            on_expire=d.get("on_expire"),
        )


@dataclass(frozen=True)
class LeaseRef:
    """A delivery's lease by topic, id and fencing token."""

    topic: str
    id: str
    token: int


@dataclass(frozen=True)
class Delivery:
    """A reserved job with its lease: ``token`` (the fencing token) and ``receipt`` (the one
    string that names the lease), both ``None`` at most once; ``lateness`` is how late the
    delivery was, in seconds."""

    job: Job
    token: Optional[int]
    receipt: Optional[str]
    lateness: float

    @property
    def lease(self) -> LeaseRef:
        """The lease as topic, id and token (``ValueError`` for an at-most-once delivery)."""
        if self.token is None:
            raise ValueError("an at-most-once delivery has no lease")
        return LeaseRef(self.job.topic, self.job.id, self.token)

    @staticmethod
    def from_wire(d: wire.DeliveryDto) -> Delivery:
        return Delivery(
            job=Job.from_wire(d["job"]),
            token=d.get("token"),
            receipt=d.get("receipt"),
            lateness=d["lateness_ms"] / 1000,
        )


Lease = Union[Delivery, LeaseRef]
"""A delivery's lease: the delivery itself (its receipt is sent) or a :class:`LeaseRef`."""


def name_lease(body: wire.TokenRequest, lease: Union[Lease, str]) -> None:
    """Names a lease in a request body: by its receipt when there is one, else its token."""
    if isinstance(lease, str):
        body["receipt"] = lease
    elif isinstance(lease, Delivery) and lease.receipt is not None:
        body["receipt"] = lease.receipt
    else:
        body["token"] = lease_ref(lease).token


def lease_ref(lease: Lease) -> LeaseRef:
    return lease.lease if isinstance(lease, Delivery) else lease


@dataclass(frozen=True)
class Settlement:
    """What to do with a delivery, sent with a reserve (``settle=``): ``ack`` (default),
    ``nack`` (retry after ``delay`` or the job's back-off, with a ``reason``), ``bury``
    (dead now, with a ``reason``) or ``release`` (back at once, the attempt not counted).
    ``lease`` is a delivery, a :class:`LeaseRef` or a receipt."""

    lease: Union[Lease, str]
    outcome: Outcome = "ack"
    delay: Optional[Seconds] = None
    reason: Optional[str] = None

    def to_wire(self) -> wire.SettleItem:
        out: wire.SettleItem = {"outcome": self.outcome}
        lease = self.lease
        if isinstance(lease, str):
            out["receipt"] = lease
        elif isinstance(lease, Delivery) and lease.receipt is not None:
            out["receipt"] = lease.receipt
        else:
            ref = lease_ref(lease)
            out["topic"], out["id"], out["token"] = ref.topic, ref.id, ref.token
        if self.delay is not None:
            out["delay_ms"] = to_ms(self.delay)
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class Settled:
    """The answer to one settlement: ``ok``, or the ``error`` (lease lost, not found, wrong
    state); for a nack, ``outcome`` ``"retry"`` (with ``ready_at``) or ``"dead"``."""

    ok: bool
    error: Optional[ApiError] = None
    outcome: Optional[str] = None
    ready_at: Optional[datetime] = None


@dataclass(frozen=True)
class Reservation:
    """What a reserve returned: the ``deliveries``, one :class:`Settled` per settlement sent
    with it, the wait the server used (seconds), and the asked topics the server could not
    reach (``unreachable``: a Redis Cluster primary down or hung; the answer holds the other
    topics' jobs, theirs wait until it answers; empty when it reached them all)."""

    deliveries: List[Delivery]
    settled: List[Settled]
    wait: float
    unreachable: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class NackResult:
    """What a nack did: ``"retry"`` (again at ``ready_at``) or ``"dead"``."""

    outcome: str
    ready_at: Optional[datetime]


@dataclass(frozen=True)
class Page:
    """One page of a listing; ``next_cursor`` is ``None`` on the last page; ``scanned`` is
    how many jobs the server looked at (with a ``prefix``)."""

    jobs: List[Job]
    next_cursor: Optional[str]
    scanned: Optional[int] = None


@dataclass(frozen=True)
class Stats:
    """A topic's counts per state and health."""

    topic: str
    delayed: int
    ready: int
    reserved: int
    dead: int
    done: int
    expired_leases: int
    expired_jobs: int
    paused: bool
    paused_until: Optional[datetime] = None
    next_due: Optional[datetime] = None
    oldest_overdue: Optional[timedelta] = None

    @staticmethod
    def from_wire(d: wire.StatsDto) -> Stats:
        overdue = d.get("oldest_overdue_ms")
        return Stats(
            topic=d["topic"],
            delayed=d["delayed"],
            ready=d["ready"],
            reserved=d["reserved"],
            dead=d["dead"],
            done=d["done"],
            expired_leases=d["expired_leases"],
            expired_jobs=d["expired_jobs"],
            paused=d["paused"],
            paused_until=opt_time(d.get("paused_until")),
            next_due=opt_time(d.get("next_due")),
            oldest_overdue=None if overdue is None else timedelta(milliseconds=overdue),
        )


@dataclass(frozen=True)
class Pause:
    """A topic's pause: ``until`` is ``None`` when it lasts until resumed."""

    paused: bool
    until: Optional[datetime]


@dataclass(frozen=True)
class Retention:
    """How many acked jobs a topic keeps (state ``done``), and for how long."""

    max_jobs: int
    max_age: Seconds


@dataclass(frozen=True)
class TopicConfig:
    """A topic's settings: the defaults of jobs pushed without their own, the largest body
    and the retention of done jobs. ``None`` fields are unset (the built-in default)."""

    ttr: Optional[Seconds] = None
    max_attempts: Optional[int] = None
    backoff: Optional[Backoff] = None
    max_body: Optional[int] = None
    retention: Optional[Retention] = None
    partitions: Optional[int] = None
    """How many partitions hold the topic's jobs (1 to 1024; ``None``: 1). It changes only
    while the topic holds no job, so keep it when changing the other settings."""

    def to_wire(self) -> wire.TopicConfigDto:
        out: wire.TopicConfigDto = {}
        if self.ttr is not None:
            out["ttr_ms"] = to_ms(self.ttr)
        if self.max_attempts is not None:
            out["max_attempts"] = self.max_attempts
        if self.backoff is not None:
            out["backoff"] = self.backoff.to_wire()
        if self.max_body is not None:
            out["max_body"] = self.max_body
        if self.retention is not None:
            r = self.retention
            out["retention"] = {"max_jobs": r.max_jobs, "max_age_ms": to_ms(r.max_age)}
        if self.partitions is not None:
            out["partitions"] = self.partitions
        return out

    @staticmethod
    def from_wire(d: wire.TopicConfigDto) -> TopicConfig:
        ttr, backoff, retention = d.get("ttr_ms"), d.get("backoff"), d.get("retention")
        return TopicConfig(
            ttr=None if ttr is None else timedelta(milliseconds=ttr),
            max_attempts=d.get("max_attempts"),
            backoff=None if backoff is None else Backoff.from_wire(backoff),
            max_body=d.get("max_body"),
            retention=None
            if retention is None
            else Retention(
                max_jobs=retention["max_jobs"],
                max_age=timedelta(milliseconds=retention["max_age_ms"]),
            ),
            partitions=d.get("partitions"),
        )


@dataclass(frozen=True)
class AckResult:
    """The answer to one ack of :meth:`delayq.Client.ack_many`: ``ok``, or the ``error``."""

    ok: bool
    error: Optional[ApiError] = None
