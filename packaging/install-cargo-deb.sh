#!/usr/bin/env bash
# Installs cargo-deb (pinned) into target/cargo-deb when it is missing or another version,
# never globally. Prints nothing when it is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0
root=target/cargo-deb
if ! "$root/bin/cargo-deb" --version 2>/dev/null | grep -qx "cargo-deb $CARGO_DEB_VERSION"; then
  echo "installing cargo-deb $CARGO_DEB_VERSION into $root"
  cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION" --root "$root" --quiet
fi
