"""beanstalkd clients from PyPI, greenstalk and pystalk, unchanged against delayq's
beanstalkd protocol (``delayq serve --beanstalk``), embedded and on Redis: put, reserve and
delete; a delay kept on time; priorities; release with a delay; bury, peek, kick and
kick-job; touch and the TTR; use, watch and ignore across tubes; the three stats; a job put
by one client and taken by the other; a worker that disconnects holding a job; JOB_TOO_BIG;
and jobs put over beanstalkd as the HTTP API sees them (the tube ``default`` is the topic
``default``).

Each engine gets a ``delayq serve`` of this module's own (and a redis-server of its own for
Redis) with ``--beanstalk 127.0.0.1:0``; the port it bound is read from its log. Each test
works in tubes of its own, named after the ``topic`` fixture.

The module is long because two real clients meet every command on two engines, and the
servers it starts (one per engine, module-scoped) are shared by all of its tests."""

from __future__ import annotations

import re
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import greenstalk
import pystalk  # type: ignore[import-untyped]
import pytest
from harness import Redis, Server

import delayq

# The log line `delayq serve` writes once it listens for beanstalkd clients.
BEANSTALK_AT = re.compile(r"beanstalkd protocol on 127\.0\.0\.1:(\d+)")

# Fields beanstalkd 1.12 answers to stats-job and stats-tube (protocol.txt).
STATS_JOB_FIELDS = {
    "id",
    "tube",
    "state",
    "pri",
    "age",
    "delay",
    "ttr",
    "time-left",
    "file",
    "reserves",
    "timeouts",
    "releases",
    "buries",
    "kicks",
}
STATS_TUBE_FIELDS = {
    "name",
    "current-jobs-urgent",
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
    "total-jobs",
    "current-using",
    "current-waiting",
    "current-watching",
    "pause",
    "cmd-delete",
    "cmd-pause-tube",
    "pause-time-left",
}


class Beanstalk:
    """A ``delayq serve`` that also speaks beanstalkd's protocol, with its Redis if any."""

    def __init__(self, tmp: Path, engine: str) -> None:
        self.redis = Redis(tmp / "redis") if engine == "redis" else None
        self.server = Server(
            tmp,
            redis=self.redis.url if self.redis else None,
            extra=["--beanstalk", "127.0.0.1:0"],
        )
        self.port = self._bound_port()

    def _bound_port(self) -> int:
        end = time.monotonic() + 10
        while time.monotonic() < end:
            m = BEANSTALK_AT.search(self.server.log.read_text(errors="replace"))
            if m:
                return int(m.group(1))
            time.sleep(0.05)
        self.stop()
        pytest.fail("delayq serve did not say where it speaks beanstalkd", pytrace=False)

    @property
    def address(self) -> Tuple[str, int]:
        return ("127.0.0.1", self.port)

    def stop(self) -> None:
        self.server.stop()
        if self.redis:
            self.redis.stop()


@pytest.fixture(scope="module")
def beanstalks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Beanstalk]]:
    """This module's servers by engine, each started on first use."""
    started: Dict[str, Beanstalk] = {}
    yield started
    for b in started.values():
        b.stop()


@pytest.fixture
def bs(
    beanstalks: Dict[str, Beanstalk], engine: str, tmp_path_factory: pytest.TempPathFactory
) -> Beanstalk:
    if engine not in beanstalks:
        beanstalks[engine] = Beanstalk(tmp_path_factory.mktemp(f"beanstalk-{engine}"), engine)
    return beanstalks[engine]


@pytest.fixture
def http(bs: Beanstalk) -> Iterator[delayq.Client]:
    """delayq's own client, on the same server's HTTP API."""
    with delayq.Client(bs.server.url) as c:
        yield c


@pytest.fixture
def tube(topic: str) -> str:
    """A tube no other test uses (a topic name is a valid tube name, mapped to itself)."""
    return topic


