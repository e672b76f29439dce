"""The Kalman post-processing bank (operators/postprocess.py): causal, public inputs only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pwevent.operators.noise import discrete_laplace_variance
from pwevent.operators.postprocess import FilterConfig, KalmanSmoother, PublicRelease
from pwevent.state.spend import Kind


def publish(slot, counts, variance, population=1000):
    return PublicRelease(slot, Kind.PUBLISH, np.asarray(counts, dtype=float), population, variance)


def test_a_publication_needs_a_variance():
    with pytest.raises(ValueError, match="variance"):
        PublicRelease(1, Kind.PUBLISH, np.zeros(2), 10, None)


def test_from_record_reads_threshold_or_epsilon():
    base = {"slot": 3, "kind": "publish", "counts": [1, 2], "population": 5}
    assert PublicRelease.from_record({**base, "threshold": 3.0}).variance == pytest.approx(9.0)
    rec = PublicRelease.from_record({**base, "threshold": None, "epsilon_publication": 0.5})
    assert rec.variance == pytest.approx(discrete_laplace_variance(0.5))
    skip = PublicRelease.from_record({**base, "kind": "skip", "threshold": None, "epsilon_publication": None})
    assert skip.kind is Kind.SKIP and skip.variance is None


def test_smoothing_a_constant_beats_the_raw_noise():
    rng = np.random.default_rng(0)
    truth = np.array([700.0, 300.0])
    r = 400.0
    smoother = KalmanSmoother(2)
    raw, smooth = [], []
    for t in range(1, 2001):
        released = truth + rng.normal(0, np.sqrt(r), 2)
        out = smoother.step(publish(t, released, r))
        if t > 200:
            raw.append(np.mean((released - truth) ** 2))
            smooth.append(np.mean((out - truth) ** 2))
    assert np.mean(smooth) < np.mean(raw) / 10


def test_skips_only_predict_and_output_is_clipped():
    smoother = KalmanSmoother(2)
    first = smoother.step(publish(1, [-50, 2000], 1.0, population=1000))
    assert first[0] == 0.0 and first[1] == 1000.0  # clipped to [0, population]
    again = smoother.step(PublicRelease(2, Kind.SKIP, np.array([-50.0, 2000.0]), 1000, None))
    np.testing.assert_allclose(again, first)


def test_output_depends_only_on_past_releases():
    rng = np.random.default_rng(1)
    releases = [publish(t, rng.normal(100, 20, 3), 400.0) for t in range(1, 60)]
    a, b = KalmanSmoother(3), KalmanSmoother(3)
    out_a = [a.step(r) for r in releases]
    out_b = [b.step(r) for r in releases[:30]]
    np.testing.assert_allclose(out_a[:30], out_b)


def test_snapshot_restore_continues_identically():
    rng = np.random.default_rng(2)
    releases = [publish(t, rng.normal(50, 10, 2), 100.0) for t in range(1, 40)]
    whole = KalmanSmoother(2)
    expected = [whole.step(r) for r in releases]
    first = KalmanSmoother(2)
    for r in releases[:20]:
        first.step(r)
    state = json.loads(json.dumps(first.snapshot()))
    second = KalmanSmoother(2)
    second.restore(state)
    np.testing.assert_allclose([second.step(r) for r in releases[20:]], expected[20:])


def test_likelihood_prefers_a_trend_filter_on_a_ramp():
    rng = np.random.default_rng(3)
    smoother = KalmanSmoother(1)
    for t in range(1, 3001):
        smoother.step(publish(t, [t * 2.0 + rng.normal(0, 30)], 900.0, population=100_000))
    assert smoother.chosen.startswith("trend")


def test_config_is_validated():
    with pytest.raises(ValueError, match="forgetting"):
        FilterConfig(forgetting=0)
    with pytest.raises(ValueError, match="positive"):
        FilterConfig(levels=(0.0,))
    with pytest.raises(ValueError, match="sampling"):
        FilterConfig(sampling=(True, True))
    with pytest.raises(ValueError, match="default"):
        FilterConfig(default=15)
    with pytest.raises(ValueError, match="shape"):
        KalmanSmoother(2).restore({"estimate": [[0.0]], "covariance": None, "score": [], "noise": None, "scored": 0})


def _rare_accurate_publications(config: FilterConfig) -> float:
    """MSE against the true counts of a filtered Sample-like release (an accurate publication every 50
    slots, repeats in between) of a binomial stream with a constant p: the slots' own deviations are
    the error, B = n p (1 - p) = 1,875 per slot, which a release carrying one slot's deviation doubles."""
    rng = np.random.default_rng(4)
    n, p, r = 10_000, 0.25, 5.0
    smoother, errors, last = KalmanSmoother(2, config), [], None
    for t in range(1, 5001):
        ones = rng.binomial(n, p)
        truth = np.array([n - ones, ones], dtype=float)
        if t % 50 == 1:
            last = truth + rng.normal(0, np.sqrt(r), 2)
            release = publish(t, last, r, population=n)
        else:
            release = PublicRelease(t, Kind.SKIP, last, n, None)
        out = smoother.step(release)
        if t > 1000:
            errors.append(np.mean((out - truth) ** 2))
    return float(np.mean(errors))


