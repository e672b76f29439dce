"""Reporting of `pwevent evaluate` (docs/evaluation.md, "Outputs"): the Markdown summary, led by one
table of the project default against every mechanism on every dataset, and the plots with their 95%
intervals and reference lines, from the result rows of jobs/evaluation/evaluate.py.

Which mechanisms and datasets exist is read from the rows themselves, so a mechanism added to the
grid appears in every table and plot without a change here; the evaluation-only references
(jobs/evaluation/references.py) are the rows with `post = reference`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from pwevent.jobs.evaluation.grid import GridSpec, Run
from pwevent.jobs.evaluation.references import ORACLE, REFERENCE, ZERO

if TYPE_CHECKING:
    from matplotlib.axes import Axes

DEFAULT = "Adaptive+KF"
FILTERED = "+KF"
# The paper's own claims (Du et al.): each personalized mechanism against the baseline it extends.
# These name the claims checked, not the mechanisms run; a pair is shown when both are in the rows.
PAPER_COMPARISONS = (("PBD", "BD"), ("PBA", "BA"), ("DPBD", "BD"), ("DPBA", "BA"))
T_975 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         15: 2.131, 20: 2.086, 30: 2.042}
MARKERS = "osD^vPX*h<>p"
SWEEPS = (("epsilon", "E (lowest personalized budget)"), ("w", "w (longest personalized window)"),
          ("ratio", "o (share of users at the strictest level)"))


@dataclass(frozen=True)
class Interval:
    """Mean and 95% t-interval half-width over repetitions (the t quantile of the largest tabulated
    degrees of freedom not above n - 1, so never narrower than the exact interval)."""

    mean: float
    half: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Interval:
        a = np.asarray(list(values), dtype=float)
        if len(a) < 2:
            return cls(float(a.mean()), math.nan, len(a))
        df = len(a) - 1
        t = T_975[max(k for k in T_975 if k <= df)]
        return cls(float(a.mean()), float(t * a.std(ddof=1) / math.sqrt(len(a))), len(a))

    @property
    def low(self) -> float:
        return self.mean - self.half

    @property
    def high(self) -> float:
        return self.mean + self.half

    def render(self, digits: int = 0) -> str:
        if math.isnan(self.half):
            return f"{self.mean:,.{digits}f}"
        return f"{self.mean:,.{digits}f} ± {self.half:,.{digits}f}"

    def render_ratio(self) -> str:
        """Three significant digits for ratios between 0.01 and 1,000."""
        digits = 0 if abs(self.mean) >= 100 else 1 if abs(self.mean) >= 10 else 2 if abs(self.mean) >= 0.1 else 3
        return self.render(digits)


def label(run: Run) -> str:
    """'PBD' raw, 'PBD+KF' post-processed, the reference's own name for a reference row."""
    return f"{run.mechanism}{FILTERED}" if run.post == "kalman" else run.mechanism


def _ordered(names: Iterable[str], first: Iterable[str] = ()) -> list[str]:
    """Distinct names, those of `first` in its order, then the others in order of appearance."""
    seen = list(dict.fromkeys(names))
    preferred = [n for n in first if n in seen]
    return preferred + [n for n in seen if n not in preferred]


def mechanisms_of(runs: list[Run], first: Iterable[str] = ()) -> list[str]:
    """The mechanisms in the rows (references excluded): those named in `first` (the grid's) in its
    order, then any other in order of appearance."""
    return _ordered((r.mechanism for r in runs if r.post != REFERENCE), first)


def labels_of(runs: list[Run], first: Iterable[str] = ()) -> list[str]:
    """Every raw label, then every post-processed one, in mechanism order."""
    posts = {(r.mechanism, r.post) for r in runs}
    names = mechanisms_of(runs, first)
    return [m for m in names if (m, "none") in posts] + [f"{m}{FILTERED}" for m in names if (m, "kalman") in posts]


