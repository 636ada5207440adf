"""Cancel an unpaid order after 30 minutes: the producer's side.

When order 42 is placed, push "cancel order 42" due in 30 minutes, with the order as the
job's id, so that placing it twice pushes one job. If the order is paid meanwhile, delete
the job (``client.delete("orders", "order-42")``); else ``order_worker.py`` cancels it.

    python examples/order_cancel.py          # the server: DELAYQ_SERVER, or 127.0.0.1:7070

``ORDER_CANCEL_DELAY`` (seconds) shortens the 30 minutes, as the tests do.
"""

from __future__ import annotations

import os
from datetime import timedelta

import delayq


def main() -> None:
    delay = float(os.environ.get("ORDER_CANCEL_DELAY", timedelta(minutes=30).total_seconds()))
    with delayq.Client() as client:
        pushed = client.push("orders", "cancel order 42", id="order-42", delay=delay)
        if pushed.created:
            print(f"pushed {pushed.id}, due at {pushed.ready_at.isoformat()}", flush=True)
        else:
            print(f"{pushed.id} was already pushed, due at {pushed.ready_at.isoformat()}")


if __name__ == "__main__":
    main()
