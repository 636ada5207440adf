"""The exceptions: one class per error code of the API, grouped by what the caller can do,
and the errors of the transport (the server unreachable, a timeout).

Every error the client raises is a :class:`DelayqError`. Those worth retrying as they are
(the server unreachable, a timeout, a 503) are also :class:`TransientError`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Dict, List, Optional, Type

from . import _wire as wire

if TYPE_CHECKING:
    from ._pushed import PushResult


class DelayqError(Exception):
    """Every error of the delayq client."""


class TransientError(DelayqError):
    """An error that may go away by itself: retrying the same call later is safe (a push is
    idempotent by its id; a repeated settlement answers ``lease_lost`` or ``not_found``)."""


class TransportError(TransientError):
    """No answer came from the server."""


class ServerUnreachableError(TransportError):
    """The server could not be reached: nothing listens at its address, the network or the
    TLS handshake failed. Check the URL (``DELAYQ_SERVER``) and that ``delayq serve`` runs."""


class RequestTimeoutError(TransportError):
    """The server did not answer within the client's timeout (``timeout=`` of the client)."""


class ProtocolError(DelayqError):
    """The server answered something this client does not understand (not delayq, or a
    version it does not know)."""


class ApiError(DelayqError):
    """An error answered by the server, with its stable ``code``.

    Attributes: ``status`` (the HTTP status), ``code``, ``message`` (what went wrong and
    what to do), ``field`` (the JSON pointer of the request field at fault, if any) and
    ``index`` (the list item at fault, if any).

    A batch push some of whose jobs were stored and others not (on a Redis Cluster whose
    primary holding some of the topic's partitions is down) also has ``results`` (one per
    job, in order: its :class:`delayq.PushResult` when stored, ``None`` when not) and
    ``ids`` (every job's id, generated ones included): push only the jobs whose result is
    ``None`` again, with those ids. Pushing the whole batch again would create again a
    stored job that was meanwhile delivered and acked. Both are ``None`` otherwise.
    """

    status: int
    code: str
    message: str
    field: Optional[str]
    index: Optional[int]
    results: Optional[List[Optional[PushResult]]]
    ids: Optional[List[str]]

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        code: str = "",
        field: Optional[str] = None,
        index: Optional[int] = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if code else message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.index = index
        self.results = None
        self.ids = None


class InvalidInputError(ApiError):
    """400: the request was refused as it is; nothing was changed. Fix the named field."""


class InvalidTopicError(InvalidInputError):
    """400 ``invalid_topic``: a topic is 1 to 200 characters of ``A-Za-z0-9_.:-``."""


class InvalidIdError(InvalidInputError):
    """400 ``invalid_id``: an id is 1 to 200 visible ASCII characters."""


class InvalidDelayError(InvalidInputError):
    """400 ``invalid_delay``: a delay or a time out of range (0 to 10 years ahead)."""


class InvalidTtrError(InvalidInputError):
    """400 ``invalid_ttr``: a lease length out of range (1 s to 24 h)."""


class InvalidReceiptError(InvalidInputError):
    """400 ``invalid_receipt``: a string that is not a receipt this server handed out."""


class InvalidArgumentError(InvalidInputError):
    """400 ``invalid_argument``: a value out of range."""


class InvalidRequestError(InvalidInputError):
    """400 ``invalid_request``: the request could not be read."""


class UnauthorizedError(ApiError):
    """401 ``unauthorized``: a missing or wrong bearer token (``token=``, ``DELAYQ_TOKEN``)."""


class ReadOnlyError(ApiError):
    """403 ``read_only``: the server refuses changes from its read-only dashboard."""


class NotFoundError(ApiError):
    """404 ``not_found``: no such job (never pushed, or acked, deleted or purged since), no
    such schedule, or, for a purge or a resume, no such topic (no jobs, no settings, no
    pause: check the name against :meth:`Client.topics`)."""


class MethodNotAllowedError(ApiError):
    """405 ``method_not_allowed``: the server has this path but not for this method (a
    client newer than the server)."""


class ConflictError(ApiError):
    """409: the job is not in a state that allows the operation; nothing was changed."""


