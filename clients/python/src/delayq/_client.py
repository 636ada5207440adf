"""The producer and admin API: :class:`Client` (blocking) and :class:`AsyncClient`
(asyncio), both over httpx, sending the same calls (``_ops``) with the same arguments.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from datetime import datetime
from types import TracebackType
from typing import (
    Any,
    AsyncIterator,
    Dict,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)
from urllib.parse import quote

import httpx

from . import _ops as ops
from ._errors import (
    ApiError,
    DelayqError,
    ProtocolError,
    RequestTimeoutError,
    ServerUnreachableError,
    TransportError,
    from_response,
)
from ._models import (
    AckResult,
    Backoff,
    Body,
    Job,
    Lease,
    NackResult,
    NewJob,
    Page,
    Pause,
    Reservation,
    Seconds,
    Settlement,
    State,
    Stats,
    TopicConfig,
)
from ._pushed import PushResult
from ._version import __version__
from ._wire import OnConflictDto, OnExpireDto

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:7070"
"""The server when neither ``url`` nor ``DELAYQ_SERVER`` names one."""

DEFAULT_TIMEOUT = 10.0
"""Seconds a request may take (a reserve's long-poll wait comes on top)."""


class _Base:
    """What both clients share: where the server is, how to reach it, and the reading of
    its answers."""

    def __init__(
        self,
        url: Optional[str],
        token: Optional[str],
        timeout: Optional[float],
        ca_cert: Optional[str],
    ) -> None:
        self.url = (url or os.environ.get("DELAYQ_SERVER") or DEFAULT_URL).rstrip("/")
        token = token if token is not None else os.environ.get("DELAYQ_TOKEN")
        self._headers = {"user-agent": f"delayq-python/{__version__}"}
        if token:
            self._headers["authorization"] = f"Bearer {token}"
        self._timeout = timeout
        ca_cert = ca_cert if ca_cert is not None else os.environ.get("DELAYQ_CA_CERT")
        self._verify: Union[ssl.SSLContext, bool] = (
            ssl.create_default_context(cafile=ca_cert) if ca_cert else True
        )

    def _request(self, call: ops.Call[Any]) -> Tuple[str, str, Dict[str, Any]]:
        path = call.route.path.format(**{k: quote(v, safe="") for k, v in call.path.items()})
        timeout = None if self._timeout is None else self._timeout + call.wait
        kwargs: Dict[str, Any] = {"timeout": timeout}
        if call.body is not None:
            kwargs["json"] = call.body
        if call.query is not None:
            kwargs["params"] = call.query
        return call.route.method, self.url + path, kwargs

    def _answer(self, call: ops.Call[T], r: httpx.Response) -> T:
        if r.status_code >= 300:
            error = from_response(r.status_code, r.text)
            if call.read_error is not None and isinstance(error, ApiError):
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    call.read_error(error, r.json())
            raise error
        try:
            return call.read(r.json() if r.content else None)
        except (ValueError, KeyError, TypeError) as e:
            raise ProtocolError(
                f"{call.route.method} {call.route.path} answered {r.status_code} with a body "
                f"this client cannot read ({e!r}): is {self.url} a delayq server of a "
                "compatible version?"
            ) from e

    def _failed(self, e: httpx.HTTPError) -> DelayqError:
        if isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout)):
            return ServerUnreachableError(f"cannot reach the delayq server at {self.url}: {e}")
        if isinstance(e, httpx.TimeoutException):
            return RequestTimeoutError(
                f"the delayq server at {self.url} did not answer within {self._timeout} s: {e}"
            )
        return TransportError(f"the request to the delayq server at {self.url} failed: {e!r}")


def _job(
    body: Body,
    id: Optional[str],
    delay: Optional[Seconds],
    at: Optional[datetime],
    priority: Optional[int],
    ttr: Optional[Seconds],
    max_attempts: Optional[int],
    backoff: Optional[Backoff],
    on_conflict: Optional[OnConflictDto],
    max_wait: Optional[Seconds],
    max_lateness: Optional[Seconds],
    expires_at: Optional[datetime],
    on_expire: Optional[OnExpireDto],
) -> NewJob:
    return NewJob(
        body,
        id=id,
        delay=delay,
        at=at,
        priority=priority,
        ttr=ttr,
        max_attempts=max_attempts,
        backoff=backoff,
        on_conflict=on_conflict,
        max_wait=max_wait,
        max_lateness=max_lateness,
        expires_at=expires_at,
        on_expire=on_expire,
    )


