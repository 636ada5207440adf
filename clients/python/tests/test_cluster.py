"""The client against a server on a real Redis Cluster of three primaries, one of which
stops answering (SIGSTOP: its connections stay open and nothing answers).

A batch push to a topic partitioned over every primary stores the healthy primaries' jobs
and raises :class:`delayq.UnavailableError` whose ``results`` say which were stored and
whose ``ids`` give every job's id, generated ones included; pushed again with those ids once
the primary answers, the jobs not stored are stored, and the topic holds every job once.

See: issue 37.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest
from harness import RedisCluster, Server

import delayq
from delayq import Client, NewJob, TopicConfig

JOBS = 90


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RedisCluster]:
    c = RedisCluster(tmp_path / "cluster")
    try:
        yield c
    finally:
        c.stop()


def test_a_partial_batch_push_says_which_jobs_were_stored(
    cluster: RedisCluster, tmp_path: Path
) -> None:
    # See: issue 37
    # The stopped primary holds neither the topic registry nor the paused set (both read
    # by a push that lists its topic) nor the topic's home (its settings and count); the
    # topic's 32 partitions lie on every primary (on two of three: 2.3 in a million).
    held = {cluster.node_of("delayq:topics").port, cluster.node_of("delayq:paused").port}
    stopped = next(n for n in cluster.nodes if n.port not in held)
    topic = next(
        t
        for t in (f"parted-{k}" for k in range(10_000))
        if cluster.node_of(f"delayq:{{{t}}}:wake") is not stopped
    )
    server = Server(tmp_path / "server", redis=cluster.url)
    try:
        with Client(server.url, timeout=60) as client:
            client.set_topic_config(topic, TopicConfig(partitions=32))
            assert client.topic_config(topic).partitions == 32
            client.push(topic, "first")

            stopped.process.signal(signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(delayq.UnavailableError) as raised:
                    client.push_batch(topic, [NewJob(body=f"job {i}") for i in range(JOBS)])
                took = time.monotonic() - started
            finally:
                stopped.process.signal(signal.SIGCONT)
            e = raised.value
            # The slot timeout (500 ms), not the response timeout (10 s).
            assert took < 5, f"the batch waited on the stopped primary: {took:.1f} s"
            assert e.results is not None and e.ids is not None, e
            assert len(e.results) == len(e.ids) == JOBS
            stored = [i for i, r in enumerate(e.results) if r is not None]
            failed = [i for i, r in enumerate(e.results) if r is None]
            assert stored and failed, e.results
            assert e.index == failed[0]
            assert f"{len(stored)} of {JOBS} jobs were stored" in e.message
            for i in stored:
                r = e.results[i]
                assert r is not None and r.created and r.id == e.ids[i]
                assert client.get(topic, e.ids[i]).body == f"job {i}".encode()

            # Pushed again with their ids, the jobs not stored are stored once (a late call
            # of the stopped primary may have stored one first: then `created` is false).
            again = [NewJob(body=f"job {i}", id=e.ids[i]) for i in failed]
            deadline = time.monotonic() + 30
            answered: Optional[list[delayq.PushResult]] = None
            while answered is None:
                try:
                    answered = client.push_batch(topic, again)
                except delayq.UnavailableError:
                    assert time.monotonic() < deadline, "30 s after SIGCONT"
                    time.sleep(0.2)
            assert [r.id for r in answered] == [e.ids[i] for i in failed]
            assert client.stats(topic).ready == JOBS + 1
    finally:
        server.stop()
