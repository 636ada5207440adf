"""The worker against a real server, embedded and on Redis: acks, the concurrency limit,
renewal, retries and burial, lost leases, prompt settlements, shutdown (in process, by
SIGTERM) and a killed worker."""

from __future__ import annotations

import asyncio
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Awaitable, Callable, Dict, Iterator, List, Optional

import pytest
from harness import Server, free_port

import delayq
from delayq import AsyncClient, Backoff, JobContext, NewJob, Worker

CHILD = Path(__file__).resolve().parent / "worker_child.py"


async def until(cond: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    """Waits until ``cond`` holds, failing after ``within`` seconds."""
    end = time.monotonic() + within
    while not await cond():
        if time.monotonic() > end:
            pytest.fail(f"not within {within} s: {what}")
        await asyncio.sleep(0.05)


def start(worker: Worker) -> asyncio.Task[delayq.Report]:
    return asyncio.get_running_loop().create_task(worker.run(install_signal_handlers=False))


async def gone(client: AsyncClient, topic: str, id: str) -> bool:
    try:
        await client.get(topic, id)
    except delayq.NotFoundError:
        return True
    return False


async def test_a_sync_handler_runs_in_threads_and_acks(
    aclient: AsyncClient, url: str, topic: str
) -> None:
    await aclient.push_batch(topic, [NewJob(f"job {i}", id=f"j{i}") for i in range(20)])
    seen: List[str] = []
    lock = threading.Lock()

    def handle(job: JobContext) -> None:
        assert threading.current_thread() is not threading.main_thread()
        with lock:
            seen.append(job.text)

    worker = Worker(topic, handle, url=url, concurrency=4)
    run = start(worker)

    async def drained() -> bool:
        s = await aclient.stats(topic)
        return s.ready + s.reserved == 0

    await until(drained, 20, "every job acked")
    report = await worker.close()
    assert run.done() and report.acked == 20 and report.lost == 0
    assert sorted(seen) == sorted(f"job {i}" for i in range(20))


async def test_the_concurrency_limit_holds(aclient: AsyncClient, url: str, topic: str) -> None:
    await aclient.push_batch(topic, [NewJob(str(i)) for i in range(15)])
    running, most, reserved_most = 0, 0, 0

    async def handle(job: JobContext) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.2)
        running -= 1

    worker = Worker(topic, handle, url=url, concurrency=3, prefetch=2)
    start(worker)

    async def drained() -> bool:
        nonlocal reserved_most
        s = await aclient.stats(topic)
        reserved_most = max(reserved_most, s.reserved)
        return s.ready + s.reserved == 0

    await until(drained, 30, "every job acked")
    report = await worker.close()
    assert most == 3, "handlers ran 3 at once, never more"
    assert 3 <= reserved_most <= 5, "never more leased than concurrency + prefetch"
    assert report.acked == 15


async def test_renewal_keeps_a_handler_three_times_its_ttr(
    aclient: AsyncClient, url: str, topic: str
) -> None:
    await aclient.push(topic, "long", id="long", ttr=1)
    runs: List[int] = []

    async def handle(job: JobContext) -> None:
        runs.append(job.attempts)
        await asyncio.sleep(3)
        assert not job.cancelled

    worker = Worker(topic, handle, url=url, concurrency=1)
    start(worker)
    await until(lambda: asyncio.sleep(0, bool(runs)), 10, "the handler started")
    stolen = []
    end = time.monotonic() + 3.5
    while time.monotonic() < end:  # another worker never gets it while it is renewed
        stolen += (await aclient.reserve(topic, wait=0.2)).deliveries
    await until(lambda: gone(aclient, topic, "long"), 5, "the job acked")
    report = await worker.close()
    assert stolen == [] and runs == [1]
    assert (report.acked, report.lost) == (1, 0)


