#!/usr/bin/env bash
# The Python client's whole check: installs the locked dev tools into a venv under
# <repo>/target/ when missing or when the lock changed (venv.sh, which bench/run.sh calls
# too), type-checks (mypy --strict), then runs the unit and integration tests (pytest;
# arguments are passed on). The integration tests start their own `delayq serve`
# ($DELAYQ_BIN, else <repo>/target/debug/delayq) and redis-server ($DELAYQ_REDIS_SERVER,
# else redis-server on the PATH) on free loopback ports.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$repo/target/py-client-venv"

# The venv (made or refreshed when the lock, pyproject.toml or the Python changed).
"$here/venv.sh"

export DELAYQ_BIN="${DELAYQ_BIN:-$repo/target/debug/delayq}"
if [ ! -x "$DELAYQ_BIN" ]; then
    echo "test.sh: no delayq binary at $DELAYQ_BIN: build it (cargo build -p delayq-cli) or set DELAYQ_BIN" >&2
    exit 1
fi

# Nothing written into the source tree: caches go under target/ too.
export PYTHONDONTWRITEBYTECODE=1
export MYPY_CACHE_DIR="$repo/target/py-client-cache/mypy"
export RUFF_CACHE_DIR="$repo/target/py-client-cache/ruff"

cd "$here"
echo "test.sh: ruff, mypy --strict" >&2
"$venv/bin/ruff" check --quiet
"$venv/bin/ruff" format --check --quiet
"$venv/bin/mypy" --strict
echo "test.sh: pytest" >&2
exec "$venv/bin/pytest" "$@"