def references_of(runs: list[Run]) -> list[str]:
    return _ordered(r.mechanism for r in runs if r.post == REFERENCE)


def datasets_of(runs: list[Run], grid: GridSpec) -> list[str]:
    return _ordered((r.dataset for r in runs), grid.datasets)


Paired = dict[str, dict[str, dict[int, "Run"]]]


def default_runs(runs: list[Run], grid: GridSpec) -> Paired:
    """dataset -> label -> rep -> run at the default point (E, w, paper's uniform draw)."""
    out: Paired = defaultdict(lambda: defaultdict(dict))
    for run in runs:
        if run.epsilon == grid.epsilon and run.w == grid.default_w(run.dataset) and run.ratio is None:
            out[run.dataset][label(run)][run.rep] = run
    return out


def paired_ratio(a: dict[int, Run], b: dict[int, Run]) -> Interval:
    """Mean over repetitions of MSE(a)/MSE(b) on the same data, with its 95% interval."""
    reps = sorted(set(a) & set(b))
    return Interval.of([a[r].mse / b[r].mse for r in reps])


def lead_table(base: Paired, datasets: list[str], labels: list[str], references: list[str],
               default: str = DEFAULT) -> list[str]:
    """The default against every mechanism on every dataset: the default's MSE, then for each other
    variant and reference the paired ratio MSE(X) / MSE(default) with its 95% interval. Above 1 the
    default is better; bold marks a variant whose whole interval lies below 1 (it beats the default)."""
    rows = [f"| MSE(X) / MSE({default}), paired | " + " | ".join(datasets) + " |",
            "|---" * (len(datasets) + 1) + "|",
            f"| **{default} (default): MSE** | " + " | ".join(
                _mse_cell(base[d][default]) if base[d].get(default) else "-" for d in datasets) + " |"]
    for name in [x for x in labels if x != default] + references:
        cells = []
        for d in datasets:
            if not (base[d].get(name) and base[d].get(default)):
                cells.append("-")
                continue
            ratio = paired_ratio(base[d][name], base[d][default])
            text = ratio.render_ratio()
            cells.append(f"**{text}**" if ratio.high < 1 and name not in references else text)
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


#: The point of a row: (sweep, E, w, o).
Point = tuple[str, float, int, float | None]
#: How far above the best other configuration's MSE the default may be and still count as "within"
#: (issue of the release analysts receive: within 5% of the best at every point).
WITHIN = 1.05


def _point_name(point: Point) -> str:
    sweep, epsilon, w, ratio = point
    return {"epsilon": f"E = {epsilon}", "w": f"w = {w}"}.get(sweep, f"o = {ratio}")


