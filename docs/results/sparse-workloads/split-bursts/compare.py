"""Two bursts per period, measured and not adopted (README.md): the default as it is against the same
default with the split bursts of commit 6ba8817, each against the best other configuration, paired per
repetition.

    .venv/bin/python docs/results/sparse-workloads/split-bursts/compare.py

../runs.csv holds every mechanism with the default as it is; runs.csv here the default's rows (raw and
+KF) with the split, from the same command on the same seeds (`--seed 1`: the noise of each task and
mechanism is the same in both runs; the other mechanisms' 3,060 rows of that run equal those of
../runs.csv to the last digit, so only the default's are kept here). The best other configuration is
the one with the lowest mean MSE over the repetitions (raw or +KF, the default excluded); the ratios are
means of per-repetition ratios with 95% t-intervals. With `foursquare`, the same for
paper-scale-defaults/runs.csv against ../../every-mechanism-at-the-defaults/runs.csv.
"""

import collections
import csv
import sys
from pathlib import Path

import numpy as np

from pwevent.jobs.evaluation.report import Interval

HERE = Path(__file__).resolve().parent
HELD_OUT = {"Sparse-daily-365", "Sparse-hourly-720", "Sparse-daily-250"}


def label(row: dict[str, str]) -> str:
    return row["mechanism"] + ("+KF" if row["post"] == "kalman" else "")


def table(current: Path, split: Path) -> dict:
    """{(dataset, E): {configuration: {rep: (mse, publications)}}}, the split default as 'split'."""
    out: dict = collections.defaultdict(lambda: collections.defaultdict(dict))
    for path, rename in ((current, {}), (split, {"Adaptive+KF": "split"})):
        with path.open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row["post"] == "reference" or (path == split and row["mechanism"] != "Adaptive"):
                    continue
                name = rename.get(label(row), label(row) if path == current else None)
                if name is not None:
                    out[(row["dataset"], row["epsilon"])][name][row["rep"]] = (float(row["mse"]),
                                                                              int(row["publications"]))
    return out


if len(sys.argv) > 1 and sys.argv[1] == "foursquare":
    results = table(HERE.parents[1] / "every-mechanism-at-the-defaults" / "runs.csv",
                    HERE / "paper-scale-defaults" / "runs.csv")
else:
    results = table(HERE.parent / "runs.csv", HERE / "runs.csv")
print("| workload | E | best other | default: MSE / best | with the split: MSE / best | split / default "
      "| publications, default -> split (mean) |")
print("|---|---|---|---|---|---|---|")
for key in sorted(results, key=lambda k: (k[0] in HELD_OUT, k[0], float(k[1]))):
    runs = results[key]
    others = {n: np.mean([m for m, _ in v.values()]) for n, v in runs.items() if n not in ("Adaptive+KF", "split")}
    best = min(others, key=others.__getitem__)
    reps = sorted(runs["split"])
    now = Interval.of(runs["Adaptive+KF"][r][0] / runs[best][r][0] for r in reps)
    split = Interval.of(runs["split"][r][0] / runs[best][r][0] for r in reps)
    change = Interval.of(runs["split"][r][0] / runs["Adaptive+KF"][r][0] for r in reps)
    before = np.mean([runs["Adaptive+KF"][r][1] for r in reps])
    after = np.mean([runs["split"][r][1] for r in reps])
    name = key[0] + (" (held out)" if key[0] in HELD_OUT else "")
    print(f"| {name} | {key[1]} | {best} | {now.render(3)} | {split.render(3)} | {change.render(3)} "
          f"| {before:.1f} -> {after:.1f} |")
