#!/usr/bin/env bash
# A/B: the working tree (A) against another revision (B), on this machine, interleaved.
#
#   bench/compare.sh REV [--pairs N] [-- SUITE OPTIONS]
#
# Builds REV's delayq-bench and delayq (release) in a git worktree beside this one, with a
# target directory of its own (target/compare/<commit>/), and the working tree's in the
# usual target/release; then runs the side-by-side suite with SUITE OPTIONS (default:
# --only w1 --systems delayq-redis,chasquimq) as A, B, A, B, … for N pairs (default 3; the
# order within a pair alternates, so neither side always runs on a warmer machine), every
# run on the same Redis binary and the same installed peers (bench/setup.sh). Each run keeps
# its logs and results.json under target/compare/runs/<n>-<A|B>/. At the end
# bench/compare.py prints, for every figure both sides measured, A's and B's median over
# the pairs and the ratio A/B pair by pair with its median; the last lines say which
# commit each side is and whether the working tree was dirty.
#
# Quote that table in the commit message of a change to the engines, the worker or the
# server. SUITE OPTIONS must choose a part (--only and/or --systems): a whole run would
# rewrite BENCHMARKS.md on both sides. Systems whose drivers live outside the Rust binary
# (bullmq, pg-boss, client-python, client-node) run from B's worktree with the Node
# packages and clients installed for the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: bench/compare.sh REV [--pairs N] [-- suite options]"; }
[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
rev=$1; shift
pairs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) pairs=${2:?--pairs takes a number}; shift 2 ;;
    --) shift; break ;;
    *) usage >&2; echo "suite options go after --, e.g. bench/compare.sh $rev -- $1" >&2; exit 2 ;;
  esac
done
if ! [[ "$pairs" =~ ^[1-9][0-9]*$ ]]; then
  echo "--pairs takes a whole number of at least 1, not '$pairs'" >&2
  exit 2
fi
suite=("$@")
if [ ${#suite[@]} -eq 0 ]; then
  suite=(--only w1 --systems delayq-redis,chasquimq)
fi
case " ${suite[*]} " in
  *" --only "*|*" --systems "*) ;;
  *) echo "choose a part of the suite with --only and/or --systems (a whole run rewrites BENCHMARKS.md)" >&2; exit 2 ;;
esac
case " ${suite[*]} " in
  *" --work "*|*" --markdown "*|*" --plots "*)
    echo "compare.sh sets --work itself; --markdown and --plots have no place in an A/B run" >&2; exit 2 ;;
esac

commit=$(git rev-parse --verify --quiet "$rev^{commit}") || {
  echo "no such revision: $rev" >&2
  exit 2
}
head=$(git rev-parse HEAD)
dirty=clean
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then dirty=dirty; fi

root=$PWD
work=$root/target/compare
tree=$work/$commit/src
mkdir -p "$work"
if [ ! -d "$tree" ]; then
  git worktree add --detach "$tree" "$commit" >/dev/null
fi
. bench/setup.sh

# Node packages and built clients are the working tree's (bench/setup.sh installed them):
# B's suite and scripts find them in place.
for dir in bench/node_modules clients/node/node_modules clients/node/dist; do
  if [ -d "$root/$dir" ] && [ -d "$(dirname "$tree/$dir")" ] && [ ! -e "$tree/$dir" ]; then
    ln -s "$root/$dir" "$tree/$dir"
  fi
done

echo "building B ($commit) in $tree"
(cd "$tree" && cargo build --release --locked --quiet -p delayq-bench -p delayq-cli \
  --target-dir "$work/$commit/target")
echo "building A (the working tree at $head, $dirty)"
cargo build --release --locked --quiet -p delayq-bench -p delayq-cli
a_bin=$root/target/release
b_bin=$work/$commit/target/release

rm -rf "$work/runs"
mkdir -p "$work/runs"
run_side() { # run_side PAIR SIDE BINDIR
  local out=$work/runs/$1-$2
  echo "pair $1, $2: ${suite[*]}"
  DELAYQ_BIN="$3/delayq" "$3/delayq-bench" all "${suite[@]}" --work "$out" >"$out.log" 2>&1 || {
    tail -40 "$out.log" >&2
    echo "pair $1, $2 failed: the whole log is $out.log" >&2
    exit 1
  }
}
for i in $(seq 1 "$pairs"); do
  if [ $((i % 2)) -eq 1 ]; then
    run_side "$i" A "$a_bin"; run_side "$i" B "$b_bin"
  else
    run_side "$i" B "$b_bin"; run_side "$i" A "$a_bin"
  fi
done

"$DELAYQ_BENCH_PYTHON" bench/compare.py --runs "$work/runs" --pairs "$pairs" \
  --a "working tree at ${head:0:10} ($dirty)" --b "${commit:0:10} ($rev)"
