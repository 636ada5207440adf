"""Fixtures: one embedded and one Redis-backed ``delayq serve`` for the whole session (each
test works in topics of its own), clients of them, and a fresh topic name per test."""

from __future__ import annotations

import uuid
from typing import AsyncIterator, Iterator

import pytest
from harness import Server, Servers

import delayq

ENGINES = ["embedded", "redis"]


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    s = Servers(tmp_path_factory)
    yield s
    s.stop()


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def server(servers: Servers, engine: str) -> Server:
    """The session's server of the test's engine."""
    return servers.get(engine)


@pytest.fixture
def url(server: Server) -> str:
    return server.url


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic no other test uses."""
    name = request.node.originalname.removeprefix("test_")[:40]
    return f"{name}.{uuid.uuid4().hex[:8]}"


@pytest.fixture
def client(url: str) -> Iterator[delayq.Client]:
    with delayq.Client(url) as c:
        yield c


@pytest.fixture
async def aclient(url: str) -> AsyncIterator[delayq.AsyncClient]:
    async with delayq.AsyncClient(url) as c:
        yield c
