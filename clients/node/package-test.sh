#!/usr/bin/env bash
# The Node client as a user gets it: packs it with `npm pack` (building dist/ first when
# it is missing or older than src/), installs the tarball into a new Node project in a
# temporary directory (a copy in its node_modules, not a link to the checkout), type-checks
# a TypeScript smoke against the package's own .d.ts (strict, the dev tools' typescript and
# @types/node) and runs it there: import delayq, push, reserve and ack a job against a
# real `delayq serve` ($DELAYQ_BIN, else <repo>/target/debug/delayq; embedded engine, on a
# loopback port the kernel picks). Takes about 10 s; leaves nothing behind but the
# tarball, in <repo>/target/node-client-dist.
set -euo pipefail
cd "$(dirname "$0")"
here="$(pwd)"
repo="$(cd ../.. && pwd)"
out="$repo/target/node-client-dist"

fail() {
  echo "clients/node/package-test.sh: $*" >&2
  exit 1
}

bin=${DELAYQ_BIN:-$repo/target/debug/delayq}
[ -x "$bin" ] || fail "no delayq binary at $bin: run \`cargo build --bin delayq\` at the repository's root, or set DELAYQ_BIN"

if [ ! -f dist/src/index.js ] || [ -n "$(find src package.json tsconfig.json -newer dist/src/index.js -print -quit)" ]; then
  ./build.sh
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/delayq-node-package.XXXXXX")"
server=""
cleanup() {
  if [ -n "$server" ]; then
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The tarball, and what is in it: the compiled package, its types, README and package.json.
rm -rf "$out"
mkdir -p "$out"
tarball="$out/$(npm pack --silent --pack-destination "$out" | tail -n1)"
[ -f "$tarball" ] || fail "npm pack made no tarball in $out"
contents="$(tar -tzf "$tarball")"
for want in package/package.json package/README.md package/dist/src/index.js package/dist/src/index.d.ts; do
  grep -qx "$want" <<<"$contents" || fail "$want is not in $(basename "$tarball"):"$'\n'"$contents"
done
if grep -Eq '^package/((dist/)?(test|tools|bench|examples)|src)/' <<<"$contents"; then
  fail "$(basename "$tarball") carries more than the package:"$'\n'"$contents"
fi
echo "package-test.sh: packed $(basename "$tarball") ($(wc -l <<<"$contents") files)" >&2

# A new project that depends on the tarball (the package has no dependencies: nothing is
# fetched).
app="$tmp/app"
mkdir -p "$app"
cat >"$app/package.json" <<'EOF'
{ "name": "delayq-package-test", "version": "1.0.0", "private": true, "type": "module" }
EOF
(cd "$app" && npm install --silent --no-audit --no-fund "$tarball")
[ -d "$app/node_modules/delayq" ] && [ ! -L "$app/node_modules/delayq" ] ||
  fail "node_modules/delayq is not a copy of the package"

cat >"$app/tsconfig.json" <<EOF
{
  "compilerOptions": {
    "target": "ES2022",
    "module": "NodeNext",
    "moduleResolution": "NodeNext",
    "strict": true,
    "typeRoots": ["$here/node_modules/@types"],
    "types": ["node"],
    "outDir": "out"
  },
  "files": ["smoke.ts"]
}
EOF
cat >"$app/smoke.ts" <<'EOF'
import assert from "node:assert/strict";
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";

import { Client, NotFoundError, type Delivery } from "delayq";

const [url, topic] = process.argv.slice(2) as [string, string];
const where = realpathSync(fileURLToPath(import.meta.resolve("delayq")));
assert.ok(where.startsWith(realpathSync(process.cwd())), `delayq resolved to ${where}, outside the project`);

const client = new Client({ url });
const pushed = await client.push(topic, "hello", { id: "smoke-1" });
assert.ok(pushed.created);
const { deliveries } = await client.reserve([topic], { max: 1, waitMs: 5_000 });
const delivery: Delivery | undefined = deliveries[0];
assert.ok(delivery !== undefined, "nothing reserved");
assert.deepEqual([delivery.id, delivery.job.text(), delivery.job.attempts], ["smoke-1", "hello", 1]);
await client.ack(delivery);
await assert.rejects(client.get(topic, "smoke-1"), NotFoundError);
console.error(`package-test.sh: delayq from ${where}: push, reserve, ack ok`);
EOF
(cd "$app" && node "$here/node_modules/typescript/bin/tsc" -p .) ||
  fail "the smoke does not type-check against the package's types"

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

(cd "$app" && node out/smoke.js "$url" package-test.node)
