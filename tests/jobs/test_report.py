"""The evaluation report on a hand-written runs.csv (jobs/evaluation/report.py, docs/evaluation.md "Outputs").

No evaluation runs here: the rows are made up, so the table's numbers are known in advance."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.evaluation.datasets import SyntheticDataset
from pwevent.jobs.evaluation.evaluate import read_csv, write_csv
from pwevent.jobs.evaluation.grid import GridSpec, Run
from pwevent.jobs.evaluation.references import ORACLE, REFERENCE, ZERO, oracle_release, reference_errors
from pwevent.jobs.evaluation.report import (
    DEFAULT,
    Interval,
    best_other_table,
    default_runs,
    labels_of,
    lead_table,
    paired_ratio,
    plot,
    summary_markdown,
)

GRID = GridSpec(datasets=("Sin", "Foursquare"), mechanisms=("PBD", "BD", "Adaptive"), epsilons=(0.6, 1.0),
                windows=(120,), ratios=(), reps=3, users=100, slots=50, workers=1)
# MSE per (dataset, label) and repetition at the default point (E = 0.6, w = 120).
DEFAULT_POINT = {
    ("Sin", "Adaptive+KF"): [1.0, 2.0, 3.0],
    ("Sin", "PBD"): [2.0, 4.0, 9.0],  # ratios to the default 2, 2, 3
    ("Sin", "PBD+KF"): [0.5, 1.0, 1.5],  # ratios 0.5 each: beats the default
    ("Sin", "BD"): [4.0, 8.0, 12.0],
    ("Sin", "BD+KF"): [1.0, 2.0, 3.0],
    ("Sin", "Adaptive"): [1.5, 3.0, 4.5],  # the lowest raw MSE, but the default's own mechanism
    ("Foursquare", "Adaptive+KF"): [2.0, 2.0, 2.0],
    ("Foursquare", "PBD"): [4.0, 4.0, 4.0],
    ("Foursquare", "PBD+KF"): [3.0, 3.0, 3.0],
    ("Foursquare", "BD"): [8.0, 8.0, 8.0],
    ("Foursquare", "BD+KF"): [5.0, 5.0, 5.0],
    ("Foursquare", "Adaptive"): [9.0, 9.0, 9.0],
}
REFERENCES = {("Sin", ORACLE): 0.5, ("Sin", ZERO): 100.0, ("Foursquare", ZERO): 1.5}


def _run(dataset: str, name: str, post: str, epsilon: float, rep: int, mse: float) -> Run:
    return Run(dataset, name, post, "epsilon", epsilon, 120, None, rep, mse, 0.0, 0.0, 0.0, 0, 0.0,
               "numpy-geometric (fast)", "")


def _rows() -> list[Run]:
    rows = []
    for epsilon, scale in ((0.6, 1.0), (1.0, 0.5)):
        for (dataset, label), values in DEFAULT_POINT.items():
            name, post = (label[:-3], "kalman") if label.endswith("+KF") else (label, "none")
            rows += [_run(dataset, name, post, epsilon, rep, v * scale) for rep, v in enumerate(values)]
        for (dataset, name), value in REFERENCES.items():
            rows += [_run(dataset, name, REFERENCE, epsilon, rep, value) for rep in range(3)]
    return rows


def test_paired_ratio_is_the_mean_of_per_repetition_ratios_with_a_t_interval():
    base = default_runs(_rows(), GRID)
    ratio = paired_ratio(base["Sin"]["PBD"], base["Sin"]["Adaptive+KF"])
    ratios = np.array([2.0, 2.0, 3.0])
    assert ratio.mean == pytest.approx(7 / 3)
    assert ratio.half == pytest.approx(4.303 * ratios.std(ddof=1) / math.sqrt(3))
    assert ratio.render_ratio() == f"2.33 ± {ratio.half:.2f}"
    constant = paired_ratio(base["Foursquare"]["BD"], base["Foursquare"]["Adaptive+KF"])
    assert (constant.mean, constant.half) == (4.0, 0.0)


def test_interval_of_one_value_has_no_width_and_renders_without_one():
    single = Interval.of([5.0])
    assert math.isnan(single.half) and single.render() == "5"


def test_lead_table_has_every_mechanism_on_every_dataset():
    rows = _rows()
    base = default_runs(rows, GRID)
    assert labels_of(rows)[0] == "Adaptive"  # order of appearance
    labels = labels_of(rows, GRID.mechanisms)
    assert labels == ["PBD", "BD", "Adaptive", "PBD+KF", "BD+KF", "Adaptive+KF"]
    table = lead_table(base, ["Sin", "Foursquare"], labels, [ORACLE, ZERO])
    header, _, default, *others = table
    assert header.split(" | ")[1:] == ["Sin", "Foursquare |"]
    assert default == "| **Adaptive+KF (default): MSE** | 2.00 ± 2.48 | 2.00 ± 0.00 |"
    names = [row.split(" | ")[0].removeprefix("| ") for row in others]
    assert names == ["PBD", "BD", "Adaptive", "PBD+KF", "BD+KF", ORACLE, ZERO]
    cells = {name: row.split(" | ")[1:] for name, row in zip(names, others, strict=True)}
    assert all(len(c) == 2 for c in cells.values())
    assert cells["BD"] == ["4.00 ± 0.00", "4.00 ± 0.00 |"]
    assert cells["PBD+KF"][0] == "**0.50 ± 0.00**"  # beats the default: bold
    oracle = 0.5 / np.array([1.0, 2.0, 3.0])
    half = 4.303 * oracle.std(ddof=1) / math.sqrt(3)
    assert cells[ORACLE] == [f"{oracle.mean():.2f} ± {half:.2f}", "- |"]  # no oracle on real data


def test_summary_leads_with_the_table_and_keeps_the_papers_comparisons():
    summary = summary_markdown(_rows(), GRID, "pwevent evaluate ...", 60.0)
    sections = [line for line in summary.splitlines() if line.startswith("## ")]
    assert sections[0].startswith(f"## The default ({DEFAULT}) against every mechanism")
    sin = np.array([2 / 4, 4 / 8, 9 / 12])
    assert f"| PBD/BD | {sin.mean():.3f} ± {4.303 * sin.std(ddof=1) / math.sqrt(3):.3f} | 0.500 ± 0.000 |" in summary
    assert "| Sin | PBD | 5.0 | PBD+KF | 1.0 |" in summary  # the default's own raw mechanism is not 'best raw'
    assert "### Sin: MSE vs epsilon" in summary and f"| {ORACLE} | 0.5 | 0.5 |" in summary


def test_best_other_table_says_per_point_whether_the_default_is_within_five_percent():
    """Every point of every sweep: the other configuration with the lowest mean MSE (the default's own raw
    mechanism included, references not), the paired ratio, and whether its mean is at most 1.05."""
    header, _, *rows = best_other_table(_rows(), ["Sin", "Foursquare"])
    assert "within 5%" in header
    cells = {tuple(row.split(" | ")[:2]): row.split(" | ")[2:] for row in rows}
    assert list(cells) == [("| Sin", "E = 0.6"), ("| Sin", "E = 1.0"), ("| Foursquare", "E = 0.6"),
                           ("| Foursquare", "E = 1.0")]
    # Sin: PBD+KF (mean 1.0 at E = 0.6) is half the default's MSE in every repetition
    assert cells[("| Sin", "E = 0.6")][:5] == ["2", "PBD+KF", "1", "2.000 ± 0.000", "**no**"]
    assert cells[("| Sin", "E = 0.6")][5] == Interval.of(100.0 / np.array([1.0, 2.0, 3.0])).render_ratio()
    # Foursquare at E = 1.0: the default 1 against PBD+KF's 1.5; all-zero 1.5 / 1; no coverage in these rows
    assert cells[("| Foursquare", "E = 1.0")] == ["1", "PBD+KF", "1.5", "0.667 ± 0.000", "yes", "1.50 ± 0.00",
                                                 "-", "- |"]
    assert "## The default against the best other configuration at every point" in summary_markdown(
        _rows(), GRID, "pwevent evaluate ...", None)


def test_plots_and_replot_from_a_runs_csv(tmp_path: Path):
    out = tmp_path / "res"
    out.mkdir()
    write_csv(_rows(), out / "runs.csv")
    assert read_csv(out / "runs.csv") == _rows()
    written = plot(_rows(), GRID, out)
    assert sorted(p.name for p in written) == ["foursquare_mse_vs_epsilon.png", "sin_mse_vs_epsilon.png"]
    assert all(p.stat().st_size > 10_000 for p in written)
    for p in written:
        p.unlink()
    argv = ["evaluate", "--datasets", "Sin,Foursquare", "--mechanisms", "PBD,BD,Adaptive", "--epsilons", "0.6,1.0",
            "--windows", "120", "--ratios", "", "--reps", "3", "--out", str(out), "--replot", "--quiet"]
    assert main(argv) == 0
    assert (out / "summary.md").read_text().startswith("# Evaluation results")
    assert (out / "sin_mse_vs_epsilon.png").is_file() and (out / "foursquare_mse_vs_epsilon.png").is_file()


def test_references_score_the_expected_histogram_and_publishing_nothing():
    dataset = SyntheticDataset(SyntheticStream("Log", 2_000, 400, seed=1))
    truth = np.array([np.bincount(v, minlength=2) for _, v in dataset.slot_values()], dtype=float)
    p = dataset.stream.probabilities()
    found = reference_errors(dataset, truth)
    assert found[ZERO].mse == pytest.approx(float(np.mean(truth**2)))
    np.testing.assert_allclose(oracle_release(dataset), 2_000 * np.column_stack([1 - p, p]))
    binomial = float(np.mean(2_000 * p * (1 - p)))
    assert found[ORACLE].mse == pytest.approx(binomial, rel=0.15)  # 800 slots' squared binomial deviations
    assert oracle_release(_real()) is None and set(reference_errors(_real(), truth)) == {ZERO}


def _real():
    from pwevent.jobs.evaluation.datasets import SlottedEvents

    return SlottedEvents("real", 2, 1, 1, np.array([1]), np.array([0]), np.array([1]), 0, 60_000)
