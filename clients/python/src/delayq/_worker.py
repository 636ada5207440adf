"""The worker: runs a handler for the jobs of some topics, on asyncio.

One fetch loop does every call to the server, in the shape of the Rust worker's:

- a **cycle** reserves a batch and carries the settlements (ack, nack, bury, release) of
  the jobs finished since the last call, one request for both (settle-in-reserve);
- a **long-poll** (the configured ``wait``, no settlements) when the last reserve found
  nothing, beside which a **flush** (``max: 0``, settle only) sends what finishes meanwhile,
  so no settlement waits for a whole long-poll;
- a **second cycle** goes ahead of the first when the window has room for both, so that
  the server works on one while the worker handles the other;
- the worker holds at most ``concurrency + prefetch`` leased jobs (running or buffered),
  fewer when its handlers are slow or the queue runs short (``_window``), and does not
  reserve while the window is full;
- a running handler's lease is touched at half of it (extended by the job's ttr) until it
  ends; a lost lease fires the handler's cancellation, and its result is not settled; a
  buffered job whose lease ran down to half is touched before its handler starts, or given
  back while every handler is busy;
- errors of the server or the network pause the loop with a capped, jittered back-off, and
  the settlements they held are sent again while their leases last.

Shutdown (:meth:`Worker.stop`, SIGINT or SIGTERM under :meth:`Worker.run`): no more
reserves, an open long-poll is abandoned, buffered jobs are released at once; running
handlers get ``shutdown_timeout`` to finish (then settled), then their cancellation fires,
and after a short moment what still runs is released.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import random
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Deque, Dict, List, Optional, Sequence, Union

from ._client import AsyncClient
from ._context import JobContext
from ._errors import (
    ApiError,
    DelayqError,
    LeaseLostError,
    NotFoundError,
    Permanent,
    RetryAfter,
    TransientError,
    WrongStateError,
)
from ._models import Delivery, Outcome, Reservation, Settled, Settlement
from ._window import Window

log = logging.getLogger("delayq.worker")

Handler = Callable[[JobContext], Union[Awaitable[None], None]]
"""A handler: a function or a coroutine function of a :class:`JobContext`. Returning acks
the job; raising :class:`delayq.Permanent` buries it; raising :class:`delayq.RetryAfter`
retries it after its delay; any other exception retries it with the job's back-off (dead
after its last attempt)."""

RESERVE_BATCH = 256
"""The most jobs one reserve asks for."""

MAX_SETTLE = 1000
"""The most settlements one reserve carries (the server's limit)."""

LINGER = 0.005
"""The longest a settlement waits for company (a reserve to ride with) before it is sent."""

RENEW_AT = 0.5
"""A lease is renewed when this share of it has passed; a buffered job starts only with at
least this share of its lease left."""

CANCEL_WAIT = 1.0
"""How long a handler gets to return once its cancellation fired at shutdown, before its
job is released anyway."""

RETRY_INITIAL = 0.1
"""The first pause after a failed call, in seconds; it doubles up to ``retry_max``."""

# The errors that say a delivery is over: its result must not be settled.
_LEASE_GONE = (LeaseLostError, NotFoundError, WrongStateError)


@dataclass
class Report:
    """What a worker did: settlements the server confirmed, and deliveries that ended
    without one."""

    acked: int = 0
    retried: int = 0
    """Nacked and due again later."""
    dead: int = 0
    """Nacked on their last attempt."""
    buried: int = 0
    released: int = 0
    lost: int = 0
    """Deliveries whose lease was lost (not settled), or whose settlement the server refused."""
    unsettled: int = 0
    """Settlements that could not be sent before their lease ran out."""


@dataclass
class _Held:
    """A leased job in the worker: buffered, or running."""

    delivery: Delivery
    lease_end: float
    """The local, early estimate of when the lease ends (monotonic seconds)."""
    ctx: Optional[JobContext] = None
    task: Optional[asyncio.Task[None]] = None
    renew_timer: Optional[asyncio.TimerHandle] = None
    started: float = 0.0
    lost: bool = False
    settled: bool = False
    """Its outcome was decided (by its end, or by shutdown): later news is ignored."""

    @property
    def ttr(self) -> float:
        return self.delivery.job.ttr.total_seconds()

    def low(self, now: float) -> bool:
        """Less than ``RENEW_AT`` of its lease is left."""
        return self.lease_end - now <= self.ttr * RENEW_AT


@dataclass
class _Out:
    """A settlement waiting to be sent, and what its confirmation counts as."""

    settlement: Settlement
    until: float


@dataclass
class _Call:
    kind: str
    """``"cycle"``, ``"poll"`` or ``"flush"``."""
    task: asyncio.Task[Reservation]
    outs: List[_Out]
    asked: int
    sent: float
    wait: float


@dataclass
class _Loop:
    """The fetch loop's state."""

    buffer: Deque[_Held] = field(default_factory=collections.deque)
    running: Dict[int, _Held] = field(default_factory=dict)
    outbox: List[_Out] = field(default_factory=list)
    outbox_since: Optional[float] = None
    window: Window = field(default_factory=lambda: Window(1, 0))
    main: Optional[_Call] = None
    """The call that may reserve, or a flush when none is due."""
    ahead: Optional[_Call] = None
    """A second cycle, sent while the main one is on its way."""
    side: Optional[_Call] = None
    """A flush beside an open long-poll."""
    asked_out: int = 0
    """Jobs asked for by the calls on their way: they count against the window."""
    idle: bool = True
    pause: float = RETRY_INITIAL
    resume_at: float = 0.0


class Worker:
    """Runs ``handler`` for the jobs of ``topics``, up to ``concurrency`` at once.

    ``client`` is the :class:`delayq.AsyncClient` to use (else one is made from ``url``,
    ``token`` and ``ca_cert``, as :class:`delayq.Client` takes them, and closed at the end).
    ``prefetch`` is how many jobs it may hold beyond the running ones: by default it adapts,
    up to 100 (about 100 ms of work at the handlers' speed: none while they are slow or the
    queue runs short); a number holds that many whenever the queue has them; ``wait`` how long
    an idle long-poll waits (seconds); ``shutdown_timeout`` how long shutdown waits for
    running handlers; ``retry_max`` the
    longest pause between attempts while the server cannot be reached.

    A sync handler runs in a thread of the worker's pool (``concurrency`` threads); an async
    one on the event loop.

    >>> async def handle(job: JobContext) -> None:
    ...     print("cancel order", job.text)
    >>> worker = Worker(["orders"], handle, concurrency=10)
    >>> # asyncio.run(worker.run())   # until SIGINT or SIGTERM
    """

    def __init__(
        self,
        topics: Union[str, Sequence[str]],
        handler: Handler,
        *,
        concurrency: int = 10,
        prefetch: Optional[int] = None,
        wait: float = 30.0,
        shutdown_timeout: float = 20.0,
        retry_max: float = 5.0,
        client: Optional[AsyncClient] = None,
        url: Optional[str] = None,
        token: Optional[str] = None,
        ca_cert: Optional[str] = None,
    ) -> None:
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        if not self.topics:
            raise ValueError("a worker needs at least one topic")
        if concurrency < 1:
            raise ValueError(f"concurrency {concurrency} must be at least 1")
        self.prefetch = 100 if prefetch is None else prefetch
        if self.prefetch < 0:
            raise ValueError(f"prefetch {prefetch} must be 0 or more")
        if wait <= 0 or shutdown_timeout < 0 or retry_max < RETRY_INITIAL:
            raise ValueError(
                "wait must be positive, shutdown_timeout 0 or more, retry_max at least 0.1 s"
            )
        self.concurrency = concurrency
        self.wait = wait
        self.shutdown_timeout = shutdown_timeout
        self.retry_max = retry_max
        self.report = Report()
        """What the worker did so far."""
        self._handler = handler
        self._is_async = inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
            type(handler).__call__
        )
        self._owns_client = client is None
        self._client = client or AsyncClient(url, token=token, ca_cert=ca_cert)
        self._executor: Optional[ThreadPoolExecutor] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._wake: Optional[asyncio.Event] = None
        self._stopping = False
        self._hard_stop_at: Optional[float] = None
        self._handlers_cancelled = False
        self._done: Optional[asyncio.Future[Report]] = None
        self._state = _Loop(window=Window(concurrency, self.prefetch, adaptive=prefetch is None))

    # ----- public -----

    async def run(self, *, install_signal_handlers: bool = True) -> Report:
        """Runs until :meth:`stop` (or SIGINT / SIGTERM, when ``install_signal_handlers``: a
        second signal skips the wait for running handlers); answers the :class:`Report`."""
        loop = asyncio.get_running_loop()
        if self._loop is not None:
            raise RuntimeError("a Worker runs once; make a new one")
        self._loop = loop
        self._wake = asyncio.Event()
        self._done = loop.create_future()
        if not self._is_async:
            self._executor = ThreadPoolExecutor(
                self.concurrency, thread_name_prefix="delayq-handler"
            )
        signals = (signal.SIGINT, signal.SIGTERM) if install_signal_handlers else ()
        for sig in signals:
            loop.add_signal_handler(sig, self.stop)
        log.info("worker started: topics %s, concurrency %d", self.topics, self.concurrency)
        try:
            await self._fetch_loop()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
            if self._executor is not None:
                self._executor.shutdown(wait=False)
            if self._owns_client:
                await self._client.close()
            if not self._done.done():
                self._done.set_result(self.report)
        log.info("worker stopped: %s", self.report)
        return self.report

    def stop(self) -> None:
        """Starts the shutdown and returns at once (thread-safe). A second call skips the
        wait for running handlers."""
        loop = self._loop
        if loop is None:
            self._stopping = True
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._begin_stop()
        else:
            loop.call_soon_threadsafe(self._begin_stop)

    async def close(self) -> Report:
        """Stops the worker and waits until :meth:`run` is over."""
        self.stop()
        if self._done is None:
            return self.report
        return await asyncio.shield(self._done)

    # ----- the fetch loop -----

    def _wakeup(self, *_: object) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _fetch_loop(self) -> None:
        assert self._loop is not None and self._wake is not None
        s = self._state
        loop = self._loop
        while True:
            self._wake.clear()
            now = time.monotonic()
            self._reap(s)
            if not self._stopping:
                self._dispatch(s, now)
                self._give_back_low(s, now)
            elif self._hard_stop_at is not None and now >= self._hard_stop_at:
                self._hard_stop(s, now)
            if now >= s.resume_at:
                self._start_calls(s, now)
            if self._stopping and not (
                s.main or s.ahead or s.side or s.running or s.outbox or s.buffer
            ):
                return
            at = self._next_timer(s, now)
            timer = loop.call_at(loop.time() + max(0.0, at - now), self._wakeup) if at else None
            await self._wake.wait()
            if timer is not None:
                timer.cancel()

    def _next_timer(self, s: _Loop, now: float) -> Optional[float]:
        times = []
        can_flush = s.main is None or (s.main.kind == "poll" and s.side is None)
        if s.resume_at > now:
            times.append(s.resume_at)
        elif s.outbox_since is not None and can_flush:
            times.append(max(s.outbox_since + LINGER, now))
        if s.buffer and not self._stopping:
            low = min(h.lease_end - h.ttr * RENEW_AT for h in s.buffer)
            times.append(max(low, now + 0.001))
        if self._hard_stop_at is not None:
            times.append(self._hard_stop_at)
        return min(times) if times else None

    def _held(self, s: _Loop) -> int:
        return len(s.buffer) + len(s.running)

    def _flush_due(self, s: _Loop, now: float) -> bool:
        if not s.outbox:
            return False
        if self._stopping or len(s.outbox) >= RESERVE_BATCH:
            return True
        return s.outbox_since is not None and now >= s.outbox_since + LINGER

    def _start_calls(self, s: _Loop, now: float) -> None:
        flush_due = self._flush_due(s, now)
        refill = max(1, min(s.window.size // 2, RESERVE_BATCH))
        held = self._held(s) + s.asked_out
        if s.main is None:
            # After an empty reserve nothing more reserves until the cycle ahead is back.
            stay = self._stopping or (s.idle and s.ahead is not None)
            need = 0 if stay else min(s.window.need(held), RESERVE_BATCH)
            # A long-poll carries no settlements: those waiting count as held meanwhile.
            poll_need = min(s.window.need(held + len(s.outbox)), RESERVE_BATCH) if need else 0
            if s.idle and poll_need > 0:
                s.main = self._call(s, "poll", [], poll_need, self.wait)
            elif need > 0 and (not s.buffer or need >= refill or flush_due):
                s.main = self._call(s, "cycle", self._take_outbox(s), need, 0.0)
            elif flush_due:
                s.main = self._call(s, "flush", self._take_outbox(s), 0, 0.0)
                return
        cycling = s.main is not None and s.main.kind == "cycle"
        if cycling and not (self._stopping or s.idle) and s.ahead is None:
            need = min(s.window.need(self._held(s) + s.asked_out), RESERVE_BATCH)
            if need >= refill:
                s.ahead = self._call(s, "cycle", self._take_outbox(s), need, 0.0)
        polling = s.main is not None and s.main.kind == "poll"
        if polling and s.side is None and self._flush_due(s, now):
            s.side = self._call(s, "flush", self._take_outbox(s), 0, 0.0)

    def _take_outbox(self, s: _Loop) -> List[_Out]:
        outs, s.outbox = s.outbox[:MAX_SETTLE], s.outbox[MAX_SETTLE:]
        s.outbox_since = time.monotonic() if s.outbox else None
        return outs

    def _call(self, s: _Loop, kind: str, outs: List[_Out], asked: int, wait: float) -> _Call:
        assert self._loop is not None
        s.asked_out += asked
        coro = self._client.reserve(
            self.topics, max=asked, wait=wait, settle=[o.settlement for o in outs]
        )
        task = self._loop.create_task(coro)
        task.add_done_callback(self._wakeup)
        return _Call(kind, task, outs, asked, time.monotonic(), wait)

    def _reap(self, s: _Loop) -> None:
        """Takes in the calls that came back."""
        if s.main is not None and s.main.task.done():
            call, s.main = s.main, None
            self._finish(s, call)
        if s.ahead is not None and s.ahead.task.done():
            call, s.ahead = s.ahead, None
            self._finish(s, call)
        if s.side is not None and s.side.task.done():
            call, s.side = s.side, None
            self._finish(s, call)

    def _finish(self, s: _Loop, call: _Call) -> None:
        now = time.monotonic()
        s.asked_out -= call.asked
        if call.task.cancelled():
            self._put_back(s, call.outs, now)
            return
        error = call.task.exception()
        if error is not None:
            self._failed(s, call, error, now)
            return
        s.pause = RETRY_INITIAL
        r = call.task.result()
        for out, settled in zip(call.outs, r.settled):
            self._answered(out, settled)
        for out in call.outs[len(r.settled) :]:
            log.error("the server answered %d of %d settlements", len(r.settled), len(call.outs))
            self._answered(out, Settled(ok=False))
        if call.asked == 0:
            return
        s.idle = not r.deliveries
        s.window.reserved(call.asked, len(r.deliveries))
        if s.idle and call.kind == "poll" and now - call.sent < r.wait * 0.9:
            # An empty long-poll answered early (a server shutting down): do not spin.
            s.resume_at = now + RETRY_INITIAL
        for d in r.deliveries:
            start = call.sent
            if call.wait > 0:
                ttr = d.job.ttr.total_seconds()
                start = max(call.sent, now - min(max(ttr / 50, 0.005), 1.0))
            held = _Held(d, lease_end=start + d.job.ttr.total_seconds())
            if self._stopping:
                self._release(s, held, now)
            else:
                s.buffer.append(held)

    def _failed(self, s: _Loop, call: _Call, error: BaseException, now: float) -> None:
        pause = s.pause * random.uniform(0.5, 1.0)
        s.pause = min(s.pause * 2, self.retry_max)
        s.resume_at = now + pause
        if isinstance(error, TransientError):
            log.warning("cannot reach the delayq server (%s): retrying in %.2f s", error, pause)
        else:
            log.error(
                "the delayq server refused the worker's call (%s): retrying in %.2f s", error, pause
            )
        self._put_back(s, call.outs, now + pause)

    def _put_back(self, s: _Loop, outs: List[_Out], retry_at: float) -> None:
        """Settlements of a call that failed go out again while their leases last."""
        keep = [o for o in outs if o.until > retry_at]
        for o in outs:
            if o.until <= retry_at:
                self.report.unsettled += 1
                log.warning(
                    "could not send the %s of a job before its lease ran out; it comes back",
                    o.settlement.outcome,
                )
        if keep:
            s.outbox[:0] = keep
            s.outbox_since = min(s.outbox_since or retry_at, retry_at) - LINGER

    def _answered(self, out: _Out, settled: Settled) -> None:
        r = self.report
        outcome = out.settlement.outcome
        if not settled.ok:
            r.lost += 1
            log.warning("the server refused the %s of a job: %s", outcome, settled.error)
        elif outcome == "ack":
            r.acked += 1
        elif outcome == "nack" and settled.outcome == "dead":
            r.dead += 1
        elif outcome == "nack":
            r.retried += 1
        elif outcome == "bury":
            r.buried += 1
        else:
            r.released += 1

    def _settle(
        self,
        s: _Loop,
        held: _Held,
        outcome: Outcome,
        delay: Optional[float] = None,
        reason: Optional[str] = None,
    ) -> None:
        held.settled = True
        if s.outbox_since is None:
            s.outbox_since = time.monotonic()
        settlement = Settlement(held.delivery, outcome, delay=delay, reason=reason)
        s.outbox.append(_Out(settlement, held.lease_end))
        self._wakeup()

    def _release(self, s: _Loop, held: _Held, now: float) -> None:
        if held.lease_end > now:
            self._settle(s, held, "release")

    # ----- buffered jobs -----

    def _dispatch(self, s: _Loop, now: float) -> None:
        while s.buffer and len(s.running) < self.concurrency:
            held = s.buffer.popleft()
            if held.lease_end <= now:
                log.warning("a buffered job's lease ended before a handler was free: it comes back")
                continue
            self._start(s, held, renew_first=held.low(now))

    def _give_back_low(self, s: _Loop, now: float) -> None:
        """Buffered jobs whose lease ran down to half while every handler was busy go back."""
        if not s.buffer or len(s.running) < self.concurrency:
            return
        keep: Deque[_Held] = collections.deque()
        for held in s.buffer:
            if held.low(now):
                log.info("a buffered job waited too long for a handler: giving it back")
                self._release(s, held, now)
            else:
                keep.append(held)
        s.buffer = keep

    # ----- running handlers -----

    def _start(self, s: _Loop, held: _Held, renew_first: bool) -> None:
        assert self._loop is not None
        held.ctx = JobContext(held.delivery)
        held.started = time.monotonic()
        task = self._loop.create_task(self._run_handler(held, renew_first))
        held.task = task
        s.running[id(held)] = held
        task.add_done_callback(lambda t: self._handler_done(s, held, t))
        if not renew_first:
            self._schedule_renewal(held)

    async def _run_handler(self, held: _Held, renew_first: bool) -> None:
        assert held.ctx is not None
        if renew_first and not await self._touch(held):
            return
        if self._is_async:
            result = self._handler(held.ctx)
            if inspect.isawaitable(result):
                await result
        else:
            assert self._loop is not None
            await self._loop.run_in_executor(self._executor, self._handler, held.ctx)

    def _handler_done(self, s: _Loop, held: _Held, task: asyncio.Task[None]) -> None:
        s.running.pop(id(held), None)
        s.window.observe(time.monotonic() - held.started)
        if held.renew_timer is not None:
            held.renew_timer.cancel()
        self._wakeup()
        if held.settled:
            return
        if held.lost:
            held.settled = True
            self.report.lost += 1
            log.warning(
                "job %s/%s: its lease was lost: not settled",
                held.delivery.job.topic,
                held.delivery.job.id,
            )
            return
        if task.cancelled():
            self._release(s, held, time.monotonic())
            return
        error = task.exception()
        if error is None:
            self._settle(s, held, "ack")
        elif held.ctx is not None and held.ctx.cancel_reason == "shutdown":
            # A failure now is most likely the cancellation itself: not an attempt.
            self._release(s, held, time.monotonic())
        elif isinstance(error, Permanent):
            self._settle(s, held, "bury", reason=_reason(error))
        elif isinstance(error, RetryAfter):
            self._settle(s, held, "nack", delay=error.delay, reason=_reason(error))
        else:
            job = held.delivery.job
            log.warning(
                "job %s/%s failed on attempt %d of %d: %r",
                job.topic,
                job.id,
                job.attempts,
                job.max_attempts,
                error,
            )
            self._settle(s, held, "nack", reason=_reason(error))

    def _schedule_renewal(self, held: _Held) -> None:
        assert self._loop is not None
        at = held.lease_end - held.ttr * (1 - RENEW_AT)
        delay = max(0.0, at - time.monotonic())
        held.renew_timer = self._loop.call_later(delay, self._renew, held)

    def _renew(self, held: _Held) -> None:
        assert self._loop is not None
        held.renew_timer = None
        if held.settled or held.lost:
            return

        async def renew() -> None:
            if await self._touch(held):
                self._schedule_renewal(held)

        self._loop.create_task(renew())

    async def _touch(self, held: _Held) -> bool:
        """Extends the lease by the job's ttr, retrying transient errors while it lasts;
        answers False (and fires the cancellation) when the lease is lost."""
        pause = RETRY_INITIAL
        while not held.settled:
            sent = time.monotonic()
            left = held.lease_end - sent
            if left <= 0:
                break
            try:
                await asyncio.wait_for(self._client.touch(held.delivery), timeout=left)
                held.lease_end = sent + held.ttr
                return True
            except _LEASE_GONE as e:
                log.warning(
                    "job %s: lease lost (%s): cancelling its handler", held.delivery.job.id, e.code
                )
                break
            except (DelayqError, asyncio.TimeoutError) as e:
                log.warning(
                    "cannot renew the lease of job %s (%r): retrying", held.delivery.job.id, e
                )
                await asyncio.sleep(min(pause, max(0.0, held.lease_end - time.monotonic())))
                pause = min(pause * 2, held.ttr * RENEW_AT)
        held.lost = True
        if held.ctx is not None:
            held.ctx._cancel("lease_lost")
        return False

    # ----- shutdown -----

    def _begin_stop(self) -> None:
        s = self._state
        now = time.monotonic()
        if self._stopping:
            log.info("second stop: not waiting for running handlers")
            self._hard_stop_at = now
            self._wakeup()
            return
        self._stopping = True
        self._hard_stop_at = now + self.shutdown_timeout
        log.info(
            "stopping: %d buffered jobs released, %d running handlers get %.1f s",
            len(s.buffer),
            len(s.running),
            self.shutdown_timeout,
        )
        if s.main is not None and s.main.kind == "poll":
            s.main.task.cancel()  # an open long-poll is abandoned: it carries no settlements
            s.asked_out -= s.main.asked
            s.main = None
        while s.buffer:
            self._release(s, s.buffer.popleft(), now)
        self._wakeup()

    def _hard_stop(self, s: _Loop, now: float) -> None:
        """The shutdown timeout passed: cancel the handlers, then release their jobs."""
        if not self._handlers_cancelled and s.running:
            self._handlers_cancelled = True
            log.warning("shutdown timeout: cancelling %d running handlers", len(s.running))
            for held in s.running.values():
                if held.ctx is not None:
                    held.ctx._cancel("shutdown")
            self._hard_stop_at = now + CANCEL_WAIT
            return
        self._hard_stop_at = None
        for held in list(s.running.values()):
            s.running.pop(id(held), None)
            if held.renew_timer is not None:
                held.renew_timer.cancel()
            if not held.settled and not held.lost:
                self._release(s, held, now)
                held.settled = True
            if held.task is not None:
                held.task.cancel()


def _reason(error: BaseException) -> str:
    """A failure's reason for the server (at most 4 KiB)."""
    name, text = type(error).__name__, str(error)
    if not text:
        text = name
    elif not isinstance(error, (Permanent, RetryAfter, ApiError)):
        text = f"{name}: {text}"
    return text.encode("utf-8")[:4000].decode("utf-8", "ignore")
