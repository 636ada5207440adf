"""The answer to a push (:class:`PushResult`), apart from the other models so that the
errors can carry a partial batch's answers (:class:`delayq.ApiError`) without importing
them; and the reading of the server's millisecond times."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from . import _wire as wire


def from_ms(ms: int) -> datetime:
    """Milliseconds since the Unix epoch as an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


@dataclass(frozen=True)
class PushResult:
    """The answer to a push: the job's id (generated when not given), whether this push
    created it (``False``: a live job with this id existed), whether it replaced a waiting
    one (``on_conflict``), its state and due time."""

    id: str
    created: bool
    replaced: bool
    state: wire.StateDto
    ready_at: datetime

    @staticmethod
    def from_wire(d: wire.PushResponse) -> PushResult:
        return PushResult(
            id=d["id"],
            created=d["created"],
            replaced=d["replaced"],
            state=d["state"],
            ready_at=from_ms(d["ready_at_ms"]),
        )