def test_sampling_deviation_averages_rare_accurate_publications():
    without = _rare_accurate_publications(FilterConfig(sampling=(False,)))
    with_b = _rare_accurate_publications(FilterConfig(sampling=(False, True)))
    assert without > 1.8 * 1_875  # follows each publication: its own deviation plus the slot's
    assert with_b < 1.5 * 1_875 and with_b < 0.75 * without  # averages them into the level (measured: 2,600 vs 3,974)
    smoother = KalmanSmoother(2, FilterConfig(sampling=(False, True)))
    smoother.step(publish(1, [7_500.0, 2_500.0], 5.0, population=10_000))
    assert "+B" not in smoother.chosen  # the default filter before any scored publication
    assert not any("+B" in name for name in KalmanSmoother(2).config.models()[3])  # opt-in


def test_the_interval_holds_the_output_within_zero_and_the_population():
    rng = np.random.default_rng(3)
    smoother = KalmanSmoother(3)
    for t in range(1, 200):
        kind = Kind.PUBLISH if t % 3 else Kind.SKIP
        counts = np.array([5.0, 50.0, 95.0]) + rng.normal(0, 30, 3)
        smoothed = smoother.step(PublicRelease(t, kind, counts, 100, 900.0 if kind is Kind.PUBLISH else None))
        interval = smoother.interval(smoothed, 100)
        assert interval.shape == (3, 2)
        assert (interval[:, 0] <= smoothed + 1e-9).all() and (smoothed <= interval[:, 1] + 1e-9).all()
        assert (interval >= 0).all() and (interval <= 100).all()


def test_between_publications_the_interval_widens():
    smoother = KalmanSmoother(1, FilterConfig(levels=(0.1,), trends=(), default=0))
    for t in range(1, 50):
        smoother.step(publish(t, [500.0], 100.0, population=10_000))
    after = smoother.step(publish(50, [500.0], 100.0, population=10_000))
    width = np.diff(smoother.interval(after, 10_000))[0, 0]
    skipped = smoother.step(PublicRelease(51, Kind.SKIP, np.array([500.0]), 10_000, None))
    assert np.diff(smoother.interval(skipped, 10_000))[0, 0] > width


def test_the_nominal_95_percent_interval_covers_a_stream_the_model_fits():
    """A local level (random walk with variance R) observed with noise R at every slot, 20 cells x
    3,000 slots: the bank picks the matching filter and its interval covers the true level at about the
    nominal rate (a fixed seed; the bounds are far from what 60,000 draws could miss by chance)."""
    rng = np.random.default_rng(11)
    r, d, slots = 400.0, 20, 3000
    level = np.full(d, 5000.0)
    smoother = KalmanSmoother(d)
    hits = total = 0
    for t in range(1, slots + 1):
        level = level + rng.normal(0, np.sqrt(r), d)
        smoothed = smoother.step(publish(t, level + rng.normal(0, np.sqrt(r), d), r, population=1_000_000))
        if t > 200:  # once the bank has scored enough publications to choose
            low, high = smoother.interval(smoothed, 1_000_000).T
            hits += int(((low <= level) & (level <= high)).sum())
            total += d
    assert smoother.chosen == "level 1"
    assert 0.93 <= hits / total <= 0.97, hits / total


# -- pooling across cells ---------------------------------------------------------------------------

