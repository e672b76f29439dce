"""A whole first burst and the other measured changes against the default, paired per repetition
(README.md, "A whole first burst"); every folder here holds Adaptive alone, run with rule.py on the
seeds of the committed rows (`--seed 1`), so each repetition's data and requirements are the same:

    .venv/bin/python docs/results/sparse-workloads/whole-first-burst/compare.py
"""

import collections
import csv
from pathlib import Path

import numpy as np

from pwevent.jobs.evaluation.report import Interval

HERE = Path(__file__).resolve().parent
HELD_OUT = ("Sparse-daily-365", "Sparse-hourly-720", "Sparse-daily-250")


def rows(path: Path) -> dict:
    """(dataset, E) -> configuration -> rep -> (MSE, publications)."""
    by: dict = collections.defaultdict(lambda: collections.defaultdict(dict))
    for row in csv.DictReader(path.open(encoding="utf-8")):
        if row["post"] != "reference":
            name = row["mechanism"] + ("+KF" if row["post"] == "kalman" else "")
            by[(row["dataset"], float(row["epsilon"]))][name][int(row["rep"])] = (float(row["mse"]),
                                                                                 int(row["publications"]))
    return by


def table(committed: Path, variants: list[str]) -> None:
    base = rows(committed)
    measured = {name: rows(HERE / name / "runs.csv") for name in variants}
    keys = sorted({k for m in measured.values() for k in m}, key=lambda k: (k[0] in HELD_OUT, k))
    head = "| workload | E | best other | default: MSE / best |"
    for name in variants:
        head += f" {name}: MSE / best | {name} / default | publications |"
    print(head)
    print("|---" * (4 + 3 * len(variants)) + "|")
    for key in keys:
        results = base[key]
        others = {n: np.mean([v[0] for v in r.values()]) for n, r in results.items() if n != "Adaptive+KF"}
        best = min(others, key=others.__getitem__)
        reps = sorted(results[best])
        default = [results["Adaptive+KF"][r][0] for r in reps]
        line = (f"| {key[0]}{' (held out)' if key[0] in HELD_OUT else ''} | {key[1]} | {best} "
                f"| {Interval.of(d / results[best][r][0] for d, r in zip(default, reps)).render(3)} |")
        for name in variants:
            mine = measured[name].get(key, {}).get("Adaptive+KF")
            if mine is None:
                line += " - | - | - |"
                continue
            line += (f" {Interval.of(mine[r][0] / results[best][r][0] for r in reps).render(3)}"
                     f" | {Interval.of(mine[r][0] / d for d, r in zip(default, reps)).render(3)}"
                     f" | {np.mean([results['Adaptive+KF'][r][1] for r in reps]):.0f} -> "
                     f"{np.mean([mine[r][1] for r in reps]):.0f} |")
        print(line)


def null(committed: Path, folder: str, name: str) -> None:
    """`name` rerun with other noise (`--seed 2`) against itself with the committed noise: what the
    paired mean ratio reads for a configuration equal in distribution to the best."""
    base, again = rows(committed), rows(HERE / folder / "runs.csv")
    print(f"| workload | E | {name} (--seed 2) / {name} (--seed 1), paired |")
    print("|---|---|---|")
    for key in sorted(again, key=lambda k: (k[0] in HELD_OUT, k)):
        first, second = base[key][name], again[key][name]
        print(f"| {key[0]}{' (held out)' if key[0] in HELD_OUT else ''} | {key[1]} "
              f"| {Interval.of(second[r][0] / first[r][0] for r in sorted(first)).render(3)} |")


if __name__ == "__main__":
    print("Sparse workloads\n")
    table(HERE.parent / "runs.csv", ["sparse"])
    print("\nTuning workloads: the other changes\n")
    table(HERE.parent / "runs.csv", ["tuning-probe-half", "tuning-sqrt-spacing", "tuning-whole-first-sqrt-spacing"])
    print("\nHeld-out workloads: bursts spread over the day\n")
    table(HERE.parent / "runs.csv", ["held-out-sqrt-spacing"])
    print("\nThe best other configuration against itself with other noise\n")
    null(HERE.parent / "runs.csv", "sample-seed-2", "Sample+KF")
    print("\nThe paper's defaults\n")
    table(HERE.parent.parent / "every-mechanism-at-the-defaults" / "runs.csv",
          ["paper-scale-defaults", "foursquare-at-slot-2", "foursquare-sqrt-spacing"])
