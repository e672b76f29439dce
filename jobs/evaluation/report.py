"""Reporting of `pwevent evaluate` (docs/evaluation.md): the Markdown summary with 95% intervals and
paired ratios, and the paper-style plots, from the result rows of jobs/evaluation/evaluate.py."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pwevent.operators.registry import REGISTRY

if TYPE_CHECKING:
    from pwevent.jobs.evaluation.evaluate import GridSpec, Run

DEFAULT = "Adaptive+KF"
FILTERED_PLOTTED = ("Adaptive+KF", "Uniform+KF", "PBA+KF", "BA+KF")
T_975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         15: 2.131, 20: 2.086, 30: 2.042}


@dataclass(frozen=True)
class Interval:
    """Mean and 95% t-interval half-width over repetitions."""

    mean: float
    half: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> Interval:
        a = np.asarray(values, dtype=float)
        if len(a) < 2:
            return cls(float(a.mean()), math.nan, len(a))
        df = len(a) - 1
        t = T_975[max(k for k in T_975 if k <= df)]
        return cls(float(a.mean()), float(t * a.std(ddof=1) / math.sqrt(len(a))), len(a))

    def render(self, digits: int = 0) -> str:
        return f"{self.mean:,.{digits}f} ± {self.half:,.{digits}f}"


def _label(run: Run) -> str:
    return run.mechanism if run.post == "none" else f"{run.mechanism}+KF"


def default_runs(runs: list[Run], grid: GridSpec) -> dict[str, dict[str, dict[int, Run]]]:
    """dataset -> label -> rep -> run at the default point (E, w, paper's uniform draw)."""
    out: dict[str, dict[str, dict[int, Run]]] = defaultdict(lambda: defaultdict(dict))
    for run in runs:
        if run.epsilon == grid.epsilon and run.w == grid.w and run.ratio is None:
            out[run.dataset][_label(run)][run.rep] = run
    return out


def paired_ratio(a: dict[int, Run], b: dict[int, Run]) -> Interval:
    """Mean over repetitions of MSE(a)/MSE(b) on the same data, with its 95% interval."""
    reps = sorted(set(a) & set(b))
    return Interval.of([a[r].mse / b[r].mse for r in reps])


def summary_markdown(runs: list[Run], grid: GridSpec, command: str, seconds: float | None) -> str:
    """Tables of the default point, the paper's ratios, post-processing gains and every sweep."""
    base = default_runs(runs, grid)
    lines = ["# Evaluation results", "", f"Regenerate: `{command}`", "",
             f"Noise: {runs[0].noise if runs else '-'} (fast experimental backend, docs/mechanisms.md section 10). "
             f"Users {grid.users}, slots {grid.slots} (synthetic); Foursquare slot {grid.real_slot_minutes} min; "
             f"repetitions {grid.reps}; dynamic: K = {grid.types} types, redraw every S = {grid.change_every} slots. "
             "Intervals: 95% t-intervals over repetitions.", ""]
    if seconds is not None:
        lines += [f"Wall time of the grid: {seconds / 60:.1f} min on {grid.workers} worker processes.", ""]
    lines += [f"## MSE at the defaults (E = {grid.epsilon}, w = {grid.w}, personalized uniform draw)", ""]
    datasets = [d for d in grid.datasets if d in base]
    labels = [m for m in grid.mechanisms] + [f"{m}+KF" for m in grid.mechanisms]
    lines += ["| mechanism | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
    for label in labels:
        cells = [Interval.of([r.mse for r in base[d][label].values()]).render() if base[d].get(label) else "-"
                 for d in datasets]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "## Paired MSE ratios at the defaults (mean of per-repetition ratios, 95% interval)", ""]
    pairs = [("PBD", "BD"), ("PBA", "BA"), ("DPBD", "BD"), ("DPBA", "BA")]
    lines += ["| ratio | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
    for a, b in pairs:
        cells = [paired_ratio(base[d][a], base[d][b]).render(3) if base[d].get(a) and base[d].get(b) else "-"
                 for d in datasets]
        lines.append(f"| {a}/{b} | " + " | ".join(cells) + " |")
    lines += ["", "## Post-processing and the best raw mechanism", "",
              "best raw = the paper mechanism or baseline with the lowest mean MSE at the defaults; "
              f"gain = MSE(best raw) / MSE(X+KF), paired per repetition; the project default is {DEFAULT}.", ""]
    lines += ["| dataset | best raw | its MSE | best +KF | its MSE | gain | default's MSE | default's gain |",
              "|---|---|---|---|---|---|---|---|"]
    raw = [m for m in grid.mechanisms if REGISTRY.get(m).from_literature]
    for d in datasets:
        means = {m: np.mean([r.mse for r in base[d][m].values()]) for m in raw if base[d].get(m)}
        kf = {m: np.mean([r.mse for r in base[d][f"{m}+KF"].values()]) for m in grid.mechanisms
              if base[d].get(f"{m}+KF")}
        if not means or not kf:
            continue
        best, best_kf = min(means, key=means.__getitem__), min(kf, key=kf.__getitem__)
        gain = paired_ratio(base[d][best], base[d][f"{best_kf}+KF"])
        row = f"| {d} | {best} | {means[best]:,.1f} | {best_kf}+KF | {kf[best_kf]:,.1f} | {gain.render(2)} |"
        if base[d].get(DEFAULT):
            default = Interval.of([r.mse for r in base[d][DEFAULT].values()])
            row += f" {default.render(1)} | {paired_ratio(base[d][best], base[d][DEFAULT]).render(2)} |"
        else:
            row += " - | - |"
        lines.append(row)
    lines += ["", "## Other metrics at the defaults (means)", "",
              "| dataset | mechanism | MSE | MAE | MRE | AJSD | publications | s/run | note |",
              "|---|---|---|---|---|---|---|---|---|"]
    for d in datasets:
        for label in labels:
            rs = list(base[d].get(label, {}).values())
            if rs:
                lines.append(f"| {d} | {label} | {np.mean([r.mse for r in rs]):,.1f} "
                             f"| {np.mean([r.mae for r in rs]):.2f} "
                             f"| {np.mean([r.mre for r in rs]):.4f} | {np.mean([r.ajsd for r in rs]):.2e} "
                             f"| {np.mean([r.publications for r in rs]):.0f} | {np.mean([r.seconds for r in rs]):.2f} "
                             f"| {rs[0].note} |")
    lines += ["", "## Sweeps (mean MSE)", ""]
    for d in datasets:
        for sweep, param in (("epsilon", "epsilon"), ("w", "w"), ("ratio", "ratio")):
            table = _sweep_table(runs, d, sweep, param, labels, grid)
            if table:
                lines += [f"### {d}: MSE vs {param}", ""] + table + [""]
    return "\n".join(lines) + "\n"


def _sweep_values(runs: list[Run], dataset: str, sweep: str, param: str, grid: GridSpec) -> dict[str, dict]:
    out: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if run.dataset != dataset:
            continue
        if sweep == "epsilon":
            on_sweep = run.w == grid.w and run.ratio is None
        elif sweep == "w":
            on_sweep = run.epsilon == grid.epsilon and run.ratio is None
        else:
            on_sweep = run.sweep == "ratio"
        if on_sweep:
            out[_label(run)][getattr(run, param)].append(run.mse)
    return out


def _number(value: float) -> str:
    """Whole numbers with separators from 100 up, three significant digits below."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _sweep_table(runs: list[Run], dataset: str, sweep: str, param: str, labels: list[str], grid: GridSpec) -> list[str]:
    values = _sweep_values(runs, dataset, sweep, param, grid)
    xs = sorted({x for v in values.values() for x in v})
    if len(xs) < 2:
        return []
    rows = ["| mechanism | " + " | ".join(f"{param}={x}" for x in xs) + " |", "|---" * (len(xs) + 1) + "|"]
    for label in labels:
        if label in values:
            rows.append(f"| {label} | " + " | ".join(
                _number(float(np.mean(values[label][x]))) if values[label].get(x) else "-" for x in xs) + " |")
    return rows


def matplotlib_missing() -> str | None:
    """Why plots cannot be drawn (matplotlib is the optional extra `evaluate`), or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return ("pwevent evaluate draws its plots with matplotlib, an optional dependency: "
                "pip install 'pwevent[evaluate]'")
    return None


def plot(runs: list[Run], grid: GridSpec, out: Path) -> list[Path]:
    """Paper-style plots: MSE (log scale) vs E, vs w, vs o per dataset; solid = raw, dashed = with
    Kalman (only for FILTERED_PLOTTED, to keep the figure readable; every value is in the summary)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for dataset in grid.datasets:
        for sweep, param, xlabel in (("epsilon", "epsilon", "E"), ("w", "w", "w"),
                                     ("ratio", "ratio", "o (share of users at the strictest level)")):
            values = _sweep_values(runs, dataset, sweep, param, grid)
            if not values or len({x for v in values.values() for x in v}) < 2:
                continue
            fig, ax = plt.subplots(figsize=(6, 4))
            for i, name in enumerate(grid.mechanisms):
                for label, style in ((name, "-"), (f"{name}+KF", "--")):
                    if style == "--" and label not in FILTERED_PLOTTED:
                        continue
                    if label not in values:
                        continue
                    xs = sorted(values[label])
                    ax.plot(xs, [np.mean(values[label][x]) for x in xs], style, marker="os^vDx<>*"[i % 9],
                            color=f"C{i}", label=label, markersize=4)
            ax.set_yscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel("MSE (paper's AMRE)")
            ax.set_title(f"{dataset}: MSE vs {xlabel.split(' ')[0]}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6, ncol=3)
            fig.tight_layout()
            path = out / f"{dataset.lower()}_mse_vs_{param}.png"
            fig.savefig(path, dpi=120)
            plt.close(fig)
            written.append(path)
    return written
