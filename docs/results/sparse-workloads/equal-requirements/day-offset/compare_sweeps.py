"""Foursquare's sweep points: the default with the day offset against the best other configuration.

    python compare_sweeps.py BASE_RUNS[,BASE_RUNS...] VARIANT_RUNS

BASE_RUNS: every configuration's Foursquare rows at those points (../../../epsilon-sweep-paper/runs.csv,
../../../w-ratio-sweeps-paper/runs.csv); VARIANT_RUNS: rule.py's Adaptive rows (fs12/runs.csv). Per
point: the best other configuration over the variant's repetitions (mean MSE), the mean of the
paired ratios variant / best and, for reference, default / best."""

import collections
import csv
import statistics
import sys

base = collections.defaultdict(dict)
for path in sys.argv[1].split(","):
    for r in csv.DictReader(open(path)):
        if r["post"] != "reference" and r["dataset"] == "Foursquare":
            label = r["mechanism"] + ("+KF" if r["post"] != "none" else "")
            base[(r["sweep"], r["epsilon"], r["w"], r["ratio"])][(label, r["rep"])] = float(r["mse"])
variant = {}
for r in csv.DictReader(open(sys.argv[2])):
    if r["mechanism"] == "Adaptive" and r["post"] == "kalman":
        variant[((r["sweep"], r["epsilon"], r["w"], r["ratio"]), r["rep"])] = float(r["mse"])
for point in sorted({p for p, _ in variant}):
    runs = base[point]
    reps = sorted({rep for p, rep in variant if p == point})
    others = {c for c, _ in runs if c != "Adaptive+KF" and all((c, r) in runs for r in reps)}
    best = min(others, key=lambda c: statistics.mean(runs[(c, r)] for r in reps))
    to_best = statistics.mean(variant[(point, r)] / runs[(best, r)] for r in reps)
    now = statistics.mean(runs[("Adaptive+KF", r)] / runs[(best, r)] for r in reps)
    print(f"{point}: best other {best}, variant / best {to_best:.3f}, default / best {now:.3f}")
