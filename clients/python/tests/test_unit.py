"""The client's own logic, without a server: request encoding, answer decoding, the error
table, the two clients' parity, Python 3.9 syntax, the worker's arguments."""

from __future__ import annotations

import ast
import inspect
import json
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from harness import CLIENT_DIR

import delayq
from delayq import AsyncClient, Backoff, Client, NewJob, Settlement, Worker
from delayq import _ops as ops
from delayq._errors import from_response
from delayq._models import to_ms
from delayq._window import Window
from delayq._worker import _reason


def test_durations_are_whole_milliseconds() -> None:
    assert to_ms(1.5) == 1500 and to_ms(timedelta(minutes=30)) == 1_800_000
    assert to_ms(0.0004) == 0 and to_ms(-1) == -1000, "the server checks the range"


def test_a_push_sends_only_what_is_set() -> None:
    assert NewJob("x").to_wire() == {"body": "x"}
    at = datetime(2026, 1, 2, 15, 4, 5, 123456, tzinfo=timezone(timedelta(hours=2)))
    full = NewJob(b"\x00\xff", id="i", at=at, ttr=timedelta(seconds=45), backoff=Backoff(2))
    assert full.to_wire() == {
        "body": "AP8=",
        "encoding": "base64",
        "id": "i",
        "ready_at": "2026-01-02T13:04:05.123+00:00",
        "ttr_ms": 45000,
        "backoff": {"kind": "exponential", "base_ms": 2000},
    }
    with pytest.raises(ValueError, match="time zone"):
        NewJob("x", at=datetime(2026, 1, 1)).to_wire()


def test_settlements_name_their_lease() -> None:
    ref = delayq.LeaseRef("t", "i", 7)
    assert Settlement("r").to_wire() == {"outcome": "ack", "receipt": "r"}
    assert Settlement(ref, "nack", delay=1, reason="x").to_wire() == {
        "outcome": "nack",
        "topic": "t",
        "id": "i",
        "token": 7,
        "delay_ms": 1000,
        "reason": "x",
    }
    assert ops.release(ref).body == {"token": 7}
    with pytest.raises(ValueError, match="not both"):
        ops.ack_many(["r", ref])


def test_a_reserve_answer_names_its_unreachable_topics() -> None:
    # See: issue 37. An older server's answer has no such field: none unreachable.
    answer = {"jobs": [], "settled": [], "wait_ms": 0, "unreachable": ["a", "b"]}
    assert ops._reservation(answer).unreachable == ["a", "b"]  # type: ignore[arg-type]
    del answer["unreachable"]
    assert ops._reservation(answer).unreachable == []  # type: ignore[arg-type]


@pytest.mark.parametrize("code", sorted(delayq.ERRORS))
def test_each_code_raises_its_exception(code: str) -> None:
    body = json.dumps({"error": {"code": code, "message": "m", "field": "/f", "index": 2}})
    e = from_response(400, body)
    assert type(e) is delayq.ERRORS[code]
    assert isinstance(e, delayq.ApiError)
    assert (e.code, e.message, e.field, e.index, e.status) == (code, "m", "/f", 2, 400)
    assert str(e) == f"{code}: m"


def test_a_full_engine_is_a_retryable_unavailable_answer() -> None:
    e = from_response(503, '{"error": {"code": "engine_full", "message": "engine full: m"}}')
    assert type(e) is delayq.EngineFullError
    assert isinstance(e, delayq.ServiceUnavailableError)
    assert isinstance(e, delayq.TransientError)
    assert (e.status, e.message) == (503, "engine full: m")


def test_partitions_in_use_is_a_conflict_that_is_not_retried() -> None:
    body = '{"error": {"code": "partitions_in_use", "message": "cannot change"}}'
    e = from_response(409, body)
    assert type(e) is delayq.PartitionsInUseError
    assert isinstance(e, delayq.ConflictError)
    assert not isinstance(e, delayq.TransientError)
    assert (e.status, e.message) == (409, "cannot change")


def test_unknown_codes_and_foreign_answers_fall_back_on_the_status() -> None:
    e = from_response(409, '{"error": {"code": "brand_new", "message": "m"}}')
    assert type(e) is delayq.ConflictError and e.code == "brand_new"
    proxy = from_response(503, "<html>bad gateway</html>")
    assert isinstance(proxy, delayq.ServiceUnavailableError)
    assert isinstance(proxy, delayq.TransientError)
    assert type(from_response(418, "")) is delayq.ApiError