class LeaseLostError(ConflictError):
    """409 ``lease_lost``: the delivery's lease expired or the job moved on (nacked,
    delivered again, acked and kept as done). Do not act on the job any more."""


class WrongStateError(ConflictError):
    """409 ``wrong_state``: the job has no delivery to settle, or is in a state the
    operation does not apply to (reschedule a reserved job, kick one that is not dead)."""


class AlreadyExistsError(ConflictError):
    """409 ``already_exists``: something with this name exists."""


class PartitionsInUseError(ConflictError):
    """409 ``partitions_in_use``: a topic's partition count can change only while the
    topic holds no job; keep its count, or change it once the topic is empty."""


class BodyTooLargeError(ApiError):
    """413 ``body_too_large``: the job body or the request is over the server's limit."""


class ServiceUnavailableError(ApiError, TransientError):
    """503: the server cannot answer now; retry later."""


class UnavailableError(ServiceUnavailableError):
    """503 ``unavailable``: the server's store (Redis, the data directory) is unavailable."""


class EngineFullError(ServiceUnavailableError):
    """503 ``engine_full``: the server's store is full (Redis at its maxmemory, a full
    disk); nothing was written. Retry once space is freed (acks, deletes, purges)."""


class NotReplicatedError(ServiceUnavailableError):
    """503 ``not_replicated``: the write was applied but not acknowledged by enough
    replicas in time; retrying is safe."""


class OverloadedError(ServiceUnavailableError):
    """503 ``overloaded``: the server has too many requests or long-polls open."""


class ServerTimeoutError(ServiceUnavailableError):
    """503 ``timeout``: the request took longer than the server's request timeout."""


class InternalError(ApiError):
    """500 ``internal``: a server bug; the server's log has the details."""


ERRORS: Dict[str, Type[ApiError]] = {
    "invalid_topic": InvalidTopicError,
    "invalid_id": InvalidIdError,
    "invalid_delay": InvalidDelayError,
    "invalid_ttr": InvalidTtrError,
    "invalid_receipt": InvalidReceiptError,
    "invalid_argument": InvalidArgumentError,
    "invalid_request": InvalidRequestError,
    "body_too_large": BodyTooLargeError,
    "unauthorized": UnauthorizedError,
    "read_only": ReadOnlyError,
    "not_found": NotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "lease_lost": LeaseLostError,
    "already_exists": AlreadyExistsError,
    "wrong_state": WrongStateError,
    "partitions_in_use": PartitionsInUseError,
    "unavailable": UnavailableError,
    "engine_full": EngineFullError,
    "not_replicated": NotReplicatedError,
    "timeout": ServerTimeoutError,
    "overloaded": OverloadedError,
    "internal": InternalError,
}
"""The exception of each error code of the API."""

_BY_STATUS: Dict[int, Type[ApiError]] = {
    400: InvalidInputError,
    404: NotFoundError,
    409: ConflictError,
    503: ServiceUnavailableError,
    500: InternalError,
}


def from_detail(detail: wire.ErrorDetail, status: int) -> ApiError:
    """The exception of an error detail (a response's ``error``, or one item's of a batch)."""
    code = detail["code"]
    cls = ERRORS.get(code) or _BY_STATUS.get(status, ApiError)
    return cls(
        detail["message"],
        status=status,
        code=code,
        field=detail.get("field"),
        index=detail.get("index"),
    )


def from_response(status: int, text: str) -> DelayqError:
    """The exception of an error response."""
    try:
        body: wire.ErrorBody = json.loads(text)
        return from_detail(body["error"], status)
    except (ValueError, KeyError, TypeError):
        cls = _BY_STATUS.get(status, ApiError)
        return cls(f"HTTP {status} without a delayq error body: {text[:200]!r}", status=status)


class Permanent(Exception):
    """Raised by a worker's handler: the job cannot succeed, bury it (dead at once, no
    more attempts) with this message as the reason."""


class RetryAfter(Exception):
    """Raised by a worker's handler: retry the job after ``delay`` seconds instead of its
    back-off (still an attempt: after its last one the job is dead)."""

    def __init__(self, delay: float, reason: str = "") -> None:
        super().__init__(reason or f"retry after {delay} s")
        self.delay = delay