def _run(truth: np.ndarray, r: float, pooling: bool, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """(outputs, intervals) of a smoother over slots of `truth` (T, d), each published with noise R."""
    rng = np.random.default_rng(seed)
    smoother = KalmanSmoother(truth.shape[1], FilterConfig(pooling=pooling))
    outputs, intervals = [], []
    for t, row in enumerate(truth, 1):
        out = smoother.step(publish(t, row + rng.normal(0, np.sqrt(r), len(row)), r, population=10_000))
        outputs.append(out)
        intervals.append(smoother.interval(out, 10_000))
    return np.array(outputs), np.array(intervals)


def test_on_sparse_cells_pooling_is_no_worse_than_publishing_nothing():
    """60 cells, nearly all empty, a few with a count of 1-3, published with noise sd 300 (a small
    budget): alone each cell's filter stays far off for thousands of slots; pooled, the output is
    within 10% of the all-zero release and far below the unpooled one."""
    rng = np.random.default_rng(1)
    truth = np.where(rng.random((3000, 60)) < 0.05, rng.integers(1, 4, (3000, 60)), 0).astype(float)
    zero = float(np.mean(truth ** 2))
    pooled, _ = _run(truth, 90_000.0, pooling=True)
    alone, _ = _run(truth, 90_000.0, pooling=False)
    assert np.mean((pooled - truth) ** 2) <= 1.1 * zero < np.mean((alone - truth) ** 2) / 5


def test_on_cells_that_differ_pooling_changes_almost_nothing():
    truth = np.tile(np.linspace(100.0, 3000.0, 8), (400, 1))
    pooled, _ = _run(truth, 400.0, pooling=True)
    alone, _ = _run(truth, 400.0, pooling=False)
    assert np.max(np.abs(pooled - alone) / alone) < 5e-3  # from the first slot on


def test_with_fewer_than_four_cells_pooling_is_off():
    truth = np.tile([10.0, 12.0, 9.0], (200, 1))
    assert np.array_equal(_run(truth, 900.0, pooling=True)[0], _run(truth, 900.0, pooling=False)[0])


def test_a_pooled_interval_also_holds_the_cells_own_estimate():
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 5, (500, 20)).astype(float)
    _, intervals = _run(truth, 2_500.0, pooling=True)
    alone, _ = _run(truth, 2_500.0, pooling=False)
    assert ((intervals[:, :, 0] <= alone + 1e-9) & (alone <= intervals[:, :, 1] + 1e-9)).all()


def test_a_pooled_interval_keeps_each_cells_own_excess():
    """Cells alike (Poisson counts of mean 1, all pooled) published accurately: pooling estimates the
    common level from all cells, but each slot's count still scatters around it by its own excess
    U; the intervals keep U whole (not divided by the d cells), so they cover the counts."""
    rng = np.random.default_rng(3)
    truth = rng.poisson(1.0, (2000, 40)).astype(float)
    _, intervals = _run(truth, 1.0, pooling=True)
    inside = (intervals[200:, :, 0] <= truth[200:]) & (truth[200:] <= intervals[200:, :, 1])
    assert inside.mean() >= 0.9


# -- per-cell R and the excess over the model ---------------------------------------------------------

def test_the_interval_covers_a_level_with_binomial_sampling_under_an_overstated_error():
    """A constant share per cell, each slot's true count binomial around it (users fall in cells
    independently), published every slot as a rescaled even release would be: kept users' counts
    plus discrete-Laplace-like noise, the announced error OBS's population-wide one (all users'
    p (1 - p) plus the noise, / s^2), far above any cell's own. Per-cell R and the excess U bring the
    nominal 95% interval into 90-98% (measured 95.3%; with one shared R, this stream 38%)."""
    rng = np.random.default_rng(21)
    n, shares, epsilon, kept = 10_000, np.array([0.5, 0.3, 0.15, 0.05]), 0.6, 0.8
    noise = float(discrete_laplace_variance(epsilon))
    error = (n * kept * (1 - kept) + noise) / kept**2  # OBS's: every user's sampling variance summed
    smoother = KalmanSmoother(len(shares))
    hits = total = 0
    for t in range(1, 2001):
        truth = rng.multinomial(n, shares).astype(float)
        sampled = rng.binomial(truth.astype(int), kept) + rng.normal(0, np.sqrt(noise), len(shares))
        release = PublicRelease(t, Kind.PUBLISH, np.rint(sampled / kept), n, error, epsilon, kept)
        smoothed = smoother.step(release)
        if t > 200:
            low, high = smoother.interval(smoothed, n).T
            hits += int(((low <= truth) & (truth <= high)).sum())
            total += len(shares)
    assert 0.90 <= hits / total <= 0.98, hits / total


def test_cell_variances_split_the_error_by_the_released_shares():
    release = PublicRelease(1, Kind.PUBLISH, np.array([300.0, 100.0, -20.0]), 400, 1_000.0, 0.5, 0.5)
    noise = float(discrete_laplace_variance(0.5)) / 0.25
    np.testing.assert_allclose(release.cell_variances(), noise + (1_000.0 - noise) * np.array([0.75, 0.25, 0.0]))
    zeros = PublicRelease(1, Kind.PUBLISH, np.zeros(2), 400, 1_000.0, 0.5)
    np.testing.assert_allclose(zeros.cell_variances(), discrete_laplace_variance(0.5)
                               + (1_000.0 - discrete_laplace_variance(0.5)) / 2)
    np.testing.assert_allclose(publish(1, [3, 4], 9.0).cell_variances(), [9.0, 9.0])  # no epsilon: shared


