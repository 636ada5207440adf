"""Cancel an unpaid order after 30 minutes: the worker's side.

Takes the jobs of ``order_cancel.py`` when they are due and cancels the order unless it was
paid. A failure (the order service down) raises: the job is retried with its back-off, and
is dead after its last attempt; an order that does not exist is buried at once
(``delayq.Permanent``). Runs until Ctrl-C or SIGTERM, then finishes what it holds.

    python examples/order_worker.py          # the server: DELAYQ_SERVER, or 127.0.0.1:7070
"""

from __future__ import annotations

import asyncio
import logging

import delayq

PAID = {41}
"""Orders paid in time (a stand-in for your order service)."""


async def cancel_unpaid(job: delayq.JobContext) -> None:
    order = int(job.text.rsplit(" ", 1)[-1])
    if order in PAID:
        print(f"order {order} was paid: nothing to cancel", flush=True)
        return
    if order <= 0:
        raise delayq.Permanent(f"there is no order {order}")
    print(f"cancelled order {order} (attempt {job.attempts})", flush=True)


async def main() -> None:
    worker = delayq.Worker("orders", cancel_unpaid, concurrency=10)
    report = await worker.run()  # until SIGINT or SIGTERM
    print(f"stopped: {report}", flush=True)


if __name__ == "__main__":
    # The worker's own lines (started, stopped, retries) at INFO. httpx logs every request
    # at INFO, each long-poll of an idle worker included: keep it to warnings.
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    asyncio.run(main())
