"""Fixtures: one embedded and one Redis-backed ``delayq serve`` for the whole session (each
test works in topics of its own), clients of them, and a fresh topic name per test."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import AsyncIterator, Dict, Iterator, List

import pytest

import delayq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Redis, Server

ENGINES = ["embedded", "redis"]


class Servers:
    """The session's servers by engine, each started on first use."""

    def __init__(self, tmp: pytest.TempPathFactory) -> None:
        self._tmp = tmp
        self._servers: Dict[str, Server] = {}
        self._redis: List[Redis] = []

    def get(self, engine: str) -> Server:
        if engine not in self._servers:
            tmp = self._tmp.mktemp(engine)
            if engine == "redis":
                self._redis.append(Redis(tmp / "redis"))
                self._servers[engine] = Server(tmp, redis=self._redis[0].url)
            else:
                self._servers[engine] = Server(tmp)
        return self._servers[engine]

    def redis(self) -> Redis:
        """The Redis of the session's Redis-backed server."""
        self.get("redis")
        return self._redis[0]

    def stop(self) -> None:
        for server in self._servers.values():
            server.stop()
        for r in self._redis:
            r.stop()


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
