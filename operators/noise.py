"""All randomness of the mechanism: discrete Laplace noise and binomial sampling (docs/mechanisms.md section 10).

Two sources, chosen explicitly:
- `SecureRandomness` (production default): OpenDP's discrete Laplace, a vetted exact sampler;
  sampling coins from numpy's PCG64 seeded from the operating system's entropy. Never seedable.
- `NumpyRandomness`: numpy's two-sided geometric (exact in distribution up to the float in its
  parameter). With a seed it is the test/reproduction option; without one it is the fast backend
  for experiments. Its `label` says which, and results name it.

Both refuse an epsilon whose noise could leave the sampler's range (`check_noise_range`,
docs/mechanisms.md, Budget floor): such noise is never drawn, so nothing is released with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

#: Noise is kept below 2^52 in magnitude: releases stay exact integers for JSON readers that parse
#: numbers as doubles (2^53), and int64 sums of them keep their headroom (docs/mechanisms.md, Budget floor).
NOISE_BOUND = 2**52
#: The smallest epsilon with P(|noise| >= NOISE_BOUND) = 2 alpha^k / (1 + alpha) <= ~2^-64, alpha = e^-epsilon,
#: k = NOISE_BOUND: alpha^k = 2^-64 gives epsilon = 64 ln 2 / 2^52 ~ 9.85e-15 (docs/mechanisms.md, Budget floor).
SAMPLER_MIN_EPSILON = 64 * math.log(2) / NOISE_BOUND


class NoiseRangeError(ValueError):
    """An epsilon whose noise could leave the sampler's range; nothing is drawn, nothing is released."""


def check_noise_range(epsilon: float) -> None:
    """Refuse an epsilon below SAMPLER_MIN_EPSILON (or not finite): its noise could clip or degenerate.

    docs/mechanisms.md, Budget floor: the configured floor keeps every budget that reaches a sampler
    at or above this limit, so this is the last line, never the rule that shapes budgets.
    """
    if not SAMPLER_MIN_EPSILON <= epsilon < math.inf:
        raise NoiseRangeError(
            f"noise needs a finite epsilon >= {SAMPLER_MIN_EPSILON:.4g} (scale within the sampler's range), "
            f"got {epsilon!r}"
        )


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
        self.seeded = seed is not None  # only a seeded generator's state is worth a checkpoint
        self.label = "numpy-geometric (seeded, not for production)" if seed is not None else "numpy-geometric (fast)"

    def discrete_laplace(self, epsilon: float, size: int) -> np.ndarray:
        check_noise_range(epsilon)
        p = -np.expm1(-epsilon)  # success probability 1 - alpha
        return self.rng.geometric(p, size).astype(np.int64) - self.rng.geometric(p, size).astype(np.int64)

    def binomial(self, n: np.ndarray, p: float | np.ndarray) -> np.ndarray:
        return self.rng.binomial(n, p).astype(np.int64)

    def json_state(self) -> dict[str, Any]:
        """The generator's state as JSON values (a seeded run's checkpoint)."""
        return pcg64_state_to_json(self.rng.bit_generator.state)

    def set_json_state(self, obj: dict[str, Any]) -> None:
        self.rng.bit_generator.state = {"bit_generator": "PCG64",
                                        "state": {"state": int(obj["state"]), "inc": int(obj["inc"])},
                                        "has_uint32": int(obj["has_uint32"]), "uinteger": int(obj["uinteger"])}


def pcg64_state_to_json(state: Mapping[str, Any]) -> dict[str, Any]:
    """numpy's PCG64 state (`default_rng`'s generator) as JSON values: its two 128-bit integers as
    decimal strings, which every JSON library reads back exactly."""
    if state.get("bit_generator") != "PCG64":
        raise ValueError(f"cannot store the state of a {state.get('bit_generator')!r} generator")
    return {"state": str(state["state"]["state"]), "inc": str(state["state"]["inc"]),
            "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}


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
        """On 64-bit integers: OpenDP's `int` is i32, whose bound 2^31 - 1 clipped noise of scale >~ 1e8."""
        dp = self._dp
        domain = dp.vector_domain(dp.atom_domain(T="i64"), size=size)
        return dp.m.make_laplace(domain, dp.l1_distance(T="i64"), scale=scale)

    def discrete_laplace(self, epsilon: float, size: int) -> np.ndarray:
        check_noise_range(epsilon)
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