def _topics(topics: Union[str, Sequence[str]]) -> List[str]:
    return [topics] if isinstance(topics, str) else list(topics)


class Client(_Base):
    """A blocking client of a delayq server.

    ``url`` defaults to ``DELAYQ_SERVER`` or ``http://127.0.0.1:7070``; ``token`` (the
    bearer token, default ``DELAYQ_TOKEN``); ``timeout`` in seconds per request (``None``:
    none; a reserve's wait comes on top); ``ca_cert``, a PEM file of the certificate
    authority (or self-signed certificate) of an ``https://`` server (default
    ``DELAYQ_CA_CERT``; the system's authorities otherwise).

    Every method raises a :class:`delayq.DelayqError`: an :class:`delayq.ApiError`
    subclass per error code of the server, :class:`delayq.ServerUnreachableError` or
    :class:`delayq.RequestTimeoutError` when no answer came. Use it as a context manager,
    or call :meth:`close`.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        token: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        ca_cert: Optional[str] = None,
    ) -> None:
        super().__init__(url, token, timeout, ca_cert)
        self._http = httpx.Client(headers=self._headers, verify=self._verify)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections."""
        self._http.close()

    def send(self, call: ops.Call[T]) -> T:
        """Sends one call and reads its answer."""
        method, url, kwargs = self._request(call)
        try:
            r = self._http.request(method, url, **kwargs)
        except httpx.HTTPError as e:
            raise self._failed(e) from e
        return self._answer(call, r)

    def health(self) -> bool:
        """True when the server answers ``/healthz`` (raises when it cannot be reached)."""
        try:
            r = self._http.get(self.url + "/healthz", timeout=self._timeout)
        except httpx.HTTPError as e:
            raise self._failed(e) from e
        return r.status_code == 200

    def push(
        self,
        topic: str,
        body: Body,
        *,
        id: Optional[str] = None,
        delay: Optional[Seconds] = None,
        at: Optional[datetime] = None,
        priority: Optional[int] = None,
        ttr: Optional[Seconds] = None,
        max_attempts: Optional[int] = None,
        backoff: Optional[Backoff] = None,
        on_conflict: Optional[OnConflictDto] = None,
        max_wait: Optional[Seconds] = None,
        max_lateness: Optional[Seconds] = None,
        expires_at: Optional[datetime] = None,
        on_expire: Optional[OnExpireDto] = None,
    ) -> PushResult:
        """Pushes one job to ``topic``, due after ``delay`` (or at ``at``; neither: now).

        ``id`` is also the idempotency key: pushing a live id again changes nothing
        (``created`` is ``False``) unless ``on_conflict`` is ``"replace"`` or ``"debounce"``
        (with ``max_wait``). ``priority`` orders due jobs (lower first); ``ttr`` is the
        lease of each delivery; after ``max_attempts`` deliveries the job is dead; a failed
        attempt is retried after ``backoff``. ``max_lateness`` or ``expires_at`` bound how
        late it may be delivered (then ``on_expire``: ``"dead"`` or ``"drop"``).
        """
        job = _job(
            body,
            id,
            delay,
            at,
            priority,
            ttr,
            max_attempts,
            backoff,
            on_conflict,
            max_wait,
            max_lateness,
            expires_at,
            on_expire,
        )
        return self.send(ops.push(topic, job))

    def push_batch(self, topic: str, jobs: Sequence[NewJob]) -> List[PushResult]:
        """Pushes up to 1000 jobs to ``topic`` in one request, answered in order.

        When some jobs were stored and others not (a Redis Cluster primary holding some of
        the topic's partitions is down), the error raised (a 503) says which in ``results``
        and gives every job's id in ``ids``: push again only the jobs not stored, with their
        ids (see :class:`delayq.ApiError`)."""
        return self.send(ops.push_batch(topic, jobs))

    def get(self, topic: str, id: str) -> Job:
        """The job ``id`` of ``topic``, in any state (:class:`delayq.NotFoundError` if none)."""
        return self.send(ops.get(topic, id))

    def delete(self, topic: str, id: str) -> None:
        """Deletes (cancels) a job in any state; a running handler loses its lease."""
        self.send(ops.delete(topic, id))

    def reschedule(
        self,
        topic: str,
        id: str,
        *,
        delay: Optional[Seconds] = None,
        at: Optional[datetime] = None,
    ) -> datetime:
        """Makes a delayed or ready job due after ``delay`` or at ``at``; answers the new due
        time (:class:`delayq.WrongStateError` for a reserved or dead job)."""
        return self.send(ops.reschedule(topic, id, delay, at))

    def list_jobs(
        self,
        topic: str,
        state: State,
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        prefix: Optional[str] = None,
    ) -> Page:
        """One page of the jobs of ``topic`` in ``state``, in the state's order; pass the
        page's ``next_cursor`` as ``cursor`` for the next. ``prefix`` keeps the jobs whose
        id starts with it (a page may then hold fewer than ``limit`` and still go on)."""
        return self.send(ops.list_jobs(topic, state, limit, cursor, prefix))

    def iter_jobs(
        self, topic: str, state: State, *, limit: Optional[int] = None, prefix: Optional[str] = None
    ) -> Iterator[Job]:
        """Every job of ``topic`` in ``state``, page after page."""
        cursor: Optional[str] = None
        while True:
            page = self.list_jobs(topic, state, limit=limit, cursor=cursor, prefix=prefix)
            yield from page.jobs
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def dead(
        self, topic: str, *, limit: Optional[int] = None, cursor: Optional[str] = None
    ) -> Page:
        """One page of the dead jobs of ``topic`` (the dead-letter list)."""
        return self.list_jobs(topic, "dead", limit=limit, cursor=cursor)

    def kick(self, topic: str, id: str) -> None:
        """Makes a dead job ready again."""
        self.send(ops.kick(topic, id))

    def kick_all(self, topic: str) -> int:
        """Makes every dead job of ``topic`` ready again; answers how many."""
        return self.send(ops.kick_all(topic))

    def archive(self, topic: str, id: str, *, reason: Optional[str] = None) -> None:
        """Sends a delayed or ready job to dead now, without a lease (an operator's bury)."""
        self.send(ops.archive(topic, id, reason))

    def purge(self, topic: str) -> int:
        """Removes every job of ``topic`` (its settings and pause stay); answers how many.
        :class:`NotFoundError` for a topic with no jobs, no settings and no pause (a typo)."""
        return self.send(ops.purge(topic))

    def pause(
        self, topic: str, *, duration: Optional[Seconds] = None, until: Optional[datetime] = None
    ) -> Pause:
        """Stops handing out the jobs of ``topic`` (for every server) for ``duration``, until
        ``until``, or (neither) until :meth:`resume`; its jobs still fall due meanwhile. A
        topic with no jobs yet may be paused ahead of its first push; it is then listed by
        :meth:`topics`, paused."""
        return self.send(ops.pause(topic, duration, until))

    def resume(self, topic: str) -> None:
        """Ends a pause of ``topic``. :class:`NotFoundError` for a topic with no jobs, no
        settings and no pause (a typo)."""
        self.send(ops.resume(topic))

    def stats(self, topic: str) -> Stats:
        """The counts per state of ``topic`` and its health."""
        return self.send(ops.stats(topic))

    def topics(self) -> List[Stats]:
        """Every topic with its stats, sorted by name."""
        return self.send(ops.topics())

    def topic_config(self, topic: str) -> TopicConfig:
        """The settings of ``topic``."""
        return self.send(ops.topic_config(topic))

    def set_topic_config(self, topic: str, config: TopicConfig) -> TopicConfig:
        """Replaces the settings of ``topic`` whole; answers those now in force."""
        return self.send(ops.set_topic_config(topic, config))

    def reserve(
        self,
        topics: Union[str, Sequence[str]],
        *,
        max: int = 1,
        wait: Seconds = 0,
        settle: Sequence[Settlement] = (),
        at_most_once: bool = False,
    ) -> Reservation:
        """Settles ``settle`` first, then takes up to ``max`` due jobs of ``topics``, waiting
        up to ``wait`` for a first one (a long-poll, cut to the server's limit). Each
        delivery is leased until acked, nacked, buried or released, or until its ttr passes.
        ``max=0`` only settles. ``at_most_once`` removes the jobs as it hands them out."""
        return self.send(ops.reserve(_topics(topics), max, wait, settle, at_most_once))

    def ack(self, lease: Union[Lease, str]) -> None:
        """The delivery is done: the job is removed (or kept as done). ``lease`` is the
        delivery, a :class:`delayq.LeaseRef` or a receipt.
        :class:`delayq.LeaseLostError` when the lease was lost."""
        if isinstance(lease, str):
            (result,) = self.ack_many([lease])
            if result.error is not None:
                raise result.error
            return
        self.send(ops.ack(lease))

    def ack_many(self, leases: Sequence[Union[Lease, str]]) -> List[AckResult]:
        """Acks up to 1000 deliveries (all by receipt, or all by lease) in one request; each
        is answered, in order, and one that failed fails nothing else."""
        return self.send(ops.ack_many(leases))

    def nack(
        self, lease: Lease, *, delay: Optional[Seconds] = None, reason: Optional[str] = None
    ) -> NackResult:
        """The attempt failed: retry after ``delay`` (default: the job's back-off), or dead
        when it was the last attempt."""
        return self.send(ops.nack(lease, delay, reason))

    def touch(self, lease: Lease, *, ttr: Optional[Seconds] = None) -> datetime:
        """Extends the lease by ``ttr`` from now (default the job's ttr); answers the new
        deadline."""
        return self.send(ops.touch(lease, ttr))

    def bury(self, lease: Lease, *, reason: Optional[str] = None) -> None:
        """Sends the job to dead now (no more attempts)."""
        self.send(ops.bury(lease, reason))

    def release(self, lease: Lease) -> None:
        """Gives the job back at once, the attempt not counted."""
        self.send(ops.release(lease))


