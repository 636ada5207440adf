"""Plots of delayq's side-by-side benchmarks, drawn from the suite's results.json.

Usage: plot.py results.json out_dir
Writes lateness_cdf.png (W2), throughput.png (W1) and memory_per_job.png (W3).
Every value comes from results.json; nothing is typed in here.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAMES = {
    "delayq-redis": "delayq, Redis (library)",
    "delayq-embedded": "delayq, embedded (library)",
    "delayq-postgres": "delayq, PostgreSQL (library)",
    "http-redis": "delayq server, Redis (HTTP)",
    "http-embedded": "delayq server, embedded (HTTP)",
    "http-redis-batch": "delayq server, Redis (HTTP, batch consumer)",
    "http-embedded-batch": "delayq server, embedded (HTTP, batch consumer)",
    "chasquimq": "ChasquiMQ",
    "bullmq": "BullMQ",
    "pg-boss": "pg-boss",
    "beanstalkd": "beanstalkd (memory)",
    "beanstalkd-binlog": "beanstalkd (-b binlog)",
    "delayq-beanstalk-redis": "delayq server, Redis (beanstalkd protocol)",
    "delayq-beanstalk-embedded": "delayq server, embedded (beanstalkd protocol)",
    "seeds": "seeds' design",
    "client-python": "delayq server, Redis (Python worker)",
    "client-node": "delayq server, Redis (Node worker)",
}


def name(key):
    return NAMES.get(key, key)


def lateness_cdf(r, out):
    fig, ax = plt.subplots(figsize=(8, 5))
    for row in r["w2"]:
        pts = [(ms, q) for ms, q in row["cdf"] if ms > 0]
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name(row["system"]))
    ax.set_xscale("log")
    ax.set_xlabel("lateness (ms, delivery minus due time, host clock; log scale)")
    ax.set_ylabel("fraction of deliveries")
    ax.set_title("W2: lateness of %d delayed jobs (all repetitions)" % r["plan"]["w2_jobs"])
    ax.axvline(5, color="grey", linestyle=":", linewidth=1)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(f"{out}/lateness_cdf.png", dpi=110)
    plt.close(fig)


def throughput(r, out):
    fig, ax = plt.subplots(figsize=(8, 5))
    systems = []
    for row in r["w1"]:
        if row["system"] not in systems:
            systems.append(row["system"])
    for s in systems:
        rows = sorted((x for x in r["w1"] if x["system"] == s), key=lambda x: x["consumers"])
        c = [x["consumers"] for x in rows]
        med = [x["rate"]["median"] for x in rows]
        lo = [x["rate"]["median"] - x["rate"]["min"] for x in rows]
        hi = [x["rate"]["max"] - x["rate"]["median"] for x in rows]
        ax.errorbar(c, med, yerr=[lo, hi], marker="o", capsize=3, label=name(s))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("consumers (C)")
    ax.set_ylabel("jobs/s (median, min-max)")
    ax.set_title("W1: draining %d ready jobs" % r["plan"]["w1_jobs"])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{out}/throughput.png", dpi=110)
    plt.close(fig)


def memory(r, out):
    rows = r["w3"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = [name(x["system"]) for x in rows]
    med = [x["per_job"]["median"] for x in rows]
    lo = [x["per_job"]["median"] - x["per_job"]["min"] for x in rows]
    hi = [x["per_job"]["max"] - x["per_job"]["median"] for x in rows]
    bars = ax.barh(labels, med, xerr=[lo, hi], capsize=3)
    for b, x in zip(bars, rows):
        ax.annotate("%.0f B (%s)" % (x["per_job"]["median"], x["what"]), (b.get_width(), b.get_y() + b.get_height() / 2),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_xlabel("bytes per pending job (median, min-max)")
    ax.set_title("W3: %d pending delayed jobs, %d-byte bodies" % (r["plan"]["w3_jobs"], r["plan"]["body"]))
    ax.invert_yaxis()
    ax.set_xlim(0, max(med + [1]) * 1.6)
    fig.tight_layout()
    fig.savefig(f"{out}/memory_per_job.png", dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py results.json out_dir")
    with open(sys.argv[1]) as f:
        r = json.load(f)
    out = sys.argv[2]
    if r["w2"]:
        lateness_cdf(r, out)
    if r["w1"]:
        throughput(r, out)
    if r["w3"]:
        memory(r, out)


if __name__ == "__main__":
    main()
