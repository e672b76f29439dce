"""The sparse workloads (jobs/evaluation/sparse.py) and how `pwevent evaluate` runs them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pwevent.jobs.common.synthetic import RequirementDraw
from pwevent.jobs.evaluation.evaluate import run_mechanism
from pwevent.jobs.evaluation.grid import DATASETS, GridSpec, Run, Task
from pwevent.jobs.evaluation.report import default_runs
from pwevent.jobs.evaluation.sparse import HELD_OUT, SHAPES, SPARSE, SparseShape, SparseStream, beta_b
from pwevent.jobs.evaluation.task_data import dataset_of


def _truth(stream: SparseStream) -> tuple[np.ndarray, np.ndarray]:
    truth = np.zeros((stream.slots, stream.d))
    present = np.zeros(stream.users)
    for t, (users, values) in enumerate(stream.slot_values()):
        assert len(np.unique(users)) == len(users)  # one value per present user
        truth[t] = np.bincount(values, minlength=stream.d)
        present[users] += 1
    return truth, present / stream.slots


def test_every_workload_is_short_sparse_and_heavy_tailed():
    assert {shape.hourly for shape in SHAPES} == {False, True}
    assert set(HELD_OUT) and set(HELD_OUT) < set(SPARSE)
    for shape in SHAPES:
        truth, presence = _truth(SparseStream(shape, 0))
        assert shape.slots <= 1_000 and shape.cells >= 50
        assert np.median(presence) == pytest.approx(shape.presence, rel=0.2)  # a minority of the slots
        share = np.sort(truth.sum(axis=0))[::-1] / truth.sum()
        assert share[:5].sum() > 4 * 5 / shape.cells  # the top five hold several times their share
        assert (truth == 0).mean() > 0.05  # cells empty on many slots


def test_a_stream_is_drawn_from_its_seed():
    shape = SPARSE["Sparse-daily-200"]
    first = [v.tolist() for _, v in SparseStream(shape, 3).slot_values()]
    assert first == [v.tolist() for _, v in SparseStream(shape, 3).slot_values()]
    assert first != [v.tolist() for _, v in SparseStream(shape, 4).slot_values()]


def test_beta_median():
    b = beta_b(0.12)
    assert 1 - 2 ** (-1 / b) == pytest.approx(0.12)
    with pytest.raises(ValueError):
        beta_b(1.0)


def test_the_issues_shape_is_one_of_them():
    """365 daily slots, 104 categories, 4,000 users on a median 12% of days, windows 7, 14, 30."""
    shape = SPARSE["Sparse-daily-365"]
    assert (shape.slots, shape.cells, shape.users, shape.presence, shape.windows) == (365, 104, 4_000, 0.12,
                                                                                     (7, 14, 30))
    truth, _ = _truth(SparseStream(shape, 0))
    assert 500 < truth.sum(axis=1).mean() < 800  # present per day


def test_the_grid_runs_a_sparse_workload_at_its_own_windows():
    grid = GridSpec(datasets=("Sparse-hourly-336",), epsilons=(0.6, 1.0), windows=(40,), ratios=(0.5,), reps=1,
                    workers=1)
    assert all(name in DATASETS and name + "+griefer" in DATASETS for name in SPARSE)
    assert grid.points("Sparse-hourly-336") == [("epsilon", 0.6, 168, None), ("epsilon", 1.0, 168, None),
                                                 ("ratio", 0.6, 168, 0.5)]
    assert grid.default_w("Sparse-hourly-336") == 168 and grid.default_w("Sin") == 120
    draw = RequirementDraw(0.6, 30, windows=(7, 14, 30))
    assert {r.w for r in draw.fixed(300, 0)} == {7, 14, 30}
    assert {r.epsilon for r in draw.fixed(300, 0)} == {0.6, 0.8, 1.0}
    assert {r.w for r in replace(draw, w=14).fixed(300, 0)} == {7, 14}
    with pytest.raises(ValueError, match="no window"):
        RequirementDraw(0.6, 5, windows=(7, 14))


def test_a_small_sparse_workload_runs_and_reports_at_its_default_point():
    tiny = SparseShape("Sparse-daily-200", slots=40, cells=12, users=150, presence=0.2)
    task = Task(GridSpec(datasets=("Sparse-daily-200",), workers=1), "Sparse-daily-200", "epsilon", 0.6, 30, None, 0)
    data = list(SparseStream(tiny, 0).slot_values())
    released = run_mechanism("Adaptive", task, data, tiny.cells, tiny.users)
    assert len(released.records) == 40 and released.note.startswith("Sample from 1")
    assert dataset_of(task).name == "Sparse-daily-200"
    grid = GridSpec(datasets=("Sparse-daily-200",), workers=1)
    row = Run("Sparse-daily-200", "Adaptive", "kalman", "epsilon", 0.6, 30, None, 0, 1.0, 1.0, 1.0, 0.1, 3, 0.1, "x")
    assert default_runs([row], grid)["Sparse-daily-200"]["Adaptive+KF"][0] is row
