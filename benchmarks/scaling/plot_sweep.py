#!/usr/bin/python3
"""Plots of the scaling sweep (sweep.sh): throughput per configuration (measured and modelled), pipeline
efficiency against one rank, and Gantt charts of two runs' /trace (per rank compute/send/recv/wait).
A sweep with gaps (failed or disturbed runs, a model it could not calibrate) is drawn as far as it goes,
and the plots and the printout say what is missing."""
import argparse
import csv
import os
import statistics
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import trace_tools  # noqa: E402
from pipeline_model import CALIBRATION_KINDS  # noqa: E402

CORES = 2  # this machine's: ranks beyond it share cores, so the ideal speed-up is min(np, CORES)
PHASE_COLORS = {"compute": "tab:blue", "send": "tab:orange", "recv": "tab:green", "wait": "lightgray",
                "verify": "tab:purple", "draft": "tab:red"}
DECODE_WINDOW_S = 0.25  # a decode run has thousands of intervals: its chart shows this much of the middle


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def number(text):
    """A CSV cell as a float; NaN (not drawn) where the sweep or the model left it empty."""
    return float(text) if text not in ("", None) else float("nan")


def is_clean(row):
    return row.get("clean", "1") == "1" and row.get("status", "ok") == "ok"


def label(o):
    parts = [f"{o['replicas']}x{o['stages']}"]
    if o["ubatch"] != "128":
        parts.append(f"u{o['ubatch']}")
    if o["wire"] != "f32":
        parts.append(o["wire"])
    if float(o["latency_ms"]) > 0:
        parts.append(f"{float(o['latency_ms']):g}ms")
    if o["slots"] != "32":
        parts.append(f"s{o['slots']}")
    return " ".join(parts)


def plot_throughput(pred, path, missing):
    fig, axes = plt.subplots(2, 1, figsize=(13, 9))
    for ax, workload in zip(axes, ("prefill", "decode")):
        rows = [o for o in pred if o["workload"] == workload]
        unit = "prompt" if workload == "prefill" else "generated"
        ax.set_ylabel(f"{unit} tok/s")
        ax.set_title(f"{workload}: replicas x stages, ubatch, wire, injected ms a hop (gray: calibration runs; "
                     "hatched: measured while other work ran, no prediction)")
        if not rows:
            ax.text(0.5, 0.5, f"no {workload} configuration was measured", ha="center", va="center",
                    transform=ax.transAxes)
            continue
        x = np.arange(len(rows))
        med = np.array([float(o["measured_tok_per_s"]) for o in rows])
        lo = med - np.array([float(o["measured_min"]) for o in rows])
        hi = np.array([float(o["measured_max"]) for o in rows]) - med
        colors = ["tab:gray" if o["kind"] in CALIBRATION_KINDS else "tab:blue" for o in rows]
        bars = ax.bar(x, med, color=colors, yerr=[lo, hi], capsize=2, label="measured (median, min-max)")
        for bar, o in zip(bars, rows):
            if o.get("clean", "1") != "1":
                bar.set_hatch("//")
                bar.set_alpha(0.5)
        ax.plot(x, [number(o["predicted_tok_per_s"]) for o in rows], "o", color="tab:red", label="pipeline model")
        ax.plot(x, [number(o["formula_tok_per_s"]) for o in rows], "x", color="black", label="closed form")
        ax.set_xticks(x, [label(o) for o in rows], rotation=60, ha="right", fontsize=8)
        ax.legend(fontsize=8)
    fig.tight_layout()
    footnote_missing(fig, missing)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_efficiency(sweep, path, missing):
    """Efficiency = throughput / (one-rank throughput at the same ubatch x min(np, CORES))."""
    med = defaultdict(list)
    for r in filter(is_clean, sweep):
        med[(r["workload"], r["np"], r["replicas"], r["ubatch"], r["wire"], r["latency_ms"], r["slots"])].append(
            float(r["tok_per_s"]))
    med = {k: statistics.median(v) for k, v in med.items()}
    layouts = [("1", "1"), ("2", "2"), ("2", "1"), ("4", "4"), ("4", "2"), ("4", "1")]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, workload in zip(axes, ("prefill", "decode")):
        for ubatch, marker in (("32", "s"), ("128", "o"), ("512", "^")):
            base = med.get((workload, "1", "1", ubatch, "f32", "0", "32"))
            if base is None:
                continue
            xs, ys = [], []
            for i, (n, rep) in enumerate(layouts):
                v = med.get((workload, n, rep, ubatch, "f32", "0", "32"))
                if v is not None:
                    xs.append(i)
                    ys.append(v / (base * min(int(n), CORES)))
            ax.plot(xs, ys, marker=marker, label=f"ubatch {ubatch}")
        for lat, style in (("1", ":"), ("5", "--")):
            base = med.get((workload, "1", "1", "128", "f32", "0", "32"))
            xs, ys = [], []
            for i, (n, rep) in enumerate(layouts):
                v = med.get((workload, n, rep, "128", "f32", lat, "32"))
                if v is not None and base:
                    xs.append(i)
                    ys.append(v / (base * min(int(n), CORES)))
            if xs:
                ax.plot(xs, ys, style, marker="o", color="gray", label=f"ubatch 128, {lat} ms a hop")
        ax.set_xticks(range(len(layouts)),
                      [f"np {n}\n{rep}x{int(n) // int(rep)}" for n, rep in layouts])
        ax.axhline(1.0, color="black", lw=0.5)
        ax.set_title(f"{workload}: throughput / (1 rank x min(np, {CORES} cores))")
        ax.set_xlabel("ranks, replicas x stages")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:  # no one-rank base measured cleanly
            ax.text(0.5, 0.5, f"no clean one-rank {workload} run to compare with", ha="center", va="center",
                    transform=ax.transAxes)
    axes[0].set_ylabel("pipeline efficiency")
    fig.tight_layout()
    footnote_missing(fig, missing)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def gantt(ax, h5, window=None, title=""):
    t = trace_tools.trace(h5)
    t0 = 0.0
    if window:  # a window of `window` seconds in the middle of the compute span
        comp = t["phase"] == trace_tools.PHASES.index("compute")
        mid = 0.5 * (t["start"][comp].min() + t["end"][comp].max())
        t0, t1 = mid - window / 2, mid + window / 2
    for phase_id, name in enumerate(trace_tools.PHASES):
        sel = t["phase"] == phase_id
        if window:
            sel &= (t["end"] > t0) & (t["start"] < t1)
        starts, ends, ranks = t["start"][sel], t["end"][sel], t["rank"][sel]
        for rank in sorted(set(ranks)):
            m = ranks == rank
            spans = [(s, max(e - s, 1e-6)) for s, e in zip(starts[m], ends[m])]
            ax.broken_barh(spans, (rank - 0.4, 0.8), color=PHASE_COLORS[name], label=name if rank == ranks.min() else None)
    n_ranks = int(t["rank"].max()) + 1
    ax.set_yticks(range(n_ranks), [f"rank {r}" for r in range(n_ranks)])
    ax.invert_yaxis()
    if window:
        ax.set_xlim(t0, t1)
    ax.set_xlabel("seconds since the job's start")
    ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8, loc="upper right", ncol=4)