async def test_a_raising_handler_retries_then_goes_dead(
    aclient: AsyncClient, url: str, topic: str
) -> None:
    await aclient.push(topic, "x", id="x", max_attempts=3, backoff=Backoff(base=0.1, kind="fixed"))
    attempts: List[int] = []

    async def handle(job: JobContext) -> None:
        attempts.append(job.attempts)
        raise RuntimeError("payment API down")

    worker = Worker(topic, handle, url=url)
    start(worker)

    async def dead() -> bool:
        return (await aclient.stats(topic)).dead == 1

    await until(dead, 20, "the job dead")
    report = await worker.close()
    (job,) = (await aclient.dead(topic)).jobs
    assert attempts == [1, 2, 3]
    assert job.last_error == "RuntimeError: payment API down"
    assert (report.retried, report.dead, report.acked) == (2, 1, 0)


async def test_permanent_buries_and_retry_after_waits(
    aclient: AsyncClient, url: str, topic: str
) -> None:
    await aclient.push_batch(topic, [NewJob("bury", id="bury"), NewJob("later", id="later")])
    starts: Dict[str, List[float]] = {"bury": [], "later": []}

    async def handle(job: JobContext) -> None:
        starts[job.id].append(time.monotonic())
        if job.id == "bury":
            raise delayq.Permanent("no such order")
        if job.attempts == 1:
            raise delayq.RetryAfter(0.5, "rate limited")

    worker = Worker(topic, handle, url=url)
    start(worker)
    await until(lambda: gone(aclient, topic, "later"), 20, "the retried job acked")
    report = await worker.close()
    (dead,) = (await aclient.dead(topic)).jobs
    assert (dead.id, dead.attempts, dead.last_error) == ("bury", 1, "no such order")
    first, second = starts["later"]
    assert second - first >= 0.45, "retried after the delay asked for, not at once"
    assert (report.buried, report.retried, report.acked) == (1, 1, 1)


async def test_a_lost_lease_cancels_the_handler_and_is_not_settled(
    aclient: AsyncClient, url: str, topic: str
) -> None:
    await aclient.push(topic, "x", id="x", ttr=1)
    reasons: List[Optional[str]] = []

    async def handle(job: JobContext) -> None:
        await aclient.delete(topic, "x")  # the job is deleted while its handler runs
        await asyncio.wait_for(job.wait_cancelled(), 10)
        reasons.append(job.cancel_reason)

    worker = Worker(topic, handle, url=url)
    start(worker)
    await until(lambda: asyncio.sleep(0, bool(reasons)), 15, "the handler cancelled")
    await asyncio.sleep(0.2)
    report = await worker.close()
    assert reasons == ["lease_lost"]
    assert (report.lost, report.acked, report.retried) == (1, 0, 0)


async def test_an_idle_worker_sends_its_acks_at_once(
    aclient: AsyncClient, url: str, topic: str
) -> None:
    handled: List[float] = []

    async def handle(job: JobContext) -> None:
        handled.append(time.monotonic())

    worker = Worker(topic, handle, url=url, wait=30)
    start(worker)
    await asyncio.sleep(0.5)  # the worker is in a 30 s long-poll now
    await aclient.push(topic, "x", id="x")
    await until(lambda: gone(aclient, topic, "x"), 3, "the ack sent well before the wait ends")
    report = await worker.close()
    assert report.acked == 1 and len(handled) == 1


async def test_stop_releases_the_buffer_at_once_and_lets_handlers_finish(
    aclient: AsyncClient, url: str, topic: str
) -> None:
    await aclient.push_batch(topic, [NewJob(str(i), id=f"j{i}") for i in range(4)])
    started: List[str] = []

    async def handle(job: JobContext) -> None:
        started.append(job.id)
        await asyncio.sleep(1.5)

    worker = Worker(topic, handle, url=url, concurrency=1, prefetch=3, shutdown_timeout=10)
    start(worker)

    async def all_held() -> bool:
        return bool(started) and (await aclient.stats(topic)).reserved == 4

    await until(all_held, 10, "one job running, three buffered")
    closing = asyncio.ensure_future(worker.close())
    released: List[delayq.Delivery] = []
    end = time.monotonic() + 1.0
    while len(released) < 3 and time.monotonic() < end:
        released += (await aclient.reserve(topic, max=3, wait=0.5)).deliveries
    assert len(released) == 3, "the buffered jobs came back at once"
    report = await asyncio.wait_for(closing, 10)
    assert started == ["j0"] and await gone(aclient, topic, "j0"), "the running one finished"
    assert (report.acked, report.released) == (1, 3)


