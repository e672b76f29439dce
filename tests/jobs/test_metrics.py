"""Metrics of docs/mechanisms.md section 11."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pwevent.jobs.evaluation.metrics import MRE_FLOOR_FRACTION, ajsd, errors, mae, mre, mse


def test_mse_and_mae_by_hand():
    truth = np.array([[10, 0], [4, 6]])
    released = np.array([[12, -1], [4, 3]])
    assert mse(released, truth) == pytest.approx((4 + 1 + 0 + 9) / 4)
    assert mae(released, truth) == pytest.approx((2 + 1 + 0 + 3) / 4)


def test_mre_floor_is_a_tenth_of_a_percent_of_the_slot_total_and_at_least_one():
    truth = np.array([[5000, 0]])  # total 5000 -> floor 5 for the empty cell
    released = np.array([[5000, 10]])
    assert MRE_FLOOR_FRACTION == 0.001
    assert mre(released, truth) == pytest.approx((0 + 10 / 5) / 2)
    empty = np.array([[0, 0]])
    assert mre(np.array([[3, 0]]), empty) == pytest.approx(3 / 2)  # floor 1 when the slot is empty


def test_ajsd_identical_is_zero_and_disjoint_is_one():
    assert ajsd(np.array([[3, 1]]), np.array([[6, 2]])) == pytest.approx(0.0)
    assert ajsd(np.array([[5, 0]]), np.array([[0, 5]])) == pytest.approx(1.0)


def test_ajsd_negative_cells_are_zeroed_and_empty_rows_are_uniform():
    assert ajsd(np.array([[4, -7]]), np.array([[4, 0]])) == pytest.approx(0.0)
    assert ajsd(np.array([[-1, -1]]), np.array([[2, 2]])) == pytest.approx(0.0)


def test_shapes_must_match():
    with pytest.raises(ValueError, match="equal"):
        mse(np.zeros((2, 2)), np.zeros((2, 3)))


@given(arrays(np.int64, (3, 4), elements=st.integers(-50, 500)), arrays(np.int64, (3, 4), elements=st.integers(0, 500)))
def test_errors_are_non_negative_and_zero_on_truth(released, truth):
    e = errors(released, truth)
    assert e.mse >= 0 and e.mae >= 0 and e.mre >= 0 and 0 <= e.ajsd <= 1
    exact = errors(truth, truth)
    assert exact.mse == exact.mae == exact.mre == 0 and exact.ajsd == pytest.approx(0, abs=1e-12)
