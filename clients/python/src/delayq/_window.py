"""The worker's window: how many leased jobs it may hold (running and buffered), and so how
many the next reserve asks for; the Rust worker's rule.

It starts at the concurrency and aims at the work of the next :data:`HORIZON` at the
handlers' observed speed, never below the concurrency (every handler can have a job) and
never above ``concurrency + prefetch``. It doubles (up to that aim) each time a reserve
comes back full, and falls to what came back when one comes back short: a worker on a short
queue asks only for what it can run and leaves the rest to other workers; slow handlers keep
it at the concurrency. A fixed window (a prefetch the user chose) is always the most.
"""

from __future__ import annotations

import math
from typing import Optional

HORIZON = 0.1
"""Seconds of work the window aims to hold."""

WEIGHT = 0.1
"""The weight of the newest handler duration in the running average."""


class Window:
    """The window of one worker."""

    def __init__(self, concurrency: int, prefetch: int, adaptive: bool = True) -> None:
        self.concurrency = concurrency
        self.most = concurrency + prefetch
        self.adaptive = adaptive
        self.size = concurrency if adaptive else self.most
        self._handler_secs: Optional[float] = None

    def need(self, held: int) -> int:
        """How many more jobs to ask for while ``held`` are held."""
        return max(0, self.size - held)

    def _aim(self) -> int:
        if self._handler_secs is None:
            return self.concurrency
        jobs = self.concurrency * HORIZON / max(self._handler_secs, 1e-9)
        if jobs >= self.most:
            return self.most
        return min(max(math.ceil(jobs), self.concurrency), self.most)

    def observe(self, seconds: float) -> None:
        """A handler ran for ``seconds``: comes down at once when handlers got slower."""
        if not self.adaptive:
            return
        avg = self._handler_secs
        self._handler_secs = seconds if avg is None else avg + WEIGHT * (seconds - avg)
        self.size = min(self.size, self._aim())

    def reserved(self, asked: int, got: int) -> None:
        """A reserve asked for ``asked`` jobs and got ``got``."""
        if asked == 0 or not self.adaptive:
            return
        size = self.size * 2 if got >= asked else got
        self.size = max(min(size, self._aim()), self.concurrency)