GreenFactory = Callable[..., "greenstalk.Client[str]"]


@pytest.fixture
def green(bs: Beanstalk) -> Iterator[GreenFactory]:
    """Opens greenstalk clients (``use`` and ``watch`` as greenstalk takes them), closed at
    the end of the test."""
    opened: List[greenstalk.Client[str]] = []

    def open_client(use: str = "default", watch: Any = "default") -> greenstalk.Client[str]:
        c: greenstalk.Client[str] = greenstalk.Client(bs.address, use=use, watch=watch)
        opened.append(c)
        return c

    yield open_client
    for c in opened:
        c.close()


@pytest.fixture
def stalk(bs: Beanstalk) -> Iterator[Callable[[], Any]]:
    """Opens pystalk clients (a 10 s socket timeout), closed at the end of the test."""
    opened: List[Any] = []

    def open_client() -> Any:
        c = pystalk.BeanstalkClient("127.0.0.1", bs.port, socket_timeout=10)
        opened.append(c)
        return c

    yield open_client
    for c in opened:
        c.close()


def inserted(reply: Any) -> int:
    """The job id of pystalk's answer to a put, ``(b"INSERTED", id)``."""
    status, id = reply
    assert status == b"INSERTED", reply
    assert isinstance(id, int) and 0 < id < 2**53
    return id


@contextmanager
def within(low: float, high: float, what: str) -> Iterator[None]:
    """Fails unless the block takes between ``low`` and ``high`` seconds."""
    start = time.monotonic()
    yield
    took = time.monotonic() - start
    assert low <= took <= high, f"{what}: took {took:.3f} s, expected {low} to {high} s"


# ---------------------------------------------------------------------------------------
# put, reserve, delete


def test_greenstalk_put_reserve_delete(green: GreenFactory, tube: str) -> None:
    c = green(use=tube, watch=tube)
    assert c.using() == tube and c.watching() == [tube]
    id = c.put("hello from greenstalk", ttr=30)
    assert isinstance(id, int) and 0 < id < 2**53
    job = c.reserve(timeout=5)
    assert (job.id, job.body) == (id, "hello from greenstalk")
    assert c.stats_job(job)["state"] == "reserved"
    c.delete(job)
    with pytest.raises(greenstalk.NotFoundError):
        c.peek(id)
    with pytest.raises(greenstalk.NotFoundError):
        c.delete(id)
    with pytest.raises(greenstalk.TimedOutError), within(0, 2, "reserve-with-timeout 0"):
        c.reserve(timeout=0)


def test_greenstalk_binary_bodies(bs: Beanstalk, tube: str) -> None:
    body = bytes(range(256)) + b"\r\n\x00 put 1 2 3 4\r\n"
    with greenstalk.Client(bs.address, encoding=None, use=tube, watch=tube) as c:
        id = c.put(body)
        job = c.reserve(timeout=5)
        assert (job.id, job.body) == (id, body)
        c.delete(job)


def test_pystalk_put_reserve_delete(stalk: Callable[[], Any], tube: str) -> None:
    c = stalk()
    id = inserted(c.put_job_into(tube, "hello from pystalk", pri=10, ttr=30))
    c.watchlist = {tube}
    assert c.watchlist == {tube}
    job = c.reserve_job(timeout=5)
    assert (job.job_id, job.job_data) == (id, b"hello from pystalk")
    assert c.stats_job(job)["state"] == "reserved"
    c.delete_job(job)
    with pytest.raises(pystalk.BeanstalkError) as e:
        c.stats_job(id)
    assert e.value.message == "NOT_FOUND"
    with pytest.raises(pystalk.BeanstalkError) as e:
        c.reserve_job(timeout=0)
    assert e.value.message == "TIMED_OUT"
    assert list(c.reserve_iter()) == []


# ---------------------------------------------------------------------------------------
# delays and priorities


