#!/usr/bin/python3
"""Pools the raw results of another sweep.sh run (its sweep.csv and calibration.csv) into a results
directory, as more repetitions of the same configurations: run ids are offset so that the calibration
rows still name their runs, repetitions are numbered on. The workloads must be the same.
Usage: pool_runs.py RESULTS_DIR OTHER_RESULTS_DIR RUN_ID_OFFSET"""
import csv
import sys


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    into, other, offset = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if open(f"{into}/workloads.csv").read() != open(f"{other}/workloads.csv").read():
        raise SystemExit(f"pool_runs: expected the same workloads.csv in {into} and {other}, found different ones")
    sweep = list(csv.DictReader(open(f"{into}/sweep.csv")))
    reps = max(int(r["rep"]) for r in sweep)
    ids = {int(r["run"]) for r in sweep}
    moved = {int(r["run"]) + offset for r in csv.DictReader(open(f"{other}/sweep.csv"))}
    if ids & moved:
        raise SystemExit(f"pool_runs: expected an offset past the run ids of {into} (up to {max(ids)}), found {offset}")
    for name in ("sweep.csv", "calibration.csv"):
        rows = list(csv.DictReader(open(f"{other}/{name}")))
        with open(f"{into}/{name}", "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            for r in rows:
                r["run"] = str(int(r["run"]) + offset)
                if name == "sweep.csv":
                    r["rep"] = str(int(r["rep"]) + reps)
                w.writerow(r)
    print(f"pooled {other} into {into} (run ids + {offset}, repetitions after {reps})")


if __name__ == "__main__":
    main()
