"""The client against the OpenAPI document a real server serves: the generated wire module
is current, every call's route, path parameters, query and body fields exist (with the
required ones present), every field read without ``.get`` is required, and the exception
table covers exactly the documented error codes."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from datetime import datetime, timedelta, timezone
from types import ModuleType
from typing import Any, Dict, Iterator, List, Set, Tuple

import httpx
import pytest
from harness import CLIENT_DIR, Servers

import delayq
from delayq import Backoff, Delivery, Job, LeaseRef, NewJob, Settlement, TopicConfig
from delayq import _ops as ops
from delayq import _wire as wire

Doc = Dict[str, Any]
SRC = CLIENT_DIR / "src" / "delayq"


@pytest.fixture(scope="module")
def doc(servers: Servers) -> Doc:
    r = httpx.get(servers.get("embedded").url + "/v1/openapi.json", timeout=10)
    r.raise_for_status()
    document: Doc = r.json()
    return document


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_wire", CLIENT_DIR / "tools" / "gen_wire.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_wire"] = module
    spec.loader.exec_module(module)
    return module


def test_the_generated_wire_module_is_current(doc: Doc) -> None:
    fresh: str = generator().generate(doc)
    assert fresh == (SRC / "_wire.py").read_text(), (
        "src/delayq/_wire.py differs from the server's OpenAPI document: regenerate it with "
        "`python tools/gen_wire.py http://127.0.0.1:7070 > src/delayq/_wire.py` and fix what "
        "mypy then finds"
    )


def resolve(doc: Doc, schema: Doc) -> Doc:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def check_value(doc: Doc, schema: Doc, value: Any, where: str) -> None:
    """Checks a value the client sends against its schema: object keys are properties,
    required keys are present, enum values are listed; recurses into objects and arrays."""
    schema = resolve(doc, schema)
    if value is None:
        return
    if "oneOf" in schema:
        (inner,) = [s for s in schema["oneOf"] if s.get("type") != "null"]
        check_value(doc, inner, value, where)
        return
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} is not one of {schema['enum']}"
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key, v in value.items():
            assert key in props, f"{where}: the client sends {key!r}, not in the schema"
            check_value(doc, props[key], v, f"{where}/{key}")
        for key in schema.get("required", []):
            assert key in value, f"{where}: the required {key!r} is missing"
    if isinstance(value, list):
        for i, v in enumerate(value):
            check_value(doc, schema["items"], v, f"{where}/{i}")


def every_call() -> Iterator[ops.Call[Any]]:
    """Every call the client makes, with every option it can send."""
    now = datetime.now(timezone.utc)
    full = NewJob(
        b"\x00",
        id="i",
        delay=1,
        priority=1,
        ttr=2,
        max_attempts=3,
        backoff=Backoff(base=1, kind="exponential", factor=2, max=9, jitter=0.1),
        on_conflict="debounce",
        max_wait=5,
        max_lateness=1,
        on_expire="drop",
    )
    timed = NewJob("x", at=now, expires_at=now + timedelta(hours=1))
    job = Job("t", "i", b"", "reserved", 0, now, timedelta(seconds=1), 1, 1, Backoff(1), now)
    by_receipt, by_token = Delivery(job, 1, "r", 0.0), LeaseRef("t", "i", 1)
    config = TopicConfig(
        ttr=1, max_attempts=2, backoff=Backoff(1), max_body=9, retention=delayq.Retention(1, 1)
    )
    yield ops.push("t", full)
    yield ops.push("t", timed)
    yield ops.push_batch("t", [full, timed])
    yield ops.get("t", "i")
    yield ops.delete("t", "i")
    yield ops.reschedule("t", "i", 1, None)
    yield ops.reschedule("t", "i", None, now)
    yield ops.list_jobs("t", "dead", 1, "c", "p")
    yield ops.stats("t")
    yield ops.topics()
    yield ops.kick("t", "i")
    yield ops.kick_all("t")
    yield ops.archive("t", "i", "why")
    yield ops.purge("t")
    yield ops.pause("t", 1, None)
    yield ops.pause("t", None, now)
    yield ops.resume("t")
    yield ops.topic_config("t")
    yield ops.set_topic_config("t", config)
    settle = [
        Settlement(by_receipt),
        Settlement(by_token, "nack", delay=1, reason="r"),
        Settlement("receipt", "bury", reason="r"),
        Settlement(by_token, "release"),
    ]
    yield ops.reserve(["t"], 1, 1, settle, True)
    for lease in (by_receipt, by_token):
        yield ops.ack(lease)
        yield ops.nack(lease, 1, "r")
        yield ops.touch(lease, 1)
        yield ops.bury(lease, "r")
        yield ops.release(lease)
    yield ops.ack_many(["a", by_receipt])
    yield ops.ack_many([by_token])


def test_every_call_matches_the_document(doc: Doc) -> None:
    for call in every_call():
        method, path = call.route.method.lower(), call.route.path
        assert path in doc["paths"] and method in doc["paths"][path], f"no {method} {path}"
        op = doc["paths"][path][method]
        assert set(call.path) == set(re.findall(r"{(\w+)}", path)), path
        params = {p["name"]: p for p in op.get("parameters", []) if p["in"] == "query"}
        for name, value in (call.query or {}).items():
            assert name in params, f"{method} {path}: no query parameter {name}"
            check_value(doc, params[name]["schema"], value, f"{path}?{name}")
        required = [n for n, p in params.items() if p.get("required")]
        assert all(n in (call.query or {}) for n in required), f"{path}: {required}"
        body = op.get("requestBody")
        if call.body is None:
            assert body is None or not body.get("required"), f"{method} {path} needs a body"
        else:
            assert body is not None, f"{method} {path} takes no body"
            schema = body["content"]["application/json"]["schema"]
            check_value(doc, schema, call.body, f"{method} {path}")


def reads(tree: ast.AST) -> Iterator[Tuple[str, str, str, bool]]:
    """(function, wire type, key, required) for each ``param["key"]`` and
    ``param.get("key")`` on a parameter annotated with a wire type."""
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        typed = {
            a.arg: a.annotation.attr
            for a in fn.args.args
            if isinstance(a.annotation, ast.Attribute)
            and isinstance(a.annotation.value, ast.Name)
            and a.annotation.value.id == "wire"
        }
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id in typed
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
                and isinstance(node.ctx, ast.Load)
            ):
                yield fn.name, typed[node.value.id], node.slice.value, True
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in typed
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                yield fn.name, typed[node.func.value.id], node.args[0].value, False


def test_fields_read_exist_and_required_ones_are_read_directly(doc: Doc) -> None:
    schemas = doc["components"]["schemas"]
    seen: Set[str] = set()
    for module in ("_models.py", "_pushed.py", "_ops.py", "_errors.py"):
        tree = ast.parse((SRC / module).read_text())
        for fn, type_name, key, direct in reads(tree):
            schema = schemas.get(type_name) or {}
            assert key in schema.get("properties", {}), f"{fn} reads {type_name}.{key}: no field"
            if direct:
                assert key in schema.get("required", []), (
                    f"{fn} reads {type_name}[{key!r}], which the document does not require: "
                    "use .get()"
                )
            seen.add(type_name)
    # The answers the client reads, so a forgotten annotation cannot hide one from this test.
    answers = {
        "JobDto",
        "PushResponse",
        "DeliveryDto",
        "ReserveResponse",
        "SettleResult",
        "StatsDto",
        "ListResponse",
        "NackResponse",
        "TouchResponse",
        "PauseResponse",
        "TopicConfigDto",
        "BackoffDto",
        "AckBatchResponse",
        "CountResponse",
        "ReadyAtResponse",
        "TopicsResponse",
        "PushBatchResponse",
        "ErrorDetail",
        "AckResult",
        "PushBatchFailed",
    }
    assert answers <= seen, answers - seen


def documented_codes(doc: Doc) -> List[str]:
    text = doc["components"]["schemas"]["ErrorDetail"]["properties"]["code"]["description"]
    return re.findall(r"`([a-z_]+)`", text)


def test_the_exception_table_covers_exactly_the_documented_codes(doc: Doc) -> None:
    codes = documented_codes(doc)
    assert len(codes) >= 15, "the codes are enumerated in ErrorDetail.code's description"
    assert set(delayq.ERRORS) == set(codes)
    assert set(wire.ERROR_CODES) == set(codes)
    for code, cls in delayq.ERRORS.items():
        assert issubclass(cls, delayq.ApiError), code
        assert cls.__doc__ and code in cls.__doc__, f"{cls.__name__} names its code"
