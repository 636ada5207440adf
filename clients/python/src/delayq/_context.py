"""What a worker's handler receives: :class:`JobContext`, the delivery and its cancellation
(the lease was lost, or the worker is shutting down)."""

from __future__ import annotations

import asyncio
import threading
import warnings
from datetime import datetime
from typing import Any, Optional

from ._models import Delivery, Job


class JobContext:
    """One delivery handed to a handler.

    ``cancelled`` becomes true when the handler should stop: its lease was lost
    (``cancel_reason == "lease_lost"``: the job was deleted, or its lease ran out; whatever
    the handler returns is not settled) or the worker's shutdown timeout passed
    (``"shutdown"``: the job is released to another worker). A sync handler (running in a
    thread) can wait on ``cancel_event``; an async one on :meth:`wait_cancelled`.
    """

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.cancel_event = threading.Event()
        """Set when the handler should stop (thread-safe)."""
        self.cancel_reason: Optional[str] = None
        """``"lease_lost"`` or ``"shutdown"`` once cancelled."""
        self._cancelled = asyncio.Event()

    @property
    def job(self) -> Job:
        """The job, as delivered."""
        return self.delivery.job

    @property
    def topic(self) -> str:
        return self.delivery.job.topic

    @property
    def id(self) -> str:
        return self.delivery.job.id

    @property
    def body(self) -> bytes:
        return self.delivery.job.body

    @property
    def text(self) -> str:
        """The body as UTF-8 text."""
        return self.delivery.job.text

    def json(self) -> Any:
        """The body parsed as JSON."""
        return self.delivery.job.json()

    @property
    def attempts(self) -> int:
        """The attempt number of this delivery (1 for the first): the API's ``attempts``,
        the same as ``job.attempts``."""
        return self.delivery.job.attempts

    @property
    def attempt(self) -> int:
        """Deprecated alias of :attr:`attempts` (the API's name, and the :class:`Job`'s),
        kept so that existing handlers run on; warns with a :class:`DeprecationWarning`."""
        warnings.warn(
            "JobContext.attempt is deprecated: use job.attempts",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.delivery.job.attempts

    @property
    def max_attempts(self) -> int:
        return self.delivery.job.max_attempts

    @property
    def deadline(self) -> Optional[datetime]:
        """The lease deadline the delivery came with (the worker renews it)."""
        return self.delivery.job.deadline

    @property
    def cancelled(self) -> bool:
        """True once the handler should stop."""
        return self.cancel_event.is_set()

    async def wait_cancelled(self) -> None:
        """Returns when the handler should stop (from an async handler)."""
        await self._cancelled.wait()

    def _cancel(self, reason: str) -> None:
        """Fires the cancellation (on the worker's event loop)."""
        if self.cancel_event.is_set():
            return
        self.cancel_reason = reason
        self.cancel_event.set()
        self._cancelled.set()
