"""All randomness of the mechanism: discrete Laplace noise and binomial sampling (docs/mechanisms.md section 10).

Two sources, chosen explicitly:
- `SecureRandomness` (production default): OpenDP's discrete Laplace, a vetted exact sampler;
  sampling coins from numpy's PCG64 seeded from the operating system's entropy. Never seedable.
- `NumpyRandomness`: numpy's two-sided geometric (exact in distribution up to the float in its
  parameter). With a seed it is the test/reproduction option; without one it is the fast backend
  for experiments. Its `label` says which, and results name it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

import numpy as np


def discrete_laplace_variance(epsilon: float | np.ndarray) -> float | np.ndarray:
    """Variance of the two-sided geometric with alpha = e^-epsilon: 2 alpha / (1 - alpha)^2 (section 2)."""
    eps = np.asarray(epsilon, dtype=float)
    alpha = np.exp(-eps)
    one_minus_alpha = -np.expm1(-eps)
    result = 2.0 * alpha / one_minus_alpha**2
    return float(result) if result.ndim == 0 else result


class Randomness(Protocol):
    """What the mechanism needs from a random source."""

    label: str

    def discrete_laplace(self, epsilon: float, size: int) -> np.ndarray:
        """`size` independent integers with P(k) proportional to e^(-epsilon |k|)."""
        ...

    def binomial(self, n: np.ndarray, p: float | np.ndarray) -> np.ndarray:
        """Independent Binomial(n_j, p_j) draws (p broadcast against n)."""
        ...


class NumpyRandomness:
    """numpy's two-sided geometric and binomial: seeded for tests, OS-seeded for fast experiments."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.label = "numpy-geometric (seeded, not for production)" if seed is not None else "numpy-geometric (fast)"

    def discrete_laplace(self, epsilon: float, size: int) -> np.ndarray:
        if not epsilon > 0:
            raise ValueError(f"noise needs epsilon > 0, got {epsilon}")
        p = -np.expm1(-epsilon)  # success probability 1 - alpha
        return self.rng.geometric(p, size).astype(np.int64) - self.rng.geometric(p, size).astype(np.int64)

    def binomial(self, n: np.ndarray, p: float | np.ndarray) -> np.ndarray:
        return self.rng.binomial(n, p).astype(np.int64)


class SecureRandomness:
    """Production source: OpenDP discrete Laplace; sampling coins seeded from OS entropy only."""

    label = "opendp-discrete-laplace"

    def __init__(self) -> None:
        import opendp.prelude as dp

        dp.enable_features("contrib")
        self._dp = dp
        self._coins = np.random.default_rng()  # SeedSequence from os.urandom

    @lru_cache(maxsize=256)  # noqa: B019 - a handful of (scale, size) pairs per run
    def _measurement(self, scale: float, size: int):  # type: ignore[no-untyped-def]
        dp = self._dp
        return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int), size=size), dp.l1_distance(T=int), scale=scale)

    def discrete_laplace(self, epsilon: float, size: int) -> np.ndarray:
        if not epsilon > 0:
            raise ValueError(f"noise needs epsilon > 0, got {epsilon}")
        return np.asarray(self._measurement(1.0 / epsilon, size)([0] * size), dtype=np.int64)

    def binomial(self, n: np.ndarray, p: float | np.ndarray) -> np.ndarray:
        return self._coins.binomial(n, p).astype(np.int64)


def make_randomness(backend: str, seed: int | None) -> Randomness:
    """The source named in the configuration; an explicit seed always selects the reproducible one."""
    if seed is not None:
        return NumpyRandomness(seed)
    if backend == "opendp":
        return SecureRandomness()
    if backend == "numpy-fast":
        return NumpyRandomness()
    raise ValueError(f"noise backend must be 'opendp' or 'numpy-fast', got {backend!r}")