def best_other_table(runs: list[Run], datasets: list[str], default: str = DEFAULT) -> list[str]:
    """Per dataset and point of every sweep: the default's mean MSE, the other configuration (every
    mechanism raw and +KF, references excluded) with the lowest mean MSE, the paired ratio
    MSE(default) / MSE(best) (below 1 the default is better; `WITHIN` and below counts as within),
    the paired ratio all-zero / default, and the default's interval coverage (all and occupied)."""
    by_point: dict[tuple[str, Point], dict[str, dict[int, Run]]] = defaultdict(lambda: defaultdict(dict))
    for run in runs:
        by_point[(run.dataset, (run.sweep, run.epsilon, run.w, run.ratio))][label(run)][run.rep] = run
    rows = ["| dataset | point | default MSE | best other | its MSE | MSE(default) / MSE(best), paired | "
            f"within {WITHIN - 1:.0%} | all-zero / default, paired | coverage | coverage, occupied |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    order = {name: i for i, (name, _) in enumerate(SWEEPS)}
    for d in datasets:
        points = sorted((p for dd, p in by_point if dd == d), key=lambda p: (order[p[0]], p[1], p[2], p[3] or 0.0))
        for point in points:
            results = by_point[(d, point)]
            mine = results.get(default)
            others = {name: _mean(rs) for name, rs in results.items()
                      if name != default and next(iter(rs.values())).post != REFERENCE}
            if not mine or not others:
                continue
            best = min(others, key=others.__getitem__)
            ratio = paired_ratio(mine, results[best])
            zero = paired_ratio(results[ZERO], mine).render_ratio() if results.get(ZERO) else "-"
            rows.append(f"| {d} | {_point_name(point)} | {_number(_mean(mine))} | {best} | {_number(others[best])} "
                        f"| {ratio.render(3)} | {'yes' if ratio.mean <= WITHIN else '**no**'} | {zero} "
                        f"| {_coverage([r.coverage for r in mine.values()])} "
                        f"| {_coverage([r.coverage_occupied for r in mine.values()])} |")
    return rows


def _mse_cell(runs: dict[int, Run]) -> str:
    iv = Interval.of(r.mse for r in runs.values())
    return iv.render(0 if abs(iv.mean) >= 100 else 2)


def _mean(runs: dict[int, Run]) -> float:
    return float(np.mean([r.mse for r in runs.values()]))


def dynamic_users(grid: GridSpec) -> str:
    """How the dynamic mechanisms' users declared (`GridSpec.dynamic_draw`), for the summary's header."""
    if grid.dynamic_draw == "fixed":
        return ("dynamic mechanisms: every user declares its fixed draw once (forward; backward (1, 10)), "
                "the fixed mechanisms' protection.")
    return f"dynamic: K = {grid.types} types, redraw every S = {grid.change_every} slots."


def requirements_note(grid: GridSpec) -> str:
    """What "the same requirements" means in the lead table under `GridSpec.dynamic_draw`."""
    if grid.dynamic_draw == "fixed":
        return "the dynamic mechanisms' users declare the fixed draw's requirements"
    return ("the dynamic mechanisms' users their own draw, looser than the fixed one in distribution: "
            "`--dynamic-requirements fixed` compares at equal protection")


def summary_markdown(runs: list[Run], grid: GridSpec, command: str, seconds: float | None,
                     default: str = DEFAULT) -> str:
    """The lead table, then the MSE at the defaults, the paper's ratios, post-processing gains,
    other metrics and every sweep."""
    base = default_runs(runs, grid)
    datasets = [d for d in datasets_of(runs, grid) if d in base]
    labels, references = labels_of(runs, grid.mechanisms), references_of(runs)
    lines = ["# Evaluation results", "", f"Regenerate: `{command}`", "",
             f"Noise: {runs[0].noise if runs else '-'} (fast experimental backend, docs/mechanisms.md section 10). "
             f"Users {grid.users}, slots {grid.slots} (synthetic); Foursquare slot {grid.real_slot_minutes} min; "
             "sparse workloads at their own size and windows (docs/evaluation.md); "
             f"repetitions {grid.reps}; {dynamic_users(grid)} "
             "Intervals: 95% t-intervals over repetitions.", ""]
    if seconds is not None:
        lines += [f"Wall time of the grid: {seconds / 60:.1f} min on {grid.workers} worker processes.", ""]
    lines += [f"## The default ({default}) against every mechanism (E = {grid.epsilon}, w = {grid.w}; a sparse "
              "workload's w is its own widest window)", "",
              f"Each cell: the mean over repetitions of MSE(X) / MSE({default}) on the same data and requirements "
              f"({requirements_note(grid)}), "
              f"with its 95% interval; above 1 the default is better, **bold**: X beats the default (its whole "
              f"interval below 1). References (evaluation-only, docs/evaluation.md): `{ORACLE}` = the expected "
              f"histogram given the generator's p_t (synthetic only), `{ZERO}` = publishing nothing.", ""]
    lines += lead_table(base, datasets, labels, references, default) if any(
        base[d].get(default) for d in datasets) else [f"({default} is not in the rows.)"]
    lines += ["", f"## MSE at the defaults (E = {grid.epsilon}, w = {grid.w} or a sparse workload's own widest window, "
              "personalized uniform draw)", ""]
    lines += ["| mechanism | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
    for name in labels + references:
        cells = [_mse_cell(base[d][name]) if base[d].get(name) else "-" for d in datasets]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## MAE at the defaults (mean absolute error per cell, the score of the w-event benchmark of "
              "PVLDB 2023; 95% interval)", ""]
    lines += ["| mechanism | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
    for name in labels + references:
        cells = [Interval.of(r.mae for r in base[d][name].values()).render(2) if base[d].get(name) else "-"
                 for d in datasets]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    pairs = [(a, b) for a, b in PAPER_COMPARISONS if a in labels and b in labels]
    if pairs:
        lines += ["", "## The paper's comparisons at the defaults (mean of per-repetition ratios, 95% interval)", ""]
        lines += ["| ratio | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
        for a, b in pairs:
            cells = [paired_ratio(base[d][a], base[d][b]).render(3) if base[d].get(a) and base[d].get(b) else "-"
                     for d in datasets]
            lines.append(f"| {a}/{b} | " + " | ".join(cells) + " |")
    lines += ["", "## Post-processing and the best raw mechanism", "",
              f"best raw = the raw release with the lowest mean MSE at the defaults, the default's own mechanism "
              f"excluded; gain = MSE(best raw) / MSE(X), paired per repetition; the project default is {default}.", ""]
    lines += ["| dataset | best raw | its MSE | best +KF | its MSE | gain | default's MSE | default's gain |",
              "|---|---|---|---|---|---|---|---|"]
    own = default.removesuffix(FILTERED)
    for d in datasets:
        raw = {m: _mean(base[d][m]) for m in labels if not m.endswith(FILTERED) and m != own and base[d].get(m)}
        kf = {m: _mean(base[d][m]) for m in labels if m.endswith(FILTERED) and base[d].get(m)}
        if not raw or not kf:
            continue
        best, best_kf = min(raw, key=raw.__getitem__), min(kf, key=kf.__getitem__)
        gain = paired_ratio(base[d][best], base[d][best_kf])
        row = f"| {d} | {best} | {raw[best]:,.1f} | {best_kf} | {kf[best_kf]:,.1f} | {gain.render(2)} |"
        if base[d].get(default):
            row += f" {_mse_cell(base[d][default])} | {paired_ratio(base[d][best], base[d][default]).render(2)} |"
        else:
            row += " - | - |"
        lines.append(row)
    lines += ["", "## Other metrics at the defaults (means)", "",
              "coverage: the share of true counts inside the releases' nominal 95% intervals (Kalman rows); "
              "occupied: the same over the (slot, cell) whose true count is above 0 (an interval clipped at 0 "
              "holds every true 0).", "",
              "| dataset | mechanism | MSE | MAE | MRE | AJSD | coverage | occupied | publications | s/run | note |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for d in datasets:
        for name in labels + references:
            rs = list(base[d].get(name, {}).values())
            if rs:
                notes = sorted({r.note for r in rs})
                note = rs[0].note if len(notes) == 1 else "; ".join(f"{sum(r.note == n for r in rs)}x {n}"
                                                                    for n in notes)
                lines.append(f"| {d} | {name} | {np.mean([r.mse for r in rs]):,.1f} "
                             f"| {np.mean([r.mae for r in rs]):.2f} "
                             f"| {np.mean([r.mre for r in rs]):.4f} | {np.mean([r.ajsd for r in rs]):.2e} "
                             f"| {_coverage([r.coverage for r in rs])} "
                             f"| {_coverage([r.coverage_occupied for r in rs])} "
                             f"| {np.mean([r.publications for r in rs]):.0f} | {np.mean([r.seconds for r in rs]):.2f} "
                             f"| {note} |")
    lines += ["", "## The default against the best other configuration at every point", "",
              f"Per dataset and point: the default's ({default}) mean MSE, the other configuration with the lowest "
              f"mean MSE (every mechanism raw and +KF; references excluded), the paired ratio MSE(default) / "
              f"MSE(best) with its 95% interval (below 1 the default is better; within: a mean of at most {WITHIN}), "
              f"the paired ratio all-zero / default (above 1 the default beats publishing nothing) and the share of "
              f"true counts inside the default's nominal 95% intervals, over all (slot, cell) and over the occupied.",
              ""]
    lines += best_other_table(runs, datasets_of(runs, grid), default)
    lines += ["", "## Sweeps (mean MSE)", ""]
    for d in datasets:
        for sweep, _ in SWEEPS:
            table = _sweep_table(runs, d, sweep, labels + references, grid)
            if table:
                lines += [f"### {d}: MSE vs {sweep}", ""] + table + [""]
    return "\n".join(lines) + "\n"


def _coverage(values: list[float | None]) -> str:
    shares = [share for share in values if share is not None]
    return f"{np.mean(shares):.1%}" if shares else "-"


def sweep_values(runs: list[Run], dataset: str, sweep: str, grid: GridSpec) -> dict[str, dict[float, list[float]]]:
    """label -> sweep value -> MSE of each repetition, on one sweep of one dataset."""
    out: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if run.dataset != dataset:
            continue
        if sweep == "epsilon":
            on_sweep = run.w == grid.default_w(dataset) and run.ratio is None
        elif sweep == "w":
            on_sweep = run.epsilon == grid.epsilon and run.ratio is None
        else:
            on_sweep = run.sweep == "ratio"
        if on_sweep:
            out[label(run)][getattr(run, sweep)].append(run.mse)
    return out


def _number(value: float) -> str:
    """Whole numbers with separators from 100 up, three significant digits below."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _sweep_table(runs: list[Run], dataset: str, sweep: str, labels: list[str], grid: GridSpec) -> list[str]:
    values = sweep_values(runs, dataset, sweep, grid)
    xs = sorted({x for v in values.values() for x in v})
    if len(xs) < 2:
        return []
    rows = ["| mechanism | " + " | ".join(f"{sweep}={x}" for x in xs) + " |", "|---" * (len(xs) + 1) + "|"]
    for name in labels:
        if name in values:
            rows.append(f"| {name} | " + " | ".join(
                _number(float(np.mean(values[name][x]))) if values[name].get(x) else "-" for x in xs) + " |")
    return rows


def _curve(points: dict[float, list[float]]) -> tuple[list[float], np.ndarray, np.ndarray]:
    """x values, means and 95% half-widths (0 with a single repetition)."""
    xs = sorted(points)
    intervals = [Interval.of(points[x]) for x in xs]
    return xs, np.array([i.mean for i in intervals]), np.nan_to_num(np.array([i.half for i in intervals]))


OFF_SCALE = 30.0  # a reference line more than this factor above the highest band is written, not drawn


def _draw_panel(ax: Axes, values: dict[str, dict[float, list[float]]], names: list[str], post: str,
                default: str) -> tuple[float, float]:
    """One panel (raw or +KF): each mechanism's mean with its 95% band; returns the data's (low, high)."""
    low, high = math.inf, 0.0
    for i, name in enumerate(names):
        key = f"{name}{FILTERED}" if post == "kalman" else name
        if key not in values:
            continue
        xs, mean, half = _curve(values[key])
        is_default = key == default
        color = "black" if is_default else f"C{i % 10}"
        ax.plot(xs, mean, "--" if post == "kalman" else "-", color=color, marker=MARKERS[i % len(MARKERS)],
                markersize=7 if is_default else 5, linewidth=2.8 if is_default else 1.4, zorder=4 if is_default else 3,
                markerfacecolor="none" if post == "kalman" and not is_default else color)
        lower = np.where(mean - half > 0, mean - half, mean / 2)
        ax.fill_between(xs, lower, mean + half, color=color, alpha=0.12, linewidth=0)
        low, high = min(low, float(lower.min())), max(high, float((mean + half).max()))
    return low, high


def plot(runs: list[Run], grid: GridSpec, out: Path, default: str = DEFAULT) -> list[Path]:
    """MSE (log scale) vs E, vs w and vs o per dataset: raw releases (solid, filled markers) on the left,
    Kalman-filtered (dashed, hollow markers) on the right, every mechanism of the rows with its 95%
    band, the default drawn thick and black, and the references as grey horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    names, references = mechanisms_of(runs, grid.mechanisms), references_of(runs)
    ref_style: dict[str, tuple[Literal[":", "-.", "--"], str]] = {
        ORACLE: (":", "oracle floor (binomial variance)"), ZERO: ("-.", "all-zero release")}
    written = []
    for dataset in datasets_of(runs, grid):
        for sweep, xlabel in SWEEPS:
            values = sweep_values(runs, dataset, sweep, grid)
            if not values or len({x for v in values.values() for x in v}) < 2:
                continue
            fig, axes = plt.subplots(1, 2, figsize=(12, 6), sharey=True)
            low, high = math.inf, 0.0
            for ax, post, title in ((axes[0], "none", "raw releases (solid)"),
                                    (axes[1], "kalman", "with the Kalman filter bank, +KF (dashed)")):
                lo, hi = _draw_panel(ax, values, names, post, default)
                low, high = min(low, lo), max(high, hi)
                ax.set_title(title, fontsize=11)
                ax.set_xlabel(xlabel, fontsize=10)
                ax.set_xticks(sorted({x for v in values.values() for x in v}))
                ax.grid(True, which="both", alpha=0.3)
                ax.tick_params(labelsize=9)
            handles = [Line2D([], [], color=f"C{i % 10}", marker=MARKERS[i % len(MARKERS)], label=name)
                       for i, name in enumerate(names) if name in values or f"{name}{FILTERED}" in values]
            handles += [Line2D([], [], color="0.4", marker="o", label="raw: solid, filled"),
                        Line2D([], [], color="0.4", marker="o", linestyle="--", markerfacecolor="none",
                               label=f"{FILTERED}: dashed, hollow")]
            own = default.removesuffix(FILTERED)
            if default in values and own in names:
                handles.append(Line2D([], [], color="black", marker=MARKERS[names.index(own) % len(MARKERS)],
                                      linewidth=2.8, linestyle="--", label=f"{default} (the default)"))
            off_scale = []
            for name in references:
                if name not in values:
                    continue
                level = float(np.mean([v for vs in values[name].values() for v in vs]))
                style, text = ref_style.get(name, ("--", name))
                if high > 0 and level > OFF_SCALE * high:
                    off_scale.append(f"{text}: {level:.3g} (off the scale)")
                    continue
                for ax in axes:
                    ax.axhline(level, color="0.35", linestyle=style, linewidth=1.6, zorder=2)
                handles.append(Line2D([], [], color="0.35", linestyle=style, linewidth=1.6,
                                      label=f"{text}: {_number(level)}"))
                low, high = min(low, level), max(high, level)
            axes[0].set_yscale("log")
            if math.isfinite(low) and high > 0:
                axes[0].set_ylim(max(low, 1e-12) / 1.5, high * 1.5)
            axes[0].set_ylabel("MSE (paper's AMRE), 95% bands", fontsize=10)
            if off_scale:
                axes[0].text(0.02, 0.98, "\n".join(off_scale), transform=axes[0].transAxes, va="top", fontsize=9,
                             color="0.25")
            fig.suptitle(f"{dataset}: MSE vs {sweep} (mean over repetitions)", fontsize=12)
            columns = 5
            fig.legend(handles=handles, loc="lower center", ncol=columns, fontsize=9, frameon=False)
            fig.tight_layout(rect=(0, 0.045 * math.ceil(len(handles) / columns) + 0.01, 1, 1))
            path = out / f"{dataset.lower()}_mse_vs_{sweep}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written
