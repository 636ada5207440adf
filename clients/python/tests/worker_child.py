"""A worker in a process of its own, for the tests that signal or kill it.

    python worker_child.py URL TOPIC CONCURRENCY PREFETCH SHUTDOWN_TIMEOUT HANDLER_SECONDS

Prints ``started ID`` when a handler starts and ``done ID`` when it returns, then
``report ...`` at the end; stops on SIGTERM or SIGINT (``Worker.run``'s handlers).
"""

from __future__ import annotations

import asyncio
import sys

import delayq


def main() -> None:
    url, topic, concurrency, prefetch, shutdown_timeout, seconds = sys.argv[1:7]

    async def handle(job: delayq.JobContext) -> None:
        print("started", job.id, flush=True)
        await asyncio.sleep(float(seconds))
        print("done", job.id, flush=True)

    worker = delayq.Worker(
        topic,
        handle,
        url=url,
        concurrency=int(concurrency),
        prefetch=int(prefetch),
        shutdown_timeout=float(shutdown_timeout),
        wait=5,
    )
    report = asyncio.run(worker.run())
    print("report", report, flush=True)


if __name__ == "__main__":
    main()