def test_greenstalk_delay_is_kept_on_time(green: GreenFactory, tube: str) -> None:
    c = green(use=tube, watch=tube)
    start = time.monotonic()
    id = c.put("in a second", delay=1)
    assert c.peek_delayed().id == id
    stats = c.stats_job(id)
    assert (stats["state"], stats["delay"]) == ("delayed", 1)
    assert 0 <= stats["time-left"] <= 1
    with pytest.raises(greenstalk.NotFoundError):
        c.peek_ready()
    with pytest.raises(greenstalk.TimedOutError):
        c.reserve(timeout=0)
    job = c.reserve(timeout=5)
    took = time.monotonic() - start
    assert job.id == id
    assert 0.9 <= took <= 2.5, f"a 1 s delay was reserved after {took:.3f} s"
    c.delete(job)


def test_pystalk_delay_is_kept_on_time(stalk: Callable[[], Any], tube: str) -> None:
    c = stalk()
    c.use(tube)
    c.watch(tube)
    start = time.monotonic()
    id = inserted(c.put_job("in a second", delay=1))
    assert c.peek_delayed().job_id == id
    job = c.reserve_job(timeout=5)
    took = time.monotonic() - start
    assert job.job_id == id
    assert 0.9 <= took <= 2.5, f"a 1 s delay was reserved after {took:.3f} s"
    c.delete_job(job)


def test_greenstalk_lower_priority_first(green: GreenFactory, tube: str) -> None:
    c = green(use=tube, watch=tube)
    ids = {
        name: c.put(name, priority=pri)
        for name, pri in [
            ("low", 2**32 - 1),
            ("mid", 1024),
            ("urgent", 0),
            ("mid-later", 1024),
            ("high", 5),
        ]
    }
    assert c.peek_ready().id == ids["urgent"]
    assert c.stats_tube(tube)["current-jobs-urgent"] == 2
    order = []
    for _ in ids:
        job = c.reserve(timeout=5)
        order.append(job.body)
        c.delete(job)
    # Equal priorities go in the order they were put.
    assert order == ["urgent", "high", "mid", "mid-later", "low"]


def test_pystalk_lower_priority_first(stalk: Callable[[], Any], tube: str) -> None:
    c = stalk()
    for body, pri in [("c", 300), ("a", 1), ("b", 20)]:
        c.put_job_into(tube, body, pri=pri)
    c.watchlist = {tube}
    got = []
    for job in c.reserve_iter():
        got.append(job.job_data)
        c.delete_job(job)
    assert got == [b"a", b"b", b"c"]


# ---------------------------------------------------------------------------------------
# release, bury, kick, touch


def test_greenstalk_release_with_delay(green: GreenFactory, tube: str) -> None:
    c = green(use=tube, watch=tube)
    id = c.put("again later", priority=100)
    job = c.reserve(timeout=5)
    c.release(job, priority=7, delay=1)
    stats = c.stats_job(id)
    assert (stats["state"], stats["pri"]) == ("delayed", 7)
    with pytest.raises(greenstalk.TimedOutError):
        c.reserve(timeout=0)
    with within(0.5, 2.5, "a job released with a 1 s delay"):
        again = c.reserve(timeout=5)
    assert (again.id, again.body) == (id, "again later")
    # Released at once it is ready at once, to this connection or another.
    c.release(again)
    assert c.stats_job(id)["state"] == "ready"
    other = green(watch=tube)
    with within(0, 1, "a job released without delay"):
        assert other.reserve(timeout=2).id == id
    # Only its holder may release it.
    with pytest.raises(greenstalk.NotFoundError):
        c.release(again)
    other.delete(id)


