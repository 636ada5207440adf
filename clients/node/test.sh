#!/usr/bin/env bash
# The Node client's tests, which the repository's test command calls (and then
# package-test.sh: the client as a user installs it, from its `npm pack` tarball).
#
# Installs the dev dependencies (typescript, @types/node) from package-lock.json with
# `npm ci` when node_modules is missing or older than the lock, type-checks and builds into
# dist/ (build.sh, which bench/run.sh calls too), then runs the unit and integration tests with Node's test runner. The integration
# tests start their own `delayq serve` ($DELAYQ_BIN, else <repo>/target/debug/delayq) and
# `redis-server` ($DELAYQ_REDIS_SERVER, else the one on the PATH) on free loopback ports.
# Exits non-zero on any failure, after naming the failing tests.
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
# TAP on standard output, and kept in a file: when a test failed, its name, place and error
# are printed again last, so that the end of the output says which.
mkdir -p ../../target
tap=../../target/node-client-tests.tap
status=0
timeout 1200 node "${flags[@]}" dist/test/unit/*.test.js dist/test/integration/*.test.js | tee "$tap" || status=$?
if [ "$status" -ne 0 ]; then
  if [ "$status" -eq 124 ]; then
    echo "clients/node/test.sh: the tests did not end within 1200 s" >&2
  fi
  echo "clients/node/test.sh: failed:" >&2
  awk '/^ *not ok / { sub(/^ */, ""); print "  " $0; block = 1; next }
       block && /^ *(location|error):/ { sub(/^ */, ""); print "      " $0 }
       /^ *\.\.\.$/ { block = 0 }' "$tap" >&2
  fail "the Node client's tests failed (exit $status); their whole output: target/node-client-tests.tap"
fi