class AsyncClient(_Base):
    """The asyncio twin of :class:`Client`: the same constructor and methods, each a
    coroutine (``iter_jobs`` an async iterator). Use it as an async context manager, or
    ``await client.close()``."""

    def __init__(
        self,
        url: Optional[str] = None,
        *,
        token: Optional[str] = None,
        timeout: Optional[float] = DEFAULT_TIMEOUT,
        ca_cert: Optional[str] = None,
    ) -> None:
        super().__init__(url, token, timeout, ca_cert)
        self._http = httpx.AsyncClient(headers=self._headers, verify=self._verify)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connections."""
        await self._http.aclose()

    async def send(self, call: ops.Call[T]) -> T:
        """Sends one call and reads its answer."""
        method, url, kwargs = self._request(call)
        try:
            r = await self._http.request(method, url, **kwargs)
        except httpx.HTTPError as e:
            raise self._failed(e) from e
        return self._answer(call, r)

    async def health(self) -> bool:
        """As :meth:`Client.health`."""
        try:
            r = await self._http.get(self.url + "/healthz", timeout=self._timeout)
        except httpx.HTTPError as e:
            raise self._failed(e) from e
        return r.status_code == 200

    async def push(
        self,
        topic: str,
        body: Body,
        *,
        id: Optional[str] = None,
        delay: Optional[Seconds] = None,
        at: Optional[datetime] = None,
        priority: Optional[int] = None,
        ttr: Optional[Seconds] = None,
        max_attempts: Optional[int] = None,
        backoff: Optional[Backoff] = None,
        on_conflict: Optional[OnConflictDto] = None,
        max_wait: Optional[Seconds] = None,
        max_lateness: Optional[Seconds] = None,
        expires_at: Optional[datetime] = None,
        on_expire: Optional[OnExpireDto] = None,
    ) -> PushResult:
        """As :meth:`Client.push`."""
        job = _job(
            body,
            id,
            delay,
            at,
            priority,
            ttr,
            max_attempts,
            backoff,
            on_conflict,
            max_wait,
            max_lateness,
            expires_at,
            on_expire,
        )
        return await self.send(ops.push(topic, job))

    async def push_batch(self, topic: str, jobs: Sequence[NewJob]) -> List[PushResult]:
        """As :meth:`Client.push_batch`."""
        return await self.send(ops.push_batch(topic, jobs))

    async def get(self, topic: str, id: str) -> Job:
        """As :meth:`Client.get`."""
        return await self.send(ops.get(topic, id))

    async def delete(self, topic: str, id: str) -> None:
        """As :meth:`Client.delete`."""
        await self.send(ops.delete(topic, id))

    async def reschedule(
        self,
        topic: str,
        id: str,
        *,
        delay: Optional[Seconds] = None,
        at: Optional[datetime] = None,
    ) -> datetime:
        """As :meth:`Client.reschedule`."""
        return await self.send(ops.reschedule(topic, id, delay, at))

    async def list_jobs(
        self,
        topic: str,
        state: State,
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        prefix: Optional[str] = None,
    ) -> Page:
        """As :meth:`Client.list_jobs`."""
        return await self.send(ops.list_jobs(topic, state, limit, cursor, prefix))

    async def iter_jobs(
        self, topic: str, state: State, *, limit: Optional[int] = None, prefix: Optional[str] = None
    ) -> AsyncIterator[Job]:
        """As :meth:`Client.iter_jobs`."""
        cursor: Optional[str] = None
        while True:
            page = await self.list_jobs(topic, state, limit=limit, cursor=cursor, prefix=prefix)
            for job in page.jobs:
                yield job
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def dead(
        self, topic: str, *, limit: Optional[int] = None, cursor: Optional[str] = None
    ) -> Page:
        """As :meth:`Client.dead`."""
        return await self.list_jobs(topic, "dead", limit=limit, cursor=cursor)

    async def kick(self, topic: str, id: str) -> None:
        """As :meth:`Client.kick`."""
        await self.send(ops.kick(topic, id))

    async def kick_all(self, topic: str) -> int:
        """As :meth:`Client.kick_all`."""
        return await self.send(ops.kick_all(topic))

    async def archive(self, topic: str, id: str, *, reason: Optional[str] = None) -> None:
        """As :meth:`Client.archive`."""
        await self.send(ops.archive(topic, id, reason))

    async def purge(self, topic: str) -> int:
        """As :meth:`Client.purge`."""
        return await self.send(ops.purge(topic))

    async def pause(
        self, topic: str, *, duration: Optional[Seconds] = None, until: Optional[datetime] = None
    ) -> Pause:
        """As :meth:`Client.pause`."""
        return await self.send(ops.pause(topic, duration, until))

    async def resume(self, topic: str) -> None:
        """As :meth:`Client.resume`."""
        await self.send(ops.resume(topic))

    async def stats(self, topic: str) -> Stats:
        """As :meth:`Client.stats`."""
        return await self.send(ops.stats(topic))

    async def topics(self) -> List[Stats]:
        """As :meth:`Client.topics`."""
        return await self.send(ops.topics())

    async def topic_config(self, topic: str) -> TopicConfig:
        """As :meth:`Client.topic_config`."""
        return await self.send(ops.topic_config(topic))

    async def set_topic_config(self, topic: str, config: TopicConfig) -> TopicConfig:
        """As :meth:`Client.set_topic_config`."""
        return await self.send(ops.set_topic_config(topic, config))

    async def reserve(
        self,
        topics: Union[str, Sequence[str]],
        *,
        max: int = 1,
        wait: Seconds = 0,
        settle: Sequence[Settlement] = (),
        at_most_once: bool = False,
    ) -> Reservation:
        """As :meth:`Client.reserve`."""
        return await self.send(ops.reserve(_topics(topics), max, wait, settle, at_most_once))

    async def ack(self, lease: Union[Lease, str]) -> None:
        """As :meth:`Client.ack`."""
        if isinstance(lease, str):
            (result,) = await self.ack_many([lease])
            if result.error is not None:
                raise result.error
            return
        await self.send(ops.ack(lease))

    async def ack_many(self, leases: Sequence[Union[Lease, str]]) -> List[AckResult]:
        """As :meth:`Client.ack_many`."""
        return await self.send(ops.ack_many(leases))

    async def nack(
        self, lease: Lease, *, delay: Optional[Seconds] = None, reason: Optional[str] = None
    ) -> NackResult:
        """As :meth:`Client.nack`."""
        return await self.send(ops.nack(lease, delay, reason))

    async def touch(self, lease: Lease, *, ttr: Optional[Seconds] = None) -> datetime:
        """As :meth:`Client.touch`."""
        return await self.send(ops.touch(lease, ttr))

    async def bury(self, lease: Lease, *, reason: Optional[str] = None) -> None:
        """As :meth:`Client.bury`."""
        await self.send(ops.bury(lease, reason))

    async def release(self, lease: Lease) -> None:
        """As :meth:`Client.release`."""
        await self.send(ops.release(lease))
