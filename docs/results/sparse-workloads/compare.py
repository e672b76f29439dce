"""The default against the best other configuration on the sparse workloads, before and after the level
test of issue 45, paired per repetition (README.md):

    .venv/bin/python docs/results/sparse-workloads/compare.py

runs.csv holds every mechanism with the current rule; before/runs.csv Adaptive alone with the earlier
test, on the same seeds (`--seed 1`: the noise of each task and mechanism is the same in both runs).
"""

import collections
import csv
from pathlib import Path

import numpy as np

from pwevent.jobs.evaluation.report import Interval

HERE = Path(__file__).resolve().parent


def label(row: dict[str, str]) -> str:
    return row["mechanism"] + ("+KF" if row["post"] == "kalman" else "")


by: dict = collections.defaultdict(lambda: collections.defaultdict(dict))
for row in csv.DictReader((HERE / "runs.csv").open(encoding="utf-8")):
    if row["post"] != "reference":
        by[(row["dataset"], row["epsilon"])][label(row)][row["rep"]] = float(row["mse"])
before: dict = collections.defaultdict(dict)
switched: dict = collections.defaultdict(int)
for row in csv.DictReader((HERE / "before" / "runs.csv").open(encoding="utf-8")):
    if row["mechanism"] == "Adaptive" and row["post"] == "kalman":
        before[(row["dataset"], row["epsilon"])][row["rep"]] = float(row["mse"])
        switched[(row["dataset"], row["epsilon"])] += "Uniform" in row["note"]

print("| workload | E | best other | default before: MSE / best, paired | runs in even spending before (of 10) "
      "| default now: MSE / best, paired | now / before, paired |")
print("|---|---|---|---|---|---|---|")
for key in sorted(by, key=lambda k: (k[0], float(k[1]))):
    results = by[key]
    others = {name: np.mean(list(v.values())) for name, v in results.items() if name != "Adaptive+KF"}
    best = min(others, key=others.__getitem__)
    reps = sorted(results[best])
    old = Interval.of(before[key][r] / results[best][r] for r in reps)
    now = Interval.of(results["Adaptive+KF"][r] / results[best][r] for r in reps)
    change = Interval.of(results["Adaptive+KF"][r] / before[key][r] for r in reps)
    print(f"| {key[0]} | {key[1]} | {best} | {old.render(3)} | {switched[key]} | {now.render(3)} "
          f"| {change.render(3)} |")