def test_pystalk_release_with_delay(stalk: Callable[[], Any], tube: str) -> None:
    c = stalk()
    id = inserted(c.put_job_into(tube, "again later"))
    c.watchlist = {tube}
    job = c.reserve_job(timeout=5)
    assert c.release_job(job, pri=3, delay=1) == b"RELEASED"
    assert c.stats_job(id)["state"] == "delayed"
    with pytest.raises(pystalk.BeanstalkError):
        c.peek_delayed()  # peeks look in the used tube: still default
    c.use(tube)
    assert c.peek_delayed().job_id == id
    with within(0.5, 2.5, "a job released with a 1 s delay"):
        again = c.reserve_job(timeout=5)
    assert again.job_id == id
    c.delete_job(again)


def test_greenstalk_bury_peek_kick_and_kick_job(green: GreenFactory, tube: str) -> None:
    c = green(use=tube, watch=tube)
    first, second, third = (c.put(f"job {i}") for i in range(3))
    for _ in range(3):
        c.bury(c.reserve(timeout=5), priority=9)
    with pytest.raises(greenstalk.NotFoundError):
        c.peek_ready()
    assert c.peek_buried().id == first
    stats = c.stats_job(first)
    assert (stats["state"], stats["pri"], stats["buries"]) == ("buried", 9, 1)
    assert c.stats_tube(tube)["current-jobs-buried"] == 3
    # A buried job is not reserved until kicked; kick takes the oldest first.
    with pytest.raises(greenstalk.TimedOutError):
        c.reserve(timeout=0)
    assert c.kick(1) == 1
    assert c.stats_job(first)["state"] == "ready"
    assert c.peek_buried().id == second
    c.kick_job(third)
    assert c.stats_job(third)["state"] == "ready"
    assert c.kick(10) == 1
    with pytest.raises(greenstalk.NotFoundError):
        c.peek_buried()
    with pytest.raises(greenstalk.NotFoundError):
        c.kick_job(first)  # ready: nothing to kick
    # With nothing buried, kick moves delayed jobs.
    delayed = c.put("much later", delay=3600)
    assert c.peek_delayed().id == delayed
    assert c.kick(5) == 1
    assert c.stats_job(delayed)["state"] == "ready"
    later = c.put("later", delay=3600)
    c.kick_job(later)
    assert c.stats_job(later)["state"] == "ready"
    got = set()
    for _ in range(5):
        job = c.reserve(timeout=5)
        got.add(job.id)
        c.delete(job)
    assert got == {first, second, third, delayed, later}


def test_pystalk_bury_peek_kick_and_kick_job(stalk: Callable[[], Any], tube: str) -> None:
    c = stalk()
    c.use(tube)
    c.watchlist = {tube}
    a = inserted(c.put_job("a"))
    b = inserted(c.put_job("b"))
    assert c.bury_job(c.reserve_job(timeout=5)) == b"BURIED"
    assert c.bury_job(c.reserve_job(timeout=5)) == b"BURIED"
    assert c.peek_buried().job_id == a
    assert c.kick_jobs(1) == (b"KICKED", 1)
    assert c.peek_buried().job_id == b
    c.kick_job(b)
    with pytest.raises(pystalk.BeanstalkError) as e:
        c.peek_buried()
    assert e.value.message == "NOT_FOUND"
    assert sorted(j.job_id for j in c.reserve_iter()) == [a, b]
    c.delete_job(a)
    c.delete_job(b)


def test_greenstalk_touch_keeps_the_job_past_its_ttr(green: GreenFactory, tube: str) -> None:
    c = green(use=tube, watch=tube)
    other = green(watch=tube)
    id = c.put("slow work", ttr=2)
    job = c.reserve(timeout=5)
    for _ in range(3):  # 3 s in all, past the 2 s TTR, touched every second
        time.sleep(1)
        c.touch(job)
        stats = c.stats_job(id)
        assert stats["state"] == "reserved" and 1 <= stats["time-left"] <= 2, stats
    with pytest.raises(greenstalk.TimedOutError):
        other.reserve(timeout=0)
    with pytest.raises(greenstalk.NotFoundError):
        other.touch(job)  # not its job
    c.delete(job)


