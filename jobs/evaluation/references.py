"""Evaluation-only reference releases that frame a mechanism's error (docs/evaluation.md, "References").

Neither is a mechanism and neither is ever available to one; they are scored with the same metrics as
the releases (jobs/evaluation/metrics.py) and stored in `runs.csv` with `post = reference`:

- the oracle floor (synthetic streams only): a release of each slot's expected histogram given the
  generator's p_t, n (1 - p_t, p_t). The true counts are Binomial(n, p_t), so its MSE is about the
  binomial variance n p_t (1 - p_t): the error left by a release that knew the stream's law exactly
  but not the slot's draw;
- the all-zero release: publish nothing (its MSE is the mean squared true count per cell), what a
  mechanism must beat to be worth running.
"""

from __future__ import annotations

import numpy as np

from pwevent.jobs.evaluation.datasets import Dataset, SyntheticDataset
from pwevent.jobs.evaluation.metrics import Errors, errors

REFERENCE = "reference"
ORACLE = "oracle floor"
ZERO = "all-zero"


def oracle_release(dataset: Dataset) -> np.ndarray | None:
    """(T, 2) expected histograms n (1 - p_t, p_t) of a synthetic stream; None for other data."""
    if not isinstance(dataset, SyntheticDataset):
        return None
    p = dataset.stream.probabilities()
    return dataset.users * np.column_stack([1.0 - p, p])


def reference_errors(dataset: Dataset, truth: np.ndarray) -> dict[str, Errors]:
    """The errors of every reference that exists for `dataset` against its (T, d) true counts."""
    out = {ZERO: errors(np.zeros_like(truth, dtype=float), truth)}
    oracle = oracle_release(dataset)
    if oracle is not None:
        out[ORACLE] = errors(oracle, truth)
    return out
