#!/usr/bin/env bash
# The Node client's tests, the single entry the repository's test command calls.
#
# Installs the dev dependencies (typescript, @types/node) from package-lock.json with
# `npm ci` when node_modules is missing or older than the lock, type-checks and builds into
# dist/ (build.sh, which bench/run.sh calls too), then runs the unit and integration tests with Node's test runner. The integration
# tests start their own `delayq serve` ($DELAYQ_BIN, else <repo>/target/debug/delayq) and
# `redis-server` ($DELAYQ_REDIS_SERVER, else the one on the PATH) on free loopback ports.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"

fail() {
  echo "clients/node/test.sh: $*" >&2
  exit 1
}

command -v node >/dev/null || fail "node not found: install Node.js 20 or newer"
[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] || fail "Node.js 20 or newer is needed, found $(node --version)"
bin=${DELAYQ_BIN:-../../target/debug/delayq}
[ -x "$bin" ] || fail "no delayq binary at $bin: run \`cargo build --bin delayq\` at the repository's root, or set DELAYQ_BIN"
redis=${DELAYQ_REDIS_SERVER:-redis-server}
command -v "$redis" >/dev/null || fail "no $redis: install Redis 7 or newer (apt-get install redis-server), or set DELAYQ_REDIS_SERVER"
command -v openssl >/dev/null || fail "no openssl (the TLS test makes a certificate with it): apt-get install openssl"

# npm ci when node_modules is stale, then tsc into a fresh dist/.
./build.sh

export DELAYQ_BIN
DELAYQ_BIN=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
# Each test is bounded; a failed test may leave handles open (a worker it did not get to
# close), so the runner ends each file once its tests are done (Node 20.14 and newer), and
# the whole run is bounded too.
flags=(--test --test-timeout=120000)
if node --help | grep -q -- --test-force-exit; then
  flags+=(--test-force-exit)
fi
timeout 1200 node "${flags[@]}" dist/test/unit/*.test.js dist/test/integration/*.test.js