def test_a_mean_cells_error_is_spread_d_times():
    """A rescaled publication of version 4 on announces the mean cell's error: its sampling part is a
    d-th of the population's, so the cells hold d times it by their shares; version 3 announced the
    population's."""
    counts, noise = np.array([300.0, 100.0, -20.0]), float(discrete_laplace_variance(0.5)) / 0.25
    mean = PublicRelease(1, Kind.PUBLISH, counts, 400, 1_000.0, 0.5, 0.5, mean_cell=True)
    np.testing.assert_allclose(mean.cell_variances(), noise + 3 * (1_000.0 - noise) * np.array([0.75, 0.25, 0.0]))
    record = {"slot": 1, "kind": "publish", "counts": counts.tolist(), "population": 400, "threshold": 1_000.0**0.5,
              "epsilon_publication": 0.5, "kept_share": 0.5}
    for version, spread in ((3, 1), (4, 3)):
        read = PublicRelease.from_record({**record, "schema_version": version})
        assert read.mean_cell is (version == 4)
        shares = np.array([0.75, 0.25, 0.0])
        np.testing.assert_allclose(read.cell_variances(), noise + spread * (1_000.0 - noise) * shares)
    assert not PublicRelease.from_record({**record, "schema_version": 4, "kept_share": None}).mean_cell


@pytest.mark.parametrize("share", [None, 0.37])
def test_from_outcome_and_from_record_give_the_same_cell_variances(share):
    """Anyone recomputes `smoothed` from the release records alone: the record's threshold, epsilon
    and kept_share give the job's per-cell R bit for bit."""
    from pwevent.jobs.common.config import parse_config
    from pwevent.jobs.common.release import release_record
    from pwevent.operators.obs import BudgetChoice
    from pwevent.operators.slot_release import SlotOutcome

    config = parse_config({"mechanism": "PBD", "slot": "1s", "origin": 0,
                           "domain": {"type": "cells", "d": 3}, "postprocess": "none"})
    outcome = SlotOutcome(4, Kind.PUBLISH, np.array([812, 95, -7]), 1_000, None,
                          BudgetChoice(0.3, 1234.5678901, share), 40.0)
    record = json.loads(json.dumps(release_record(outcome, config, "test")))
    assert record["kept_share"] == share
    ours, theirs = PublicRelease.from_outcome(outcome), PublicRelease.from_record(record)
    assert np.array_equal(ours.cell_variances(), theirs.cell_variances())
    assert ours.kept_share == theirs.kept_share and ours.epsilon == theirs.epsilon


def test_a_snapshot_of_the_shared_covariance_bank_restores():
    """A snapshot taken before per-cell R (covariance (filters, 2, 2), one R, no excess) restores:
    its covariance and R hold for every cell, the excess starts afresh, and the bank continues as a
    fresh per-cell bank that had reached the same state would."""
    rng = np.random.default_rng(8)
    releases = [publish(t, rng.normal(200, 15, 3), 225.0) for t in range(1, 60)]
    bank = KalmanSmoother(3)
    for r in releases[:30]:
        bank.step(r)
    new = json.loads(json.dumps(bank.snapshot()))
    covariance = np.asarray(new["covariance"])
    assert np.allclose(covariance, covariance[:, :1])  # one R for all cells: the cells' covariances agree
    old = {"estimate": new["estimate"], "covariance": covariance[:, 0].tolist(), "score": new["score"],
           "noise": 225.0, "scored": new["scored"]}
    restored, reference = KalmanSmoother(3), KalmanSmoother(3)
    restored.restore(old)
    reference.restore({**new, "excess": np.zeros_like(np.asarray(new["excess"])).tolist(), "weight": 0.0})
    for r in releases[30:]:
        np.testing.assert_array_equal(restored.step(r), reference.step(r))
        np.testing.assert_array_equal(restored.interval(r.counts, 1000), reference.interval(r.counts, 1000))
    never_stepped = KalmanSmoother(3)
    never_stepped.restore({**old, "covariance": None, "noise": None})
    assert np.isfinite(never_stepped.step(releases[0])).all()
    with pytest.raises(ValueError, match="covariance"):
        KalmanSmoother(3).restore({**old, "covariance": covariance[:, :, 0].tolist()})
