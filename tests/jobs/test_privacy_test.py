"""`pwevent privacy-test`: exact Clopper-Pearson bounds, and a broken mechanism is flagged while
correct ones are not (jobs/offline/privacy_test.py, docs/privacy-test.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import beta

from pwevent.jobs.cli.main import main
from pwevent.jobs.offline.privacy_test import ScaledNoise, Scenario, clopper_pearson, privacy_test
from pwevent.operators.noise import NumpyRandomness


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (849, 2000), (5, 20000), (19995, 20000)])
def test_clopper_pearson_matches_the_beta_quantiles(k, n):
    alpha = 0.0125
    lower, upper = clopper_pearson(k, n, alpha)
    assert lower == pytest.approx(beta.ppf(alpha, k, n - k + 1) if k else 0.0, rel=1e-9, abs=1e-15)
    assert upper == pytest.approx(beta.ppf(1 - alpha, k + 1, n - k) if k < n else 1.0, rel=1e-9, abs=1e-15)


def test_scaled_noise_draws_for_epsilon_over_the_factor():
    broken = ScaledNoise(NumpyRandomness(1), 0.5)
    draws = broken.discrete_laplace(1.0, 200_000)
    alpha = np.exp(-2.0)  # the variance of the noise for epsilon 2, not 1
    assert np.var(draws) == pytest.approx(2 * alpha / (1 - alpha) ** 2, rel=0.05)
    assert "BROKEN" in broken.label


def test_the_neighbouring_runs_differ_only_in_the_target():
    scenario = Scenario("PBD")
    count_d, spend = scenario.run(NumpyRandomness(3), neighbour=False)
    assert scenario.target_slot == 5 and scenario.cell == 1 and spend > 0
    assert isinstance(count_d, int)


def test_cli_flags_a_broken_sample_and_passes_the_correct_one(capsys):
    args = ["privacy-test", "--mechanisms", "Sample", "--runs", "600", "--selection-runs", "200", "--quiet"]
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)[0]
    assert result["mechanism"] == "Sample" and not result["flagged"]
    assert result["largest_spend"] == pytest.approx(4.0)  # Sample spends all of E at t* = w + 1
    assert main([*args, "--break-noise-scale", "0.5"]) == 1
    assert "| Sample |" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("name, broken", [("PBD", True), ("PBD", False), ("Uniform", False)])
def test_a_halved_noise_scale_is_flagged_and_correct_mechanisms_are_not(name, broken):
    result = privacy_test(Scenario(name), 2_000, 500, seed=11, break_noise_scale=0.5 if broken else None)
    assert result.flagged is broken
    if broken:  # noise for 2 eps2 while the ledger books eps1 + eps2 = 1.5
        assert result.best.epsilon_lower > result.best.claimed == pytest.approx(1.5)


@pytest.mark.slow
def test_a_burst_of_adaptive_at_t_star_is_tested():
    """t* = 1 is Adaptive's probe, a burst at E_i / 8 released at OBS's threshold with users below it
    sampled (docs/mechanisms.md 14): correct, not flagged; with the noise made for 4 times the
    publication's epsilon, flagged (docs/privacy-test.md, "A burst at t*")."""
    scenario = Scenario("Adaptive", slot=1)
    assert scenario.run(NumpyRandomness(3), neighbour=False)[1] == pytest.approx(4.0 / 8)
    assert not privacy_test(scenario, 3_000, 1_000, seed=11).flagged
    broken = privacy_test(scenario, 10_000, 2_500, seed=11, break_noise_scale=0.25)
    assert broken.flagged and broken.best.epsilon_lower > broken.best.claimed == pytest.approx(0.5)


def test_cli_refuses_an_unknown_mechanism(capsys):
    assert main(["privacy-test", "--mechanisms", "PBX", "--quiet"]) == 2
    assert "mechanism must be one of" in capsys.readouterr().err
