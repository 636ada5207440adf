"""Real servers for the tests: ``delayq serve`` (embedded or on Redis) and ``redis-server``,
each on a free loopback port in a temporary directory, killed by PID when done."""

from __future__ import annotations

import binascii
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

import httpx
import pytest

CLIENT_DIR = Path(__file__).resolve().parent.parent
REPO = CLIENT_DIR.parent.parent


def delayq_bin() -> str:
    """``$DELAYQ_BIN``, else ``<repo>/target/debug/delayq``; fails the test when missing."""
    path = os.environ.get("DELAYQ_BIN") or str(REPO / "target" / "debug" / "delayq")
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"no delayq binary at {path}: build it (cargo build -p delayq-cli) or set DELAYQ_BIN",
            pytrace=False,
        )
    return path


def redis_bin() -> str:
    """``$DELAYQ_REDIS_SERVER``, else ``redis-server`` on the PATH; fails when missing."""
    path = os.environ.get("DELAYQ_REDIS_SERVER") or shutil.which("redis-server")
    if not path:
        pytest.fail(
            "no redis-server: install it (apt-get install redis-server) or set DELAYQ_REDIS_SERVER",
            pytrace=False,
        )
    return path


def free_port() -> int:
    """A loopback port nothing listens on now (the caller retries if it is taken)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-4000:]
    except OSError:
        return "(no log)"


class Process:
    """A child process with its log file, stopped by PID."""

    def __init__(self, args: List[str], log: Path, cwd: Path) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=cwd)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Redis:
    """A redis-server of its own (``extra`` arguments passed on)."""

    def __init__(self, tmp: Path, extra: Optional[List[str]] = None) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            self.port = free_port()
            log = tmp / f"redis-{self.port}.log"
            self.process = Process(
                [
                    redis_bin(),
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(tmp),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    *(extra or []),
                ],
                log,
                tmp,
            )
            if self._ready(10):
                return
            self.process.stop()
        pytest.fail(f"redis-server did not start:\n{_tail(log)}", pytrace=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _ready(self, within: float) -> bool:
        end = time.monotonic() + within
        while time.monotonic() < end and self.process.alive():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        self.process.stop()


def key_slot(key: str) -> int:
    """The Redis Cluster hash slot of ``key`` (CRC16-XMODEM of its hash tag, mod 16384)."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return binascii.crc_hqx(key.encode(), 0) % 16384


def command(port: int, *args: str) -> str:
    """One command to the redis-server on ``port``: its reply's line, or a bulk reply's
    text; raises on an error reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        request = [f"*{len(args)}\r\n"]
        request += [f"${len(a.encode())}\r\n{a}\r\n" for a in args]
        s.sendall("".join(request).encode())
        reply = b""
        while True:
            chunk = s.recv(65536)
            reply += chunk
            head, sep, rest = reply.partition(b"\r\n")
            complete = sep and (
                not head.startswith(b"$") or int(head[1:]) < 0 or len(rest) >= int(head[1:]) + 2
            )
            if complete or not chunk:
                break
    if head.startswith(b"-") or not sep:
        raise RuntimeError(f"redis-server :{port} answered {args} with {reply[:200]!r}")
    return (rest[:-2] if head.startswith(b"$") else head[1:]).decode()


class RedisCluster:
    """Three redis-server primaries of their own (no replicas), each serving a third of the
    hash slots, joined into one cluster."""

    def __init__(self, tmp: Path) -> None:
        self.nodes = [
            Redis(
                tmp / f"node-{i}",
                ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"],
            )
            for i in range(3)
        ]
        third = 16384 // 3
        self.ranges = [(0, third - 1), (third, 2 * third - 1), (2 * third, 16383)]
        for node, (first, last) in zip(self.nodes, self.ranges):
            command(node.port, "CLUSTER", "ADDSLOTSRANGE", str(first), str(last))
        for node in self.nodes[1:]:
            command(node.port, "CLUSTER", "MEET", "127.0.0.1", str(self.nodes[0].port))
        end = time.monotonic() + 30
        while not all("cluster_state:ok" in command(n.port, "CLUSTER", "INFO") for n in self.nodes):
            if time.monotonic() > end:
                self.stop()
                pytest.fail("the three redis-servers did not form a cluster in 30 s", pytrace=False)
            time.sleep(0.1)

    @property
    def url(self) -> str:
        seeds = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        return f"redis+cluster://{seeds}"

    def node_of(self, key: str) -> Redis:
        """The primary serving ``key``'s slot."""
        slot = key_slot(key)
        return next(n for n, (a, b) in zip(self.nodes, self.ranges) if a <= slot <= b)

    def stop(self) -> None:
        for n in self.nodes:
            n.process.signal(signal.SIGCONT)
            n.stop()


class Server:
    """A ``delayq serve`` of its own: embedded in a temporary data directory, or on
    ``redis`` (a URL); ``extra`` flags are passed on."""

    def __init__(
        self,
        tmp: Path,
        redis: Optional[str] = None,
        extra: Optional[List[str]] = None,
        port: Optional[int] = None,
        scheme: str = "http",
    ) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.tmp = tmp
        self.scheme = scheme
        for attempt in range(5):
            self.port = port or free_port()
            self.log = tmp / f"delayq-{self.port}-{attempt}.log"
            store = ["--redis", redis] if redis else ["--data-dir", str(tmp / f"data-{self.port}")]
            args = [delayq_bin(), "serve", "--listen", f"127.0.0.1:{self.port}", *store]
            self.process = Process(args + (extra or []), self.log, tmp)
            if self._ready(30):
                return
            self.process.stop()
            if port is not None or "in use" not in _tail(self.log):
                break
        pytest.fail(f"delayq serve did not become healthy:\n{_tail(self.log)}", pytrace=False)

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def _ready(self, within: float) -> bool:
        end = time.monotonic() + within
        while time.monotonic() < end and self.process.alive():
            try:
                r = httpx.get(f"{self.url}/healthz", timeout=1, verify=False)
                if r.status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        self.process.stop()


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


def kill(proc: subprocess.Popen[str], sig: int = signal.SIGKILL) -> None:
    """Sends ``sig`` to a child this test started, if it still runs."""
    if proc.poll() is None:
        os.kill(proc.pid, sig)