def test_greenstalk_ttr_gives_an_untouched_job_back(green: GreenFactory, tube: str) -> None:
    c = green(use=tube, watch=tube)
    other = green(watch=tube)
    id = c.put("abandoned", ttr=1)
    assert c.reserve(timeout=5).id == id
    with within(0.5, 4, "a job after its 1 s TTR"):
        job = other.reserve(timeout=5)
    assert job.id == id
    other.delete(job)


# ---------------------------------------------------------------------------------------
# tubes


def test_greenstalk_use_watch_ignore_across_tubes(green: GreenFactory, tube: str) -> None:
    a, b, c3 = f"{tube}.a", f"{tube}.b", f"{tube}.c"
    producer = green()
    assert producer.using() == "default"
    producer.use(a)
    in_a = producer.put("for a")
    producer.use(b)
    in_b = producer.put("for b")
    assert producer.using() == b
    assert {a, b} <= set(producer.tubes())

    worker = green(watch=b)
    assert worker.watching() == [b]
    job = worker.reserve(timeout=5)
    assert (job.id, job.body) == (in_b, "for b")
    worker.delete(job)
    with pytest.raises(greenstalk.TimedOutError):
        worker.reserve(timeout=0)  # a's job is not watched
    with pytest.raises(greenstalk.NotIgnoredError):
        worker.ignore(b)  # the last watched tube
    assert worker.watch(a) == 2
    assert worker.watch(a) == 2  # watching twice counts once
    assert worker.ignore(b) == 1
    assert worker.ignore(c3) == 1  # a tube not watched
    assert worker.watching() == [a]
    job = worker.reserve(timeout=5)
    assert (job.id, job.body) == (in_a, "for a")
    worker.delete(job)

    # A reserve waiting on two tubes takes what comes into either.
    worker.watch(c3)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(worker.reserve, 5)
        time.sleep(0.3)
        producer.use(c3)
        put = producer.put("for c")
        with within(0, 2, "a waiting reserve"):
            got = waiting.result(timeout=5)
    assert (got.id, got.body) == (put, "for c")
    worker.delete(got)


def test_pystalk_use_watch_ignore_across_tubes(stalk: Callable[[], Any], tube: str) -> None:
    a, b = f"{tube}.a", f"{tube}.b"
    c = stalk()
    with c.using(a) as inserter:
        in_a = inserted(inserter.put_job("for a"))
    in_b = inserted(c.put_job_into(b, "for b"))
    assert c.current_tube == "default"
    assert {a, b} <= set(c.list_tubes())
    c.watch(b)  # pystalk ignores default on the first watch
    assert c.watchlist == {b}
    job = c.reserve_job(timeout=5)
    assert job.job_id == in_b
    c.delete_job(job)
    c.watchlist = {a}
    job = c.reserve_job(timeout=5)
    assert job.job_id == in_a
    c.delete_job(job)
    assert c.stats_tube(a)["current-watching"] == 1
    # Empty and watched by no one: gone, as in beanstalkd.
    with pytest.raises(pystalk.client.BeanstalkError, match="NOT_FOUND"):
        c.stats_tube(b)


# ---------------------------------------------------------------------------------------
# stats


