"""The before/after tables of docs/results/robust-default/README.md from two runs.csv files:
`python docs/results/robust-default/compare.py BEFORE/runs.csv AFTER/runs.csv` (Adaptive rows only;
means with 95% t-intervals over repetitions, ratios paired per repetition)."""
import csv
import sys
from collections import defaultdict

import numpy as np
from scipy import stats


def load(path):
    out = defaultdict(dict)
    for row in csv.DictReader(open(path)):
        if row["mechanism"] != "Adaptive":
            continue
        key = (row["dataset"], row["post"])
        coverage = float(row["coverage"]) if row["coverage"] else None
        out[key][int(row["rep"])] = (float(row["mse"]), float(row["mae"]), coverage)
    return out


def ci(values):
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return float(values.mean()), 0.0
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return float(values.mean()), float(half)


def share(values):
    return f"{100 * np.mean(values):.1f}%" if values else "-"


def fmt(m, h):
    if abs(m) >= 1e6:
        return f"{m:.3g} ± {h:.2g}"
    if abs(m) >= 100:
        return f"{m:,.0f} ± {h:,.0f}"
    return f"{m:.2f} ± {h:.2f}"


before, after = load(sys.argv[1]), load(sys.argv[2])
datasets = ["TLNS", "Sin", "Log", "Foursquare"]
print("| dataset | release | MSE before | MSE after | after/before (paired) | MAE before | MAE after "
      "| coverage before | coverage after |")
print("|---|---|---|---|---|---|---|---|---|")
for base in datasets:
    for ds in (base, base + "+griefer"):
        for post in ("none", "kalman"):
            b, a = before.get((ds, post)), after.get((ds, post))
            if not b or not a:
                continue
            reps = sorted(set(b) & set(a))
            mb, ma = [b[r][0] for r in reps], [a[r][0] for r in reps]
            ratio = ci([x / y for x, y in zip(ma, mb, strict=True)])
            cov_b = [b[r][2] for r in reps if b[r][2] is not None]
            cov_a = [a[r][2] for r in reps if a[r][2] is not None]
            name = "raw" if post == "none" else "+KF"
            print(f"| {ds} | {name} | {fmt(*ci(mb))} | {fmt(*ci(ma))} | {ratio[0]:.3g} ± {ratio[1]:.2g} | "
                  f"{fmt(*ci([b[r][1] for r in reps]))} | {fmt(*ci([a[r][1] for r in reps]))} | "
                  f"{share(cov_b)} | {share(cov_a)} |")
print()
print("Griefer effect after the change (paired per repetition, MSE(X+griefer) / MSE(X)):")
print()
print("| dataset | raw | +KF |")
print("|---|---|---|")
for base in datasets:
    cells = []
    for post in ("none", "kalman"):
        x, g = after.get((base, post)), after.get((base + "+griefer", post))
        if not x or not g:
            cells.append("-")
            continue
        reps = sorted(set(x) & set(g))
        r = ci([g[k][0] / x[k][0] for k in reps])
        cells.append(f"{r[0]:.4f} ± {r[1]:.4f}")
    print(f"| {base} | {cells[0]} | {cells[1]} |")