async def test_the_shutdown_timeout_releases_running_handlers(
    aclient: AsyncClient, url: str, topic: str
) -> None:
    await aclient.push_batch(topic, [NewJob(str(i)) for i in range(2)])
    started: List[str] = []

    async def handle(job: JobContext) -> None:
        started.append(job.id)
        await asyncio.sleep(60)

    worker = Worker(topic, handle, url=url, concurrency=2, shutdown_timeout=0.5)
    start(worker)
    await until(lambda: asyncio.sleep(0, len(started) == 2), 10, "both handlers running")
    began = time.monotonic()
    report = await asyncio.wait_for(worker.close(), 10)
    assert time.monotonic() - began < 5
    assert report.released == 2
    again = (await aclient.reserve(topic, max=2, wait=1)).deliveries
    assert len(again) == 2, "released to another worker long before their 30 s ttr"


class Child:
    """A worker in a child process (``worker_child.py``), its output read line by line."""

    def __init__(self, *args: object) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, prefix: str, within: float) -> str:
        end = time.monotonic() + within
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"the worker did not print {prefix!r} within {within} s")
            if line.startswith(prefix):
                return line

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def children() -> Iterator[Callable[..., Child]]:
    made: List[Child] = []

    def make(*args: object) -> Child:
        made.append(Child(*args))
        return made[-1]

    yield make
    for c in made:
        c.stop()


async def test_sigterm_mid_batch_releases_jobs_to_another_worker(
    aclient: AsyncClient, url: str, topic: str, children: Callable[..., Child]
) -> None:
    await aclient.push_batch(topic, [NewJob(str(i), id=f"j{i}") for i in range(6)])
    # 2 running, 2 buffered; the 2 others stay ready. Handlers take 60 s, the ttr is 30 s.
    child = children(url, topic, 2, 2, 2.0, 60)
    child.expect("started", 15)
    child.expect("started", 15)

    async def four_held() -> bool:
        return (await aclient.stats(topic)).reserved == 4

    await until(four_held, 10, "the worker holds 4 jobs")
    left = (await aclient.reserve(topic, max=6, wait=0.2)).deliveries
    assert len(left) == 2
    child.proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    buffered = (await aclient.reserve(topic, max=6, wait=1.5)).deliveries
    assert len(buffered) == 2, "the buffered jobs were released at once"
    running: List[delayq.Delivery] = []
    while len(running) < 2 and time.monotonic() - sent < 10:
        running += (await aclient.reserve(topic, max=6, wait=1)).deliveries
    assert len(running) == 2, "the running jobs were released after the shutdown timeout"
    assert time.monotonic() - sent < 10, "long before their 30 s ttr"
    assert child.proc.wait(10) == 0
    assert "released=4" in child.expect("report", 5)


async def test_a_killed_workers_jobs_come_back_after_the_ttr(
    aclient: AsyncClient, url: str, topic: str, children: Callable[..., Child]
) -> None:
    await aclient.push(topic, "x", id="x", ttr=3)
    child = children(url, topic, 1, 0, 1.0, 60)
    child.expect("started x", 15)
    started = time.monotonic()
    child.proc.kill()
    child.proc.wait(10)
    early = (await aclient.reserve(topic, wait=1.5)).deliveries
    assert early == [] and time.monotonic() - started < 2.9, "not back before its ttr"
    (back,) = (await aclient.reserve(topic, wait=10)).deliveries
    assert back.job.id == "x" and back.job.attempts == 2
    assert time.monotonic() - started < 10


async def test_the_worker_waits_out_a_server_that_is_down(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    handled: List[str] = []

    async def handle(job: JobContext) -> None:
        handled.append(job.id)

    worker = Worker("down", handle, url=url, retry_max=0.5)
    run = start(worker)
    await asyncio.sleep(1.5)  # the reserve loop fails and retries meanwhile
    assert not run.done()
    server = Server(tmp_path, port=port)
    try:
        async with AsyncClient(url) as client:
            await client.push("down", "x", id="x")
            await until(lambda: gone(client, "down", "x"), 15, "handled once the server is up")
        report = await worker.close()
        assert handled == ["x"] and report.acked == 1
    finally:
        server.stop()