def test_greenstalk_stats_fields(green: GreenFactory, tube: str) -> None:
    producer = green(use=tube)
    worker = green(watch=tube)
    ready = producer.put("ready", priority=5, ttr=7)
    producer.put("delayed", priority=2000, delay=3600)
    reserved = producer.put("reserved", priority=1)
    assert worker.reserve(timeout=5).id == reserved

    job = worker.stats_job(ready)
    assert set(job) == STATS_JOB_FIELDS
    assert (job["id"], job["tube"], job["state"], job["pri"], job["ttr"]) == (
        ready,
        tube,
        "ready",
        5,
        7,
    )
    assert 0 <= job["age"] < 60 and job["delay"] == 0 and job["reserves"] == 0
    held = worker.stats_job(reserved)
    assert (held["state"], held["reserves"], held["ttr"]) == ("reserved", 1, 60)
    assert 0 <= held["time-left"] <= 60

    t = producer.stats_tube(tube)
    assert set(t) == STATS_TUBE_FIELDS
    assert t["name"] == tube
    assert (
        t["current-jobs-ready"],
        t["current-jobs-delayed"],
        t["current-jobs-reserved"],
        t["current-jobs-buried"],
        t["current-jobs-urgent"],
    ) == (1, 1, 1, 0, 1)
    assert t["total-jobs"] == 3
    assert (t["current-using"], t["current-watching"], t["current-waiting"]) == (1, 1, 0)
    assert (t["pause"], t["pause-time-left"]) == (0, 0)
    with pytest.raises(greenstalk.NotFoundError):
        producer.stats_tube(f"{tube}.never")

    s = producer.stats()
    assert set(greenstalk.Stats.__annotations__) <= set(s), "every beanstalkd 1.12 field"
    for field in ("current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed"):
        assert s[field] >= 1, field
    assert s["cmd-put"] >= 3 and s["cmd-reserve-with-timeout"] >= 1
    assert s["cmd-stats-job"] >= 2 and s["cmd-stats-tube"] >= 2
    assert s["total-jobs"] >= 3
    assert s["current-connections"] >= 2 and s["total-connections"] >= 2
    assert s["max-job-size"] == 65535
    assert s["uptime"] >= 0 and s["pid"] > 0
    assert s["draining"] == "false" and s["version"]
    assert s["current-tubes"] >= 1


def test_pystalk_stats_fields(stalk: Callable[[], Any], tube: str) -> None:
    c = stalk()
    id = inserted(c.put_job_into(tube, "x", pri=3, ttr=9))
    job = c.stats_job(id)
    assert set(job) == STATS_JOB_FIELDS
    assert (job["tube"], job["pri"], job["ttr"], job["state"]) == (tube, 3, 9, "ready")
    assert set(c.stats_tube(tube)) == STATS_TUBE_FIELDS
    s = c.stats()
    assert isinstance(s["current-jobs-ready"], int) and s["current-jobs-ready"] >= 1
    assert s["max-job-size"] == 65535


# ---------------------------------------------------------------------------------------
# two clients, disconnection, limits


def test_greenstalk_puts_and_pystalk_reserves(
    green: GreenFactory, stalk: Callable[[], Any], tube: str
) -> None:
    producer = green(use=tube)
    id = producer.put("from greenstalk", priority=4, ttr=20)
    worker = stalk()
    worker.watchlist = {tube}
    job = worker.reserve_job(timeout=5)
    assert (job.job_id, job.job_data) == (id, b"from greenstalk")
    assert producer.stats_job(id)["state"] == "reserved"
    worker.delete_job(job)
    with pytest.raises(greenstalk.NotFoundError):
        producer.peek(id)

    # And the other way round.
    back = inserted(worker.put_job_into(tube, "from pystalk"))
    consumer = green(watch=tube)
    got = consumer.reserve(timeout=5)
    assert (got.id, got.body) == (back, "from pystalk")
    consumer.delete(got)


def test_a_disconnected_worker_gives_its_job_back_at_once(
    green: GreenFactory, stalk: Callable[[], Any], tube: str
) -> None:
    producer = green(use=tube)
    id = producer.put("held", ttr=600)
    holder = green(watch=tube)
    assert holder.reserve(timeout=5).id == id
    holder.close()  # no release: the connection just goes
    worker = stalk()
    worker.watchlist = {tube}
    with within(0, 1.5, "a job held by a connection that closed (TTR 600 s)"):
        job = worker.reserve_job(timeout=5)
    assert job.job_id == id

    # A worker waiting in reserve gets it the moment its holder goes away.
    waiting = green(watch=tube)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(waiting.reserve, 10)
        time.sleep(0.3)
        assert not pending.done()
        worker.close()
        with within(0, 1.5, "a waiting reserve after the holder closed"):
            got = pending.result(timeout=10)
    assert got.id == id
    assert waiting.stats_job(id)["state"] == "reserved"
    waiting.delete(got)


