"""Prints an A/B table from the runs bench/compare.sh made.

Reads target/compare/runs/<pair>-<A|B>/results.json, flattens every workload's rows into
figures (a row is named by its system and its size fields, a figure is each median the
row holds, or each count), and prints for every figure both sides measured: A's median
over the pairs, B's, the ratio A/B of each pair, and the median of those ratios. Written
against the results' JSON shape loosely (names, not types), so that an older revision's
results read as well as today's.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

# Fields that name a row rather than measure it.
NAMING = {
    "system", "consumers", "level", "pending", "partitions", "workers", "nodes", "size",
    # W8's rows: a deployment and workload, a failover's way, wait-replicas, full coverage.
    "deployment", "workload", "how", "wait_replicas", "full_coverage",
}


def figures(results):
    """{(workload, row name, figure): value} for one run."""
    out = {}
    for workload, rows in results.items():
        if not (workload.startswith("w") and isinstance(rows, list)):
            continue
        for row in rows:
            if not isinstance(row, dict):
                continue
            name = " ".join(
                f"{k}={row[k]}" if k != "system" else str(row[k])
                for k in sorted(row, key=lambda k: (k != "system", k))
                if k in NAMING and isinstance(row[k], (str, int))
            )
            for k, v in row.items():
                if k in NAMING:
                    continue
                if isinstance(v, dict) and isinstance(v.get("median"), (int, float)):
                    out[(workload, name, k)] = float(v["median"])
                elif isinstance(v, (int, float)) and not isinstance(v, bool):
                    out[(workload, name, k)] = float(v)
    return out


def ratio(a, b):
    if b == 0:
        return float("nan") if a != 0 else 1.0
    return a / b


def fmt(v):
    if v != v:  # NaN
        return "—"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", type=Path, required=True)
    p.add_argument("--pairs", type=int, required=True)
    p.add_argument("--a", required=True, help="what A is")
    p.add_argument("--b", required=True, help="what B is")
    args = p.parse_args()

    sides = {"A": [], "B": []}
    for i in range(1, args.pairs + 1):
        for side in sides:
            path = args.runs / f"{i}-{side}" / "results.json"
            try:
                sides[side].append(figures(json.loads(path.read_text())))
            except (OSError, ValueError) as e:
                sys.exit(f"cannot read {path}: {e}")

    keys = [k for k in sides["A"][0] if all(k in r for s in sides.values() for r in s)]
    only = {k for s in sides.values() for r in s for k in r} - set(keys)
    rows = []
    for k in keys:
        a = [r[k] for r in sides["A"]]
        b = [r[k] for r in sides["B"]]
        pair = [ratio(x, y) for x, y in zip(a, b)]
        finite = [x for x in pair if x == x]
        rows.append(
            (
                f"{k[0]} {k[1]} {k[2]}",
                fmt(statistics.median(a)),
                fmt(statistics.median(b)),
                " ".join(f"{x:.2f}" for x in pair),
                f"{statistics.median(finite):.3f}" if finite else "—",
            )
        )
    head = ("figure", "A median", "B median", "A/B each pair", "A/B median")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    if only:
        print(f"\n{len(only)} figures measured on one side only (left out), e.g. {sorted(only)[0]}")
    print(f"\nA: {args.a}\nB: {args.b}\npairs: {args.pairs}, run A B, B A, … alternately")


if __name__ == "__main__":
    main()
