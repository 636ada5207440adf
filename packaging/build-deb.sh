#!/usr/bin/env bash
# Builds the Debian package target/debian/delayq_<version>-1_<arch>.deb and prints its path.
#
# 1. `cargo build --release` of the delayq binary;
# 2. with that binary, the manual pages (`delayq man --dir`) and the shell completions
#    (`delayq completions bash|zsh|fish`) into target/packaging/, where the assets of
#    [package.metadata.deb] in crates/cli/Cargo.toml find them;
# 3. `cargo deb --no-build` (cargo-deb installed into target/cargo-deb when missing).
#
# Generating them from the binary keeps them identical to its --help. A bare `cargo deb`
# fails on the missing target/packaging files instead of making a package without them.
set -euo pipefail
cd "$(dirname "$0")/.."

packaging/install-cargo-deb.sh
cargo build --release --locked -p delayq-cli
target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
bin="$target_dir/release/delayq"

# Always target/packaging (not $target_dir): the assets name it relative to the crate.
out=target/packaging
rm -rf "$out"
mkdir -p "$out/completions"
"$bin" man --dir "$out/man"
"$bin" completions bash > "$out/completions/delayq.bash"
"$bin" completions zsh > "$out/completions/_delayq"
"$bin" completions fish > "$out/completions/delayq.fish"

PATH="$PWD/target/cargo-deb/bin:$PATH" cargo deb -p delayq-cli --no-build --locked --quiet