def test_an_unreadable_answer_is_a_protocol_error() -> None:
    client = Client("http://127.0.0.1:1")
    answer = httpx.Response(200, content=b'{"not": "a stats answer"}')
    with pytest.raises(delayq.ProtocolError, match="compatible version"):
        client._answer(ops.stats("t"), answer)
    client.close()


def test_both_clients_have_the_same_methods_and_arguments() -> None:
    def api(cls: type) -> dict[str, list[str]]:
        return {
            name: list(inspect.signature(f).parameters)
            for name, f in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")
        }

    sync, asynchronous = api(Client), api(AsyncClient)
    assert sync == asynchronous
    for name in sync:
        assert inspect.iscoroutinefunction(
            getattr(AsyncClient, name)
        ) or inspect.isasyncgenfunction(getattr(AsyncClient, name)), name


def test_the_package_parses_as_python_3_9() -> None:
    for path in sorted((CLIENT_DIR / "src" / "delayq").glob("*.py")):
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 9))


def test_a_handler_reads_the_attempt_number_as_attempts_and_attempt_is_deprecated() -> None:
    delivery = delayq.Delivery(
        job=delayq.Job(
            topic="t",
            id="a",
            body=b"x",
            state="reserved",
            priority=0,
            ready_at=datetime.now(timezone.utc),
            ttr=timedelta(seconds=30),
            max_attempts=5,
            attempts=3,
            backoff=Backoff(1),
            created_at=datetime.now(timezone.utc),
        ),
        token=1,
        receipt="r",
        lateness=0.0,
    )
    job = delayq.JobContext(delivery)
    assert job.attempts == 3 == job.job.attempts, "the API's name, as on Job"
    with pytest.warns(DeprecationWarning, match="use job.attempts"):
        assert job.attempt == 3


def test_worker_arguments_are_checked() -> None:
    async def handle(job: delayq.JobContext) -> None:
        pass

    client = AsyncClient("http://127.0.0.1:1")
    for bad in ({"concurrency": 0}, {"prefetch": -1}, {"wait": 0}, {"shutdown_timeout": -1}):
        with pytest.raises(ValueError):
            Worker("t", handle, client=client, **bad)  # type: ignore[arg-type]  # one int each
    with pytest.raises(ValueError, match="topic"):
        Worker([], handle, client=client)
    w = Worker("t", handle, client=client, concurrency=500)
    assert (w.topics, w.prefetch) == (["t"], 100)


def test_failure_reasons_name_the_exception_and_fit_the_server() -> None:
    assert _reason(ValueError("bad input")) == "ValueError: bad input"
    assert _reason(KeyError()) == "KeyError"
    assert _reason(delayq.Permanent("no such order")) == "no such order"
    assert len(_reason(RuntimeError("é" * 5000)).encode()) <= 4096


def test_the_window_starts_at_the_concurrency_and_doubles_when_reserves_come_back_full() -> None:
    w = Window(2, 48)
    assert (w.size, w.need(1)) == (2, 1)
    w.reserved(2, 2)
    assert w.size == 2, "no growth before a handler finished"
    w.observe(0.00001)
    sizes = []
    for _ in range(6):
        w.reserved(w.size, w.size)
        sizes.append(w.size)
    assert sizes == [4, 8, 16, 32, 50, 50]


def test_the_window_holds_about_100_ms_of_work_and_shrinks_on_a_short_reserve() -> None:
    w = Window(10, 990)
    w.observe(0.02)  # 10 handlers of 20 ms: 50 jobs in 100 ms
    for _ in range(10):
        w.reserved(w.size, w.size)
    assert w.size == 50
    w.reserved(50, 20)
    assert w.size == 20, "a short reserve: hold what came"
    w.observe(60)
    assert w.size == 10, "slow handlers: the concurrency, never less"


def test_a_chosen_prefetch_is_a_fixed_window() -> None:
    w = Window(3, 2, adaptive=False)
    w.observe(60)
    w.reserved(5, 0)
    assert w.size == 5
