#!/usr/bin/env bash
# Makes <repo>/target/py-client-venv, the Python client's venv (the locked dev tools and the
# client itself, editable), when it is missing or when requirements-dev.lock, pyproject.toml
# or the Python changed; prints nothing else. test.sh and bench/run.sh (the side-by-side
# suite runs bench/throughput.py with it) both call it. $PYTHON names the Python (python3).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$repo/target/py-client-venv"
python="${PYTHON:-python3}"

if ! command -v "$python" >/dev/null; then
    echo "clients/python/venv.sh: $python not found: install Python 3.9 or newer (apt-get install python3 python3-venv)" >&2
    exit 1
fi

want="$(cat "$here/requirements-dev.lock" "$here/pyproject.toml" <("$python" -VV) | sha256sum | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
    echo "clients/python/venv.sh: making $venv from requirements-dev.lock" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)
    "${pip[@]}" install --require-hashes --only-binary :all: -r "$here/requirements-dev.lock"
    "${pip[@]}" install --no-deps --no-build-isolation -e "$here"
    echo "$want" >"$venv/.stamp"
fi
