#!/usr/bin/env bash
# The Python client as a user gets it: builds the sdist, then the wheel from the unpacked
# sdist (as `python -m build` does, so a file the sdist lacks fails here), installs the
# wheel into a new venv and the sdist into another (each in a temporary directory, httpx
# and hatchling from PyPI), and in each, from outside the checkout, imports delayq and
# pushes, reserves and acks a job against a real `delayq serve` ($DELAYQ_BIN, else
# <repo>/target/debug/delayq; embedded engine, on a loopback port the kernel picks).
# The build backend comes from the dev venv (venv.sh). Takes about 20 s; leaves nothing
# behind but the artifacts, in <repo>/target/py-client-dist.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$repo/target/py-client-venv"
dist="$repo/target/py-client-dist"
python="${PYTHON:-python3}"

fail() {
    echo "clients/python/package-test.sh: $*" >&2
    exit 1
}

bin="${DELAYQ_BIN:-$repo/target/debug/delayq}"
[ -x "$bin" ] || fail "no delayq binary at $bin: build it (cargo build -p delayq-cli) or set DELAYQ_BIN"

"$here/venv.sh"
export PYTHONDONTWRITEBYTECODE=1

tmp="$(mktemp -d "${TMPDIR:-/tmp}/delayq-py-package.XXXXXX")"
server=""
cleanup() {
    if [ -n "$server" ]; then
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# The artifacts: the sdist from the checkout, the wheel from the sdist.
rm -rf "$dist"
mkdir -p "$dist"
(cd "$here" && "$venv/bin/python" -m hatchling build -t sdist -d "$dist" >/dev/null)
sdist=("$dist"/delayq-*.tar.gz)
tar -xzf "${sdist[0]}" -C "$tmp"
(cd "$tmp"/delayq-*/ && "$venv/bin/python" -m hatchling build -t wheel -d "$dist" >/dev/null)
wheel=("$dist"/delayq-*.whl)
echo "package-test.sh: built $(basename "${sdist[0]}") and, from it, $(basename "${wheel[0]}")" >&2
# The wheel is the package and its type marker; tests, tools and examples stay out of it.
contents="$("$venv/bin/python" -m zipfile -l "${wheel[0]}")"
grep -q "delayq/py.typed" <<<"$contents" || fail "the wheel lacks delayq/py.typed"
if grep -Eq "(^| )(tests|tools|examples)/" <<<"$contents"; then
    fail "the wheel carries more than the package:"$'\n'"$contents"
fi

# A server of its own, on a port the kernel picks; the log names it once it listens.
"$bin" serve --listen 127.0.0.1:0 --data-dir "$tmp/data" >"$tmp/serve.log" 2>&1 &
server=$!
url=""
for _ in $(seq 200); do
    url="$(grep -o 'serving on http://127\.0\.0\.1:[0-9]*' "$tmp/serve.log" | head -n1 | cut -d' ' -f3)" || true
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || fail "delayq serve exited at start; its log:"$'\n'"$(cat "$tmp/serve.log")"
    sleep 0.05
done
[ -n "$url" ] || fail "delayq serve did not listen within 10 s; its log:"$'\n'"$(cat "$tmp/serve.log")"

# The smoke, run by a venv's python in isolated mode (-I: no PYTHONPATH, no user site, not
# the current directory) from the temporary directory.
cat >"$tmp/smoke.py" <<'EOF'
import sys
from pathlib import Path

import delayq

url, topic = sys.argv[1], sys.argv[2]
where = Path(delayq.__file__).resolve()
assert Path(sys.prefix).resolve() in where.parents, f"delayq imported from {where}, not the venv"
assert (where.parent / "py.typed").is_file(), "no py.typed"
with delayq.Client(url) as client:
    pushed = client.push(topic, "hello", id="smoke-1")
    assert pushed.created, pushed
    (delivery,) = client.reserve(topic, max=1, wait=5).deliveries
    assert (delivery.job.id, delivery.job.text, delivery.job.attempts) == ("smoke-1", "hello", 1)
    client.ack(delivery)
    try:
        client.get(topic, "smoke-1")
        raise AssertionError("the acked job is still there")
    except delayq.NotFoundError:
        pass
print(f"package-test.sh: delayq {delayq.__version__} from {where.parent}: push, reserve, ack ok")
EOF

smoke() {
    local name=$1 artifact=$2
    "$python" -m venv "$tmp/$name"
    "$tmp/$name/bin/python" -m pip install --quiet --disable-pip-version-check "$artifact"
    (cd "$tmp" && "$tmp/$name/bin/python" -I smoke.py "$url" "package-test.$name") >&2
}
smoke wheel-venv "${wheel[0]}"
smoke sdist-venv "${sdist[0]}"