def missing_configurations(sweep):
    """Configurations of the sweep without a clean run (every try failed or was disturbed), as labels."""
    clean, seen = set(), {}
    for r in sweep:
        key = (r["workload"], r["np"], r["replicas"], r["ubatch"], r["wire"], r["latency_ms"], r["slots"])
        seen.setdefault(key, r)
        if is_clean(r):
            clean.add(key)
    return [f"{r['workload']} {label(r)}" for key, r in seen.items() if key not in clean]


def footnote_missing(fig, missing):
    """Names, under the figure, the configurations that had no clean run (so a gap is not read as a result)."""
    if missing:
        fig.subplots_adjust(bottom=max(fig.subplotpars.bottom, 0.12))
        fig.text(0.01, 0.005, "no clean run (left out): " + "; ".join(missing), fontsize=7, color="tab:red", wrap=True,
                 va="bottom")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sweep", required=True)
    ap.add_argument("--predicted", required=True)
    ap.add_argument("--results", required=True, help="directory for the PNGs (and where gantt_*.h5 are)")
    args = ap.parse_args()
    sweep, pred = read_csv(args.sweep), read_csv(args.predicted)
    missing = missing_configurations(sweep)
    plot_throughput(pred, os.path.join(args.results, "throughput.png"), missing)
    plot_efficiency(sweep, os.path.join(args.results, "efficiency.png"), missing)
    runs = [("prefill", None, "prefill, 1 x 4 stages, ubatch 128: the whole run"),
            ("decode", DECODE_WINDOW_S, f"decode, 1 x 4 stages, 1 ms injected a hop: {DECODE_WINDOW_S} s mid-run")]
    have = [(w, win, title) for w, win, title in runs if os.path.exists(os.path.join(args.results, f"gantt_{w}.h5"))]
    if have:
        fig, axes = plt.subplots(len(have), 1, figsize=(13, 3.2 * len(have)), squeeze=False)
        for ax, (w, win, title) in zip(axes[:, 0], have):
            gantt(ax, os.path.join(args.results, f"gantt_{w}.h5"), win, title)
        fig.tight_layout()
        fig.savefig(os.path.join(args.results, "gantt.png"), dpi=110)
        plt.close(fig)
    else:
        print("plot_sweep: no gantt_*.h5 in " + args.results + " (those runs failed or were not in the sweep): no gantt.png")
    drawn = [p for p in ("throughput.png", "efficiency.png") + (("gantt.png",) if have else ())]
    print("plots: " + ", ".join(os.path.join(args.results, p) for p in drawn))
    if missing:
        print(f"plot_sweep: {len(missing)} configurations had no clean run and are left out of the efficiency plot "
              "(hatched in the throughput plot when measured while disturbed): " + "; ".join(missing))


if __name__ == "__main__":
    main()
