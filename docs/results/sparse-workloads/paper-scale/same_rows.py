"""Adaptive's rows here against the committed rows of the same seeded grid points (../README.md).

    .venv/bin/python docs/results/sparse-workloads/paper-scale/same_rows.py

The noise is seeded per task and mechanism (`--seed 1`), so the same code and the same decisions give the
same rows to the last digit; prints how many of this folder's Adaptive rows (raw and +KF) have the MSE
and the family note of the committed row at the same dataset, point and repetition.
"""

from __future__ import annotations

import csv
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parents[1]
PAIRS = {"defaults": ["every-mechanism-at-the-defaults"], "sweeps": ["epsilon-sweep-paper", "w-ratio-sweeps-paper"]}


def adaptive_rows(paths: list[Path]) -> dict[tuple[str, ...], dict[str, str]]:
    out = {}
    for path in paths:
        with path.open(encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                if row["mechanism"] == "Adaptive":
                    key = tuple(row[k] for k in ("dataset", "post", "sweep", "epsilon", "w", "ratio", "rep"))
                    out[key] = row
    return out


for folder, committed in PAIRS.items():
    mine = adaptive_rows([HERE / folder / "runs.csv"])
    theirs = adaptive_rows([RESULTS / name / "runs.csv" for name in committed])
    same = [k for k in mine
            if k in theirs and (mine[k]["mse"], mine[k]["note"]) == (theirs[k]["mse"], theirs[k]["note"])]
    notes = sorted({(k[0], mine[k]["note"]) for k in mine})
    print(f"{folder}: {len(same)} of {len(mine)} rows equal to {', '.join(committed)}; families: {notes}")
