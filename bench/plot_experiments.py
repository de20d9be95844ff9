#!/usr/bin/python3
"""Turns the CSVs written by sketch_experiments into PNG plots.

    /usr/bin/python3 bench/plot_experiments.py [DIR] [--only=4]   (DIR defaults to bench/experiments)

Needs matplotlib (Debian: apt-get install -y python3-matplotlib). Reads DIR/exp1_errors.csv,
exp1_throughput.csv, exp2_cdf.csv, exp3_realistic.csv and the exp4_*.csv files; writes DIR/*.png.
--only=4 draws experiment 4's figures alone (the others stay as committed).
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ARGS = [a for a in sys.argv[1:] if not a.startswith("--only=")]
ONLY = next((a[len("--only="):] for a in sys.argv[1:] if a.startswith("--only=")), "1,2,3,4")
DIR = ARGS[0] if ARGS else "bench/experiments"
SKETCHES = ["CM", "FCM", "CM-CU", "FCM-CU"]
COLORS = {"CM": "tab:red", "FCM": "tab:blue", "CM-CU": "tab:orange", "FCM-CU": "tab:cyan"}
DISTS = ["Zipf(1.1)", "Zipf(1.5)", "Normal(10)", "Normal(20)"]
FLOOR = 1e-3  # zero errors are drawn at this height on log axes (and labelled "0")


def read(name):
    with open(os.path.join(DIR, name), newline="") as f:
        return list(csv.DictReader(f))


def save(fig, name):
    fig.tight_layout()
    fig.savefig(os.path.join(DIR, name), dpi=90)
    plt.close(fig)
    print("wrote", name)


def error_of(rows, shape, dist, sketch, scheme, workers):
    for r in rows:
        if (r["shape"] == shape and r["distribution"] == dist and r["sketch"] == sketch
                and int(r["workers"]) == workers
                and (workers == 1 or r["scheme"] == scheme)):
            return float(r["normalized error"])
    raise KeyError((shape, dist, sketch, scheme, workers))


def fig12(rows):
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=True)
    for ax, shape in zip(axes, ["paper", "spec"]):
        width = 0.1
        x = range(len(DISTS))
        i = 0
        for scheme in ["block", "hash"]:
            for s in SKETCHES:
                vals = [error_of(rows, shape, d, s, scheme, 8) for d in DISTS]
                pos = [xx + (i - 3.5) * width for xx in x]
                bars = ax.bar(pos, [max(v, FLOOR) for v in vals], width, color=COLORS[s],
                              hatch="//" if scheme == "hash" else None, edgecolor="black",
                              linewidth=0.4, label=f"{s} {scheme}")
                for b, v in zip(bars, vals):
                    if v == 0:
                        ax.text(b.get_x() + b.get_width() / 2, FLOOR * 1.3, "0", ha="center",
                                fontsize=7)
                i += 1
        ax.set_yscale("log")
        ax.set_xticks(list(x))
        ax.set_xticklabels(DISTS)
        ax.set_title(f"8 workers, shape '{shape}'"
                     + (" (d=17, w=31)" if shape == "paper" else " (CM 9x32, FCM 11x26)"))
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("normalized error  Σ|f̂−f| / Σf  (log)")
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle("Fig. 12 analogue: block (plain) vs hash (hatched) partitioning, 4M items")
    save(fig, "exp1_fig12.png")


def fig15_16(rows):
    workers = [1, 2, 4, 8]
    for scheme, fig_no in [("block", 15), ("hash", 16)]:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for dist, marker in [("Zipf(1.1)", "o"), ("Normal(20)", "s")]:
            for s in SKETCHES:
                vals = [error_of(rows, "paper", dist, s, scheme, p) for p in workers]
                pts = [(p, v) for p, v in zip(workers, vals) if v > 0]
                if not pts:
                    continue
                ax.plot([p for p, _ in pts], [v for _, v in pts], marker=marker,
                        color=COLORS[s], linestyle="-" if "CU" not in s else "--",
                        label=f"{dist} {s}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(workers)
        ax.set_xticklabels([str(p) for p in workers])
        ax.set_yscale("log")
        ax.set_xlabel("workers p")
        ax.set_ylabel("normalized error (log)")
        ax.set_title(f"Fig. {fig_no} analogue: {scheme}-based partitioning, d=17, w=31"
                     + ("\n(missing points: error exactly 0)" if scheme == "hash" else ""))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        save(fig, f"exp1_fig{fig_no}_{scheme}.png")


def throughput():
    rows = read("exp1_throughput.csv")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    workers = ["1", "2", "4", "8"]
    for r in rows:
        ax.plot([int(w) for w in workers], [float(r[w]) for w in workers], marker="o",
                color=COLORS[r["sketch"]], linestyle="-" if r["scheme"] == "block" else "--",
                label=f"{r['sketch']} {r['scheme']}")
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 2, 4, 8])
    ax.set_xticklabels(workers)
    ax.set_xlabel("workers p (std::threads; the machine has 2 cores)")
    ax.set_ylabel("million items / s")
    ax.set_ylim(bottom=0)
    ax.set_title("Ingest throughput, Zipf(1.1), 4M items, d=17 x w=31")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    save(fig, "exp1_throughput.png")


def pbf_cdf():
    rows = read("exp2_cdf.csv")
    styles = {"uniform": "tab:green", "gaussian": "tab:blue", "poisson": "tab:purple",
              "random": "tab:red"}
    params = ["table", "init", "init-load"]
    for case in sorted({r["case"] for r in rows}):
        fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), sharey=True)
        for ax, p in zip(axes, params):
            for dist, color in styles.items():
                pts = [r for r in rows if r["case"] == case and r["params"] == p
                       and r["distribution"] == dist]
                if not pts:
                    continue
                ax.plot([float(r["relative_error"]) for r in pts],
                        [float(r["quantile"]) for r in pts], color=color, label=dist)
            ax.set_xlim(0, 1.5)
            ax.set_xlabel("relative error |f̂−f| / f")
            ax.set_title(f"{case}, params = {p}")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("fraction of keys (CDF)")
        axes[0].legend()
        save(fig, f"exp2_cdf_{case}.png")


def realistic():
    rows = read("exp3_realistic.csv")
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    names = [r["summary"] for r in rows]
    for ax, which in zip(axes, ["top-1000", "random-1000"]):
        mean = [max(float(r[f"{which} mean abs err"]), FLOOR) for r in rows]
        mx = [max(float(r[f"{which} max abs err"]), FLOOR) for r in rows]
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], mean, 0.4, label="mean |err|", color="tab:blue")
        ax.bar([i + 0.2 for i in x], mx, 0.4, label="max |err|", color="tab:gray")
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_title(f"{which} keys")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("absolute error (log)")
    fig.suptitle("10^8 items, Zipf(1.1) over 10^7 keys, 1 MiB per summary")
    save(fig, "exp3_realistic.png")


EXP4_COLORS = {"AMS": "tab:green", "Count Sketch": "tab:purple", "Count Sketch d=5": "tab:pink",
               "CM": "tab:red", "CM-CU": "tab:orange", "FCM": "tab:blue"}


def exp4_fig34():
    rows = read("exp4_fig34_points.csv")
    dists = ["Normal(20)", "Zipf(1.1)"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, dist, fig_no in zip(axes, dists, [3, 4]):
        pts = [r for r in rows if r["distribution"] == dist]
        rank = [int(r["rank"]) for r in pts]
        for s in ["CM", "FCM", "AMS", "Count Sketch"]:
            ax.plot(rank, [max(float(r[s]), 0.5) for r in pts], ".", markersize=3,
                    color=EXP4_COLORS[s], label=s)
        ax.plot(rank, [float(r["true f"]) for r in pts], "-", color="black", linewidth=1,
                label="true f")
        ax.set_yscale("log")
        if dist.startswith("Zipf"):
            ax.set_xscale("log")
        ax.set_xlabel("items by decreasing true frequency (rank)")
        ax.set_title(f"Fig. {fig_no} analogue: {dist}, 4M items, ε = 0.1, δ = 0.001")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("estimated frequency (log; 0 drawn at 0.5)")
    save(fig, "exp4_fig34.png")


def exp4_memory():
    rows = [r for r in read("exp4_memory.csv") if r["normalized error"] != ""]
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    for ax, dist in zip(axes[:2], ["Zipf(1.1)", "Normal(20)"]):
        for s in ["CM", "CM-CU", "FCM", "AMS", "Count Sketch", "Count Sketch d=5"]:
            pts = [r for r in rows if r["distribution"] == dist and r["sketch"] == s]
            ax.plot([int(r["table bytes"]) for r in pts],
                    [max(float(r["normalized error"]), 1e-5) for r in pts], marker="o",
                    color=EXP4_COLORS[s], linestyle="--" if s == "AMS" else "-", label=s)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("table bytes (log)")
        ax.set_title(f"point error vs memory, {dist}, 4M items")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("normalized error Σ|f̂−f| / N (log; 0 drawn at 1e-5)")
    ax = axes[2]
    for dist, marker in [("Zipf(1.1)", "o"), ("Normal(20)", "s")]:
        for s in ["AMS", "Count Sketch d=5"]:
            pts = [r for r in rows if r["distribution"] == dist and r["sketch"] == s]
            ax.plot([int(r["table bytes"]) for r in pts],
                    [max(float(r["F2 rel error"]), 1e-7) for r in pts], marker=marker,
                    color=EXP4_COLORS[s], label=f"{dist} {s}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("table bytes (log)")
    ax.set_ylabel("|F2^ − F2| / F2 (log)")
    ax.set_title("F2 error vs memory (AMS = Count Sketch at d = 13)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, "exp4_memory.png")


def main():
    if "1" in ONLY:
        rows = read("exp1_errors.csv")
        fig12(rows)
        fig15_16(rows)
        throughput()
    if "2" in ONLY:
        pbf_cdf()
    if "3" in ONLY and os.path.exists(os.path.join(DIR, "exp3_realistic.csv")):
        realistic()
    if "4" in ONLY and os.path.exists(os.path.join(DIR, "exp4_memory.csv")):
        exp4_fig34()
        exp4_memory()


if __name__ == "__main__":
    main()