def test_a_killed_connection_gives_its_job_back(
    bs: Beanstalk, green: GreenFactory, tube: str
) -> None:
    """A raw socket reset (no quit) while holding a job, as a crashed worker does."""
    producer = green(use=tube)
    id = producer.put("held", ttr=600)
    raw = socket.create_connection(bs.address, timeout=5)
    raw.sendall(f"watch {tube}\r\nreserve-with-timeout 5\r\n".encode())
    got = b""
    while not got.endswith(b"held\r\n"):
        chunk = raw.recv(4096)
        assert chunk, got
        got += chunk
    assert f"RESERVED {id} 4\r\n".encode() in got
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.close()  # RST
    worker = green(watch=tube)
    with within(0, 1.5, "a job held by a reset connection"):
        assert worker.reserve(timeout=5).id == id
    worker.delete(id)


def test_job_too_big(green: GreenFactory, stalk: Callable[[], Any], tube: str) -> None:
    c = green(use=tube, watch=tube)
    with pytest.raises(greenstalk.JobTooBigError):
        c.put("x" * 65536)
    # The connection goes on, and max-job-size itself fits.
    id = c.put("y" * 65535)
    job = c.reserve(timeout=5)
    assert job.id == id and len(job.body) == 65535
    c.delete(job)

    p = stalk()
    with pytest.raises(pystalk.BeanstalkError) as e:
        p.put_job_into(tube, b"z" * 100_000)
    assert e.value.message == "JOB_TOO_BIG"
    assert inserted(p.put_job_into(tube, b"small")) > 0
    assert c.stats_tube(tube)["current-jobs-ready"] == 1


def test_bad_tube_names_are_bad_format(green: GreenFactory) -> None:
    c = green()
    with pytest.raises(greenstalk.BadFormatError):
        c.use("-leading-hyphen")
    with pytest.raises(greenstalk.BadFormatError):
        c.watch("x" * 201)
    assert c.using() == "default"


# ---------------------------------------------------------------------------------------
# the HTTP API


def test_the_http_api_sees_jobs_put_over_beanstalk(
    green: GreenFactory, http: delayq.Client, tube: str
) -> None:
    c = green()  # uses and watches the tube "default": the topic "default"
    before = http.stats("default")
    id = c.put("via beanstalk", priority=7, ttr=30)
    job = http.get("default", str(id))
    assert (job.topic, job.id, job.text, job.state) == (
        "default",
        str(id),
        "via beanstalk",
        "ready",
    )
    assert (job.priority, job.ttr.total_seconds()) == (7, 30)
    assert http.stats("default").ready == before.ready + 1
    got = c.reserve(timeout=5)
    assert got.id == id
    assert http.get("default", str(id)).state == "reserved"
    c.delete(got)
    with pytest.raises(delayq.NotFoundError):
        http.get("default", str(id))
    assert http.stats("default").ready == before.ready

    # Another tube is the topic of the same name; a delayed job is delayed there too.
    c.use(tube)
    later = c.put("later", delay=3600)
    job = http.get(tube, str(later))
    assert job.state == "delayed"
    assert 3599 <= (job.ready_at - job.created_at).total_seconds() <= 3601
    assert http.stats(tube).delayed == 1
    # Buried over beanstalkd is dead for the HTTP API.
    c.kick_job(later)
    c.watch(tube)
    c.bury(c.reserve(timeout=5))
    assert http.get(tube, str(later)).state == "dead"
    assert http.stats(tube).dead == 1

    # And a job pushed over HTTP is reserved over beanstalkd (under a number of its own).
    http.push(tube, "via http", id="pushed-over-http", priority=3)
    c.ignore("default")
    pushed = c.reserve(timeout=5)
    assert pushed.body == "via http"
    assert c.stats_job(pushed)["tube"] == tube
    c.delete(pushed)
    with pytest.raises(delayq.NotFoundError):
        http.get(tube, "pushed-over-http")


