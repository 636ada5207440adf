#!/usr/bin/env bash
# Builds the Node client into dist/ (library, tests, bench/w1.js): installs the dev
# dependencies from package-lock.json with `npm ci` when node_modules is missing or older
# than the lock, then type-checks and compiles afresh (tsc -p .). test.sh and bench/run.sh
# (the side-by-side suite runs dist/bench/w1.js) both call it.
set -euo pipefail
cd "$(dirname "$0")"

command -v node >/dev/null || { echo "clients/node/build.sh: node not found: install Node.js 20 or newer" >&2; exit 1; }

# npm ci leaves node_modules/.package-lock.json: older than the lock means a stale install.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

rm -rf dist
npx --no-install tsc -p .
