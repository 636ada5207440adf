# Sourced by bench/run.sh and bench/compare.sh (from the repository's root): installs what
# the side-by-side suite needs when it is missing and exports where it is:
# - beanstalkd and PostgreSQL from Debian (apt-get; the testkit finds Debian's initdb under
#   /usr/lib/postgresql/<version>/bin, or the directory DELAYQ_POSTGRES_BIN names);
# - BullMQ and pg-boss from bench/package-lock.json (npm ci, with the machine's Node >= 20);
# - matplotlib into target/bench-venv (DELAYQ_BENCH_PYTHON);
# - the Python client's venv target/py-client-venv (DELAYQ_BENCH_CLIENT_PYTHON) and the Node
#   client's dist/;
# - Redis 8.6 into target/redis86 (DELAYQ_REDIS_SERVER), or DELAYQ_BENCH_REDIS_SERVER.

MATPLOTLIB_VERSION=3.10.7
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

command -v beanstalkd >/dev/null 2>&1 || [ -n "${DELAYQ_BENCH_BEANSTALKD:-}" ] || apt_install beanstalkd
# PostgreSQL for delayq-postgres and pg-boss: Debian keeps initdb off the PATH, under
# /usr/lib/postgresql/<version>/bin.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
  && [ -z "${DELAYQ_POSTGRES_BIN:-}" ]; then
  apt_install postgresql
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  apt_install nodejs npm
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "BullMQ's and pg-boss's side needs Node 20 or later; this machine has $(node --version)" >&2
  exit 1
fi

# BullMQ and pg-boss, exactly as locked. Reinstalled only when the lock file changed.
if ! cmp -s bench/package-lock.json bench/node_modules/.delayq-lock 2>/dev/null; then
  (cd bench && npm ci --no-audit --no-fund --loglevel=error)
  cp bench/package-lock.json bench/node_modules/.delayq-lock
fi

venv=target/bench-venv
if ! "$venv/bin/python" -c "import matplotlib" >/dev/null 2>&1; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
    apt_install python3 python3-venv
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "matplotlib==$MATPLOTLIB_VERSION"
fi
export DELAYQ_BENCH_PYTHON="$PWD/$venv/bin/python"

# The official clients' workers (W1's client-python and client-node): the Python client's
# venv, made or refreshed as its test.sh does, and the Node client built into dist/.
clients/python/venv.sh
export DELAYQ_BENCH_CLIENT_PYTHON="$PWD/target/py-client-venv/bin/python"
clients/node/build.sh

# Redis 8.6, the one binary every Redis-based system runs on (the suite starts each one
# through testkit, which runs DELAYQ_REDIS_SERVER).
if [ -n "${DELAYQ_BENCH_REDIS_SERVER:-}" ]; then
  DELAYQ_REDIS_SERVER=$DELAYQ_BENCH_REDIS_SERVER
else
  DELAYQ_REDIS_SERVER=$(bench/install-redis.sh "$venv/bin/python")
fi
export DELAYQ_REDIS_SERVER