def test_a_tube_with_special_characters_maps_to_a_topic(
    green: GreenFactory, http: delayq.Client, tube: str
) -> None:
    name = f"{tube}/emails+(high)"
    c = green(use=name, watch=name)
    id = c.put("mapped")
    topic = f"{tube}:2Femails:2B:28high:29"
    assert http.get(topic, str(id)).text == "mapped"
    assert name in c.tubes()
    assert c.stats_job(id)["tube"] == name
    c.delete(c.reserve(timeout=5))


def test_stats_job_delay_is_the_time_from_the_put_to_the_due_time(
    green: GreenFactory, tube: str
) -> None:
    """A documented difference (docs/beanstalkd.md): delayq's ``delay`` is the
    time from the put to the job's due time (beanstalkd's is the delay last given): after a
    release with a delay it is the job's age plus the time it has left."""
    c = green(use=tube, watch=tube)
    id = c.put("x")
    job = c.reserve(timeout=5)
    time.sleep(1.1)
    c.release(job, delay=3)
    stats = c.stats_job(id)
    assert stats["state"] == "delayed"
    assert abs(stats["delay"] - (stats["age"] + stats["time-left"])) <= 1, stats
    assert stats["delay"] >= 4, stats
    c.delete(id)


# ---------------------------------------------------------------------------------------
# Where delayq answered otherwise than beanstalkd 1.12 at first (compared with a real
# beanstalkd), now answered as beanstalkd does.


def test_stats_current_tubes_counts_the_tubes_list_tubes_lists(
    green: GreenFactory, tube: str
) -> None:
    """beanstalkd's ``current-tubes`` is the number of tubes ``list-tubes`` lists (a tube
    exists while a connection uses or watches it or it holds a job); delayq answered the
    number of topics in the engine, without the tubes only used or watched."""
    c = green(use=f"{tube}.used", watch=f"{tube}.watched")
    for _ in range(20):  # connections of earlier tests may still be closing
        tubes = c.tubes()
        current = c.stats()["current-tubes"]
        if c.tubes() == tubes:
            break
        time.sleep(0.1)
    assert {f"{tube}.used", f"{tube}.watched"} <= set(tubes)
    assert current == len(tubes), tubes


def test_stats_command_counters_count_as_beanstalkd(green: GreenFactory, tube: str) -> None:
    """beanstalkd counts a refused put in ``cmd-put``, and neither ``reserve-job`` in
    ``cmd-reserve`` nor ``kick-job`` in ``cmd-kick``; delayq did the opposite of each."""
    c = green(use=tube, watch=tube)
    before = c.stats()
    with pytest.raises(greenstalk.JobTooBigError):
        c.put("x" * 65536)
    id = c.put("a")
    job = c.reserve_job(id)
    c.bury(job)
    c.kick_job(id)
    after = c.stats()
    c.delete(id)
    assert after["cmd-put"] - before["cmd-put"] == 2
    assert after["cmd-reserve"] - before["cmd-reserve"] == 0
    assert after["cmd-kick"] - before["cmd-kick"] == 0


def test_a_tube_without_jobs_or_clients_is_gone(green: GreenFactory, tube: str) -> None:
    """beanstalkd drops a tube once it holds no job and no connection uses or watches it
    (``list-tubes`` leaves it out, ``stats-tube`` answers NOT_FOUND); delayq went on listing
    it and answering its stats."""
    c = green(use=tube, watch=tube)
    c.delete(c.reserve_job(c.put("x")))
    c.use("default")
    c.watch("default")
    c.ignore(tube)
    assert tube not in c.tubes()
    with pytest.raises(greenstalk.NotFoundError):
        c.stats_tube(tube)
