#!/usr/bin/env bash
# Builds the Debian package (packaging/build-deb.sh), checks its control data and contents,
# unpacks it into a temporary directory with `dpkg-deb -x` (the machine's own package
# database and files are never touched, and no maintainer script runs), then starts the
# unpacked binary exactly as the unpacked unit's ExecStart says, with the unpacked config
# file, on 127.0.0.1 with a free port (DELAYQ_LISTEN=127.0.0.1:0, read back from its log)
# and a temporary data directory (DELAYQ_DATA_DIR), both given as systemd's EnvironmentFile
# would give them. It checks /healthz and /readyz, pushes and reads a job with the unpacked
# CLI, then stops the server with SIGTERM by its PID and checks that it stopped cleanly.
# Nothing is started through the machine's systemd.
set -euo pipefail
cd "$(dirname "$0")/.."

# The server takes its settings from DELAYQ_* variables: only the ones set here count.
for name in $(compgen -e); do
  case "$name" in DELAYQ_*) unset "$name" ;; esac
done

deb=$(packaging/build-deb.sh | tail -n 1)
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

passed=0
fail() {
  echo "packaging test FAILED: $*" >&2
  if [ -f "$tmp/serve.log" ]; then
    echo "--- server log ---" >&2
    cat "$tmp/serve.log" >&2
  fi
  exit 1
}
ok() {
  passed=$((passed + 1))
  echo "ok: $*"
}

# Control data: name, dependencies found by dpkg-shlibdeps, conffiles, and the maintainer
# scripts cargo-deb generated for the unit.
info=$(dpkg-deb -I "$deb")
grep -q '^ Package: delayq$' <<<"$info" || fail "Package is not delayq: $info"
grep -q '^ Depends: .*libc6' <<<"$info" || fail "no libc6 in Depends: $info"
[ "$(dpkg-deb -f "$deb" Section)" = net ] || fail "Section is not net"
dpkg-deb --ctrl-tarfile "$deb" | tar -x -C "$tmp" ./conffiles ./postinst ./prerm ./postrm
[ "$(sort "$tmp/conffiles")" = "$(printf '/etc/default/delayq\n/etc/delayq/delayq.toml')" ] ||
  fail "conffiles: $(cat "$tmp/conffiles")"
grep -q 'deb-systemd-helper enable delayq.service' "$tmp/postinst" || fail "postinst does not enable the unit"
grep -q 'deb-systemd-invoke $_dh_action delayq.service' "$tmp/postinst" || fail "postinst does not start the unit"
grep -q 'deb-systemd-invoke stop delayq.service' "$tmp/prerm" || fail "prerm does not stop the unit"
ok "control data: $(dpkg-deb -f "$deb" Package Version Depends | tr '\n' ' ')"

# Contents: every file in its place, with its mode.
contents=$(dpkg-deb -c "$deb")
for entry in \
  '-rwxr-xr-x ./usr/bin/delayq' \
  '-rw-r--r-- ./usr/lib/systemd/system/delayq.service' \
  '-rw-r--r-- ./etc/delayq/delayq.toml' \
  '-rw------- ./etc/default/delayq' \
  '-rw-r--r-- ./usr/share/man/man1/delayq.1.gz' \
  '-rw-r--r-- ./usr/share/man/man1/delayq-serve.1.gz' \
  '-rw-r--r-- ./usr/share/man/man1/delayq-dead-list.1.gz' \
  '-rw-r--r-- ./usr/share/bash-completion/completions/delayq' \
  '-rw-r--r-- ./usr/share/zsh/vendor-completions/_delayq' \
  '-rw-r--r-- ./usr/share/fish/vendor_completions.d/delayq.fish' \
  '-rw-r--r-- ./usr/share/doc/delayq/copyright' \
  '-rw-r--r-- ./usr/share/doc/delayq/README.md'; do
  mode=${entry%% *}
  path=${entry#* }
  awk -v mode="$mode" -v path="$path" '$1 == mode && $NF == path { found = 1 } END { exit !found }' <<<"$contents" ||
    fail "$path with mode $mode is not in the package"
done
ok "contents: $(grep -c '^-' <<<"$contents") files"

root="$tmp/root"
dpkg-deb -x "$deb" "$root"
unit="$root/usr/lib/systemd/system/delayq.service"
cmp -s "$unit" packaging/systemd/delayq.service || fail "the packaged unit differs from packaging/systemd/delayq.service"
# Every manual page the unit names is in the package.
for page in $(sed -n 's/^Documentation=//p' "$unit" | tr ' ' '\n' | sed -n 's/^man:\(.*\)(1)$/\1/p'); do
  [ -f "$root/usr/share/man/man1/$page.1.gz" ] || fail "the unit names man:$page(1), which is not packaged"
done
# (Outputs go through variables: `grep -q` closing a pipe early would fail it under pipefail.)
page=$(zcat "$root/usr/share/man/man1/delayq-serve.1.gz")
grep -q 'listen' <<<"$page" || fail "delayq-serve(1) does not document --listen"
bash -c "source '$root/usr/share/bash-completion/completions/delayq' && complete -p delayq" >/dev/null ||
  fail "bash does not load the packaged completion"
version=$("$root/usr/bin/delayq" --version)
grep -q '^delayq ' <<<"$version" || fail "the packaged binary does not run"
ok "unpacked: the unit as in packaging/, its manual pages, the completions, the binary"

# The unit's command line, with the unpacked paths for /usr/bin and /etc.
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
read -r -a command <<<"$exec_start"
command=("${command[@]//\/usr\/bin\//$root/usr/bin/}")
command=("${command[@]//\/etc\//$root/etc/}")
[ "${command[0]}" = "$root/usr/bin/delayq" ] || fail "ExecStart does not run /usr/bin/delayq: $exec_start"

data="$tmp/data"
DELAYQ_LISTEN=127.0.0.1:0 DELAYQ_DATA_DIR="$data" "${command[@]}" 2>"$tmp/serve.log" &
pid=$!
url=""
for _ in $(seq 300); do
  url=$(sed -n 's/.*serving on \(http:\/\/127\.0\.0\.1:[0-9]*\).*/\1/p' "$tmp/serve.log" | head -n 1)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || fail "the server exited at start"
  sleep 0.1
done
[ -n "$url" ] || fail "the server did not say where it listens within 30 s"
[ "$(curl -fsS "$url/healthz")" = ok ] || fail "/healthz at $url"
curl -fsS -o /dev/null "$url/readyz" || fail "/readyz at $url"
"$root/usr/bin/delayq" push packaged "from the deb" --id deb-1 --server "$url" >/dev/null || fail "push"
job=$("$root/usr/bin/delayq" get packaged deb-1 --server "$url") || fail "get"
grep -q 'from the deb' <<<"$job" || fail "get: $job"
[ -f "$data/delayq.lock" ] || fail "no data in $data (DELAYQ_DATA_DIR ignored?)"
ok "served on $url from the unpacked package: /healthz, /readyz, push and get"

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
[ "$status" -eq 0 ] || fail "the server exited with status $status after SIGTERM"
grep -q 'stopped' "$tmp/serve.log" || fail "the server did not log that it stopped"
ok "stopped cleanly on SIGTERM"

echo "packaging: $passed passed, 0 failed"
