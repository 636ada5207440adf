#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this).
#
# Installs redis-server when it is missing (Debian/Ubuntu, with apt-get), then checks
# formatting and lints, runs every test (they start their own redis-server processes on
# free loopback ports; none touches a Redis it did not start) and builds the docs.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${DELAYQ_REDIS_SERVER:-}" ] && ! command -v redis-server >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "redis-server is missing: installing Debian's redis-server package"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server
  else
    echo "redis-server is missing. Install Redis 7 (macOS: brew install redis; Fedora: sudo dnf install redis)" >&2
    echo "or set DELAYQ_REDIS_SERVER to the path of a redis-server binary." >&2
    exit 1
  fi
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
