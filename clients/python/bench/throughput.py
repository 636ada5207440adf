"""W1 for the Python worker: push N no-op jobs with 100-byte bodies, due now, then drain them
with a worker of the given concurrency and print one JSON line when the topic is empty:
``{"jobs": N, "seconds": S, "jobs_per_s": R}`` (S counts the drain only, from the worker's
start to its last ack confirmed by the server).

    python bench/throughput.py URL TOPIC JOBS CONCURRENCY
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time

import delayq


async def bench(url: str, topic: str, jobs: int, concurrency: int) -> None:
    async with delayq.AsyncClient(url, timeout=60) as client:
        with contextlib.suppress(delayq.NotFoundError):  # A topic never used: nothing to purge.
            await client.purge(topic)
        body = "x" * 100
        for start in range(0, jobs, 1000):
            batch = [delayq.NewJob(body) for _ in range(min(1000, jobs - start))]
            await client.push_batch(topic, batch)

        async def noop(job: delayq.JobContext) -> None:
            pass

        worker = delayq.Worker(topic, noop, client=client, concurrency=concurrency)
        began = time.perf_counter()
        run = asyncio.ensure_future(worker.run(install_signal_handlers=False))
        while worker.report.acked < jobs and not run.done():
            await asyncio.sleep(0.005)
        report = await worker.close()
        seconds = time.perf_counter() - began
        stats = await client.stats(topic)
        if report.acked != jobs or stats.ready + stats.reserved + stats.delayed:
            raise SystemExit(f"not drained: {report}, {stats}")
        line = {"jobs": jobs, "seconds": round(seconds, 3), "jobs_per_s": round(jobs / seconds)}
        print(json.dumps(line), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("url")
    p.add_argument("topic")
    p.add_argument("jobs", type=int)
    p.add_argument("concurrency", type=int)
    a = p.parse_args()
    asyncio.run(bench(a.url, a.topic, a.jobs, a.concurrency))


if __name__ == "__main__":
    main()
