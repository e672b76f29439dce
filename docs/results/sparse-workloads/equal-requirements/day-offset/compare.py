"""The default with the day offset against the best other configuration at equal requirements.

    python compare.py BASE_RUNS VARIANT_RUNS

BASE_RUNS: every configuration's rows (../runs.csv: the dynamic mechanisms at the fixed draw's
requirements); VARIANT_RUNS: the Adaptive rows of rule.py. Per dataset and E: the best other
configuration (lowest mean MSE, Adaptive+KF excluded), the variant's paired MSE ratio to it and to
the default as it is, with 95% t-intervals, and the variant's mean publications."""

import collections
import csv
import math
import statistics
import sys


def half(values):
    return 2.262 * statistics.stdev(values) / math.sqrt(len(values))  # t(0.975, 9): 10 repetitions


base = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    if r["post"] != "reference":
        label = r["mechanism"] + ("+KF" if r["post"] != "none" else "")
        base[(r["dataset"], r["epsilon"])][(label, r["rep"])] = float(r["mse"])
variant, publications = {}, collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[2])):
    if r["mechanism"] == "Adaptive" and r["post"] == "kalman":
        variant[(r["dataset"], r["epsilon"], r["rep"])] = float(r["mse"])
        publications[(r["dataset"], r["epsilon"])].append(int(r["publications"]))
for key in sorted({(d, e) for d, e, _ in variant}):
    runs = base[key]
    reps = sorted({rep for _, rep in runs})
    best = min({c for c, _ in runs} - {"Adaptive+KF"}, key=lambda c: statistics.mean(runs[(c, r)] for r in reps))
    to_best = [variant[(*key, r)] / runs[(best, r)] for r in reps]
    to_default = [variant[(*key, r)] / runs[("Adaptive+KF", r)] for r in reps]
    print(f"{key[0]:18s} E = {key[1]}  best other {best:9s}  variant / best {statistics.mean(to_best):.3f} ± "
          f"{half(to_best):.3f}  variant / default {statistics.mean(to_default):.3f} ± {half(to_default):.3f}  "
          f"publications {statistics.mean(publications[key]):.1f}")
