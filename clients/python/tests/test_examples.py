"""The examples, run as they are against a real server: the order pushed for later is
cancelled by the worker when due, and the worker stops cleanly on SIGTERM."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from harness import CLIENT_DIR

import delayq

EXAMPLES = CLIENT_DIR / "examples"


def test_cancel_an_unpaid_order(url: str) -> None:
    env = {**os.environ, "DELAYQ_SERVER": url, "ORDER_CANCEL_DELAY": "2"}
    with delayq.Client(url) as client:
        # A topic the server has not seen yet has nothing to purge (404 not_found).
        with contextlib.suppress(delayq.NotFoundError):
            client.purge("orders")
        pushed = subprocess.run(
            [sys.executable, str(EXAMPLES / "order_cancel.py")],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert pushed.stdout.startswith("pushed order-42, due at ")
        assert client.get("orders", "order-42").state == "delayed"
    started = time.monotonic()
    worker = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "order_worker.py")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line == "cancelled order 42 (attempt 1)\n"
        assert time.monotonic() - started > 0.5, "not before it was due"
        with delayq.Client(url) as client:
            deadline = time.monotonic() + 5
            while client.stats("orders").reserved and time.monotonic() < deadline:
                time.sleep(0.05)
            assert client.stats("orders").reserved == 0, "acked"
        worker.send_signal(signal.SIGTERM)
        out, log = worker.communicate(timeout=15)
        assert worker.returncode == 0 and "acked=1" in out
        # Its log has the worker's own lines at INFO, and no line per long-poll (httpx logs
        # each request at INFO; the example keeps it to warnings).
        assert "INFO:delayq.worker:worker started" in log, log
        assert "HTTP Request" not in log and "/v1/reserve" not in log, log
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
