#!/usr/bin/python3
"""Reads glacier_mpi results files for the scaling study: a one-rank run's micro-batch compute times (the
pipeline model's calibration), a workload's per-prompt token counts, and per-rank trace intervals."""
import sys

import h5py
import numpy as np

PHASES = ("recv", "compute", "send", "wait", "verify", "draft")  # /trace phase numbers 0..5 (README, Output)


def trace(path):
    """The /trace table as a dict of numpy columns."""
    with h5py.File(path, "r") as f:
        if "trace" not in f:
            raise SystemExit(f"trace_tools: expected a /trace table in {path}, found none (run with --out)")
        t = f["trace"]
        return {k: t[k][:] for k in ("rank", "microbatch", "phase", "start", "end", "tokens", "bytes")}


def microbatches(path, run):
    """CSV rows run,microbatch,tokens,compute_s of every compute (or verify) interval (a one-rank run has one per
    micro-batch: embedding, layers and output head together)."""
    t = trace(path)
    if np.any(t["rank"] != 0):
        raise SystemExit(f"trace_tools: expected a one-rank trace in {path}, found ranks {sorted(set(t['rank']))}")
    rows = np.flatnonzero(np.isin(t["phase"], [PHASES.index("compute"), PHASES.index("verify")]))
    for i in rows[np.argsort(t["microbatch"][rows])]:
        print(f"{run},{t['microbatch'][i]},{t['tokens'][i]},{t['end'][i] - t['start'][i]:.7f}")


def workload(path, name):
    """CSV rows workload,index,prompt_tokens,generated in input order (tokens the scheduler feeds and
    generates per prompt; the same for every layout, as results are bitwise equal)."""
    with h5py.File(path, "r") as f:
        r = f["results"]
        status = [s.decode() for s in r["status"][:]]
        if any(s != "ok" for s in status):
            raise SystemExit(f"trace_tools: expected every prompt ok in {path}, found statuses {sorted(set(status))}")
        order = np.argsort(r["index"][:])
        for i in order:
            print(f"{name},{r['index'][i]},{len(r['prompt_tokens'][i])},{len(r['tokens'][i])}")


if __name__ == "__main__":
    usage = "usage: trace_tools.py microbatches RESULTS.h5 RUN_ID | workload RESULTS.h5 NAME"
    if len(sys.argv) != 4 or sys.argv[1] not in ("microbatches", "workload"):
        raise SystemExit(usage)
    (microbatches if sys.argv[1] == "microbatches" else workload)(sys.argv[2], sys.argv[3])
