"""Noise: integer-valued, unbiased, with the variance OBS assumes (docs/mechanisms.md sections 2 and 10).

Statistical checks use z = 5 bounds: a correct sampler fails one with probability below 1e-6.
"""

from __future__ import annotations

import numpy as np
import pytest

from pwevent.operators.noise import NumpyRandomness, SecureRandomness, discrete_laplace_variance, make_randomness

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("epsilon", [0.1, 0.6, 2.0])
@pytest.mark.parametrize("source", ["numpy", "opendp"])
def test_integer_unbiased_with_model_variance(source, epsilon):
    rng = NumpyRandomness(seed=11) if source == "numpy" else SecureRandomness()
    n = 20_000
    draws = np.concatenate([rng.discrete_laplace(epsilon, 1000) for _ in range(n // 1000)])
    assert draws.dtype == np.int64
    variance = discrete_laplace_variance(epsilon)
    assert abs(draws.mean()) < 5 * np.sqrt(variance / n)
    # Var of the sample variance ~ (mu4 - sigma^4) / n; mu4 of a two-sided geometric is below 25 sigma^4
    assert abs(draws.var() - variance) < 5 * np.sqrt(24 * variance**2 / n)


def test_secure_is_default_and_seed_selects_reproducible():
    assert make_randomness("opendp", None).label == "opendp-discrete-laplace"
    seeded = make_randomness("opendp", 3)
    assert "seeded" in seeded.label
    assert np.array_equal(seeded.discrete_laplace(0.5, 10), make_randomness("opendp", 3).discrete_laplace(0.5, 10))
    with pytest.raises(ValueError, match="noise backend"):
        make_randomness("gaussian", None)


def test_noise_refuses_non_positive_epsilon():
    with pytest.raises(ValueError):
        NumpyRandomness(1).discrete_laplace(0.0, 3)
