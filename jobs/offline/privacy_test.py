"""`pwevent privacy-test`: a black-box lower bound on the privacy loss a mechanism really has.

Method (docs/privacy-test.md): run the real `Engine` many times on two neighbouring inputs, D and D',
that differ only in the target user's value at one slot t* (present in D, absent in D': the
add/remove notion of docs/mechanisms.md section 1). The output event is a threshold on the released
count of the affected cell at t*, optionally restricted to runs whose (public) target spend at t*
was a given level. A first batch of runs per input picks the most telling event for each direction;
a fresh batch estimates P[event | D] and P[event | D'] with exact one-sided Clopper-Pearson bounds,
Bonferroni-corrected over the two events and their two bounds each. Then, with confidence
1 - alpha, the mechanism's real epsilon for that user is at least ln(p_lo(favoured) / p_hi(other))
for each event.

Each bound is compared with the spend its event claims (spend1 + spend2 at t* from the target's
ledger: the level the event is restricted to, or the largest seen): by sequential composition that
is all the neighbouring pair may reveal, so a correct mechanism stays at or below it except with
probability alpha. Noise is the seeded numpy backend (`NumpyRandomness`), fast and exact in
distribution.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.progress import Progress
from pwevent.operators.noise import NumpyRandomness, Randomness
from pwevent.operators.policies import MechanismSpec
from pwevent.operators.registry import REGISTRY
from pwevent.state.population import UserRequirement
from pwevent.state.requirements import RELATIVE_TOLERANCE, DynamicRequirement, Requirement, exceeds


class ScaledNoise:
    """TEST ONLY: a deliberately broken source whose discrete Laplace scale is multiplied by `factor`.

    The scale is 1/epsilon, so a factor of 0.5 draws noise for 2 epsilon while every ledger still
    books epsilon: the privacy test must flag it.
    """

    def __init__(self, inner: Randomness, factor: float) -> None:
        if not factor > 0:
            raise ValueError(f"noise scale factor must be positive, got {factor}")
        self.inner = inner
        self.factor = factor
        self.label = f"{inner.label}, BROKEN: noise scale x{factor:g} (test only)"

    def discrete_laplace(self, epsilon: float, size: int) -> np.ndarray:
        return self.inner.discrete_laplace(epsilon / self.factor, size)

    def binomial(self, n: np.ndarray, p: float | np.ndarray) -> np.ndarray:
        return self.inner.binomial(n, p)


@dataclass(frozen=True)
class Scenario:
    """A small population and the neighbouring pair.

    Every user sits in cell 0 at slots 1 .. t*-1, and r_0 is that histogram (public, the same for D
    and D'), so the adaptive mechanisms mostly skip and save budget. At t* every other user moves
    to the last cell; in D the target (user 0) moves with them, in D' it sends nothing at t*. The
    target declares (w, E); the other users alternate (w, E) and the looser (w, 2E), so the
    personalized mechanisms see two budget levels (OBS picks the target's: sampling the other level
    out would cost more). Dynamic mechanisms take these as forward requirements, with a backward
    (1, twice the forward E) that never binds; the baselines run everybody at the global (w, E).
    `slot` 0 means t* = w + 1 (a publication slot of Sample, and a full absorption for PBA).
    """

    mechanism: str
    users: int = 10
    d: int = 2
    epsilon: float = 4.0
    window: int = 4
    slot: int = 0

    def __post_init__(self) -> None:
        REGISTRY.get(self.mechanism)  # a ValueError naming the registered mechanisms
        if self.users < 2 or self.d < 2 or self.window < 1 or self.slot < 0 or not self.epsilon > 0:
            raise ValueError("need users >= 2, d >= 2, window >= 1, slot >= 0 and epsilon > 0")

    @property
    def target_slot(self) -> int:
        return self.slot or self.window + 1

    @property
    def cell(self) -> int:
        """The cell the target's value adds to at t*."""
        return self.d - 1

    def spec(self) -> MechanismSpec:
        return REGISTRY.spec(self.mechanism, self.window, self.epsilon)

    def requirement(self, user: int) -> UserRequirement:
        fixed = Requirement(self.window, self.epsilon * (1 if user % 2 == 0 else 2))
        if REGISTRY.get(self.mechanism).dynamic:
            return DynamicRequirement(Requirement(1, 2 * fixed.epsilon), fixed)
        return fixed

    def run(self, rng: Randomness, neighbour: bool) -> tuple[int, float]:
        """One run of slots 1 .. t*: (released count of the affected cell at t*, target's spend at t*).

        Slots after t* see identical data and only add post-processing of what t* released.
        """
        start = np.zeros(self.d, dtype=np.int64)
        start[0] = self.users
        engine = Engine(self.spec(), self.d, rng, self.window, last_release=start)
        for user in range(self.users):
            engine.register(user, self.requirement(user), 1)
        everybody = np.arange(self.users, dtype=np.int64)
        for slot in range(1, self.target_slot):
            engine.step(slot, everybody, np.zeros(self.users, dtype=np.int64))
        present = everybody[1:] if neighbour else everybody
        outcome, _ = engine.step(self.target_slot, present, np.full(len(present), self.cell, dtype=np.int64))
        cid = engine.class_of(0)
        target = engine.population.get(cid) if cid is not None else None
        assert target is not None
        spend1, spend2 = target.ledger.spent(self.target_slot, self.target_slot)
        return int(outcome.counts[self.cell]), spend1 + spend2


def _binomial_log_pmf(n: int, p: float) -> np.ndarray:
    """log P[Bin(n, p) = j] for j = 0..n, exactly up to float rounding."""
    j = np.arange(n + 1)
    log_choose = np.concatenate(([0.0], np.cumsum(np.log(np.arange(n, 0, -1)) - np.log(np.arange(1, n + 1)))))
    if p <= 0.0:
        return np.where(j == 0, 0.0, -np.inf)
    if p >= 1.0:
        return np.where(j == n, 0.0, -np.inf)
    return log_choose + j * math.log(p) + (n - j) * math.log1p(-p)


def _upper_tail(k: int, n: int, p: float) -> float:
    """P[Bin(n, p) >= k]."""
    log_pmf = _binomial_log_pmf(n, p)[k:]
    top = log_pmf.max()
    return float(min(1.0, math.exp(top) * np.exp(log_pmf - top).sum())) if top > -np.inf else 0.0


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Exact one-sided bounds (lower, upper), each holding with probability >= 1 - alpha.

    lower: the p with P[Bin(n, p) >= k] = alpha (0 when k = 0); upper: the p with
    P[Bin(n, p) <= k] = alpha (1 when k = n). Both by bisection on the exact binomial tail;
    rounding goes the conservative way (lower rounds down, upper up).
    """
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")

    lower, upper = 0.0, 1.0
    if k > 0:  # P[Bin(n, p) >= k] grows with p: bisect for alpha, keep the low end
        low, high = 0.0, 1.0
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (low, mid) if _upper_tail(k, n, mid) >= alpha else (mid, high)
        lower = low
    if k < n:  # P[Bin(n, p) <= k] falls with p: bisect for alpha, keep the high end
        low, high = 0.0, 1.0
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (mid, high) if 1.0 - _upper_tail(k + 1, n, mid) > alpha else (low, mid)
        upper = high
    return lower, upper


def _wilson(k: np.ndarray, n: int, z: float) -> tuple[np.ndarray, np.ndarray]:
    """Approximate bounds, for choosing events on the first batch only (never reported)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


@dataclass(frozen=True)
class Runs:
    """One batch of runs on one input: the released count of the affected cell at t* and the
    target's spend (spend1 + spend2) at t*, per run."""

    counts: np.ndarray
    spends: np.ndarray


@dataclass(frozen=True)
class Event:
    """`count >= threshold` (at_least) or `count <= threshold`, optionally only in runs where the
    target spent `spend` at t*, whose probability should be larger under `favoured` ("D" or "D'").

    The spend at t* is a function of public outputs (requirements and the decisions up to t*), so
    the conjunction is an output event too, and its claimed epsilon is that spend: sequential
    composition bounds the loss of every run with that history by what the history spent.
    """

    at_least: bool
    threshold: int
    favoured: str
    spend: float | None = None

    def holds(self, runs: Runs) -> np.ndarray:
        hit = runs.counts >= self.threshold if self.at_least else runs.counts <= self.threshold
        if self.spend is None:
            return hit
        return hit & np.isclose(runs.spends, self.spend, rtol=RELATIVE_TOLERANCE, atol=0.0)

    def claimed(self, largest: float) -> float:
        """The spend this event's runs claim; `largest` is the largest spend of any run."""
        return largest if self.spend is None else self.spend

    def describe(self) -> str:
        where = "" if self.spend is None else f" and spend {self.spend:.4g}"
        return f"count {'>=' if self.at_least else '<='} {self.threshold}{where}, favouring {self.favoured}"


def choose_events(with_target: Runs, without: Runs, z: float = 1.96) -> tuple[Event, Event]:
    """On the selection batch: per direction, the event whose approximate bound exceeds its claimed
    spend by the most (least negative margin). Thresholds span the counts seen; spends are any, or
    one of the positive levels seen (a run that spent nothing is still covered by "any")."""
    counts = np.concatenate((with_target.counts, without.counts))
    spends = np.concatenate((with_target.spends, without.spends))
    levels: list[float | None] = [None, *(s for s in np.unique(np.round(spends, 9)).tolist() if s > 0)]
    largest = float(spends.max())
    best: dict[str, tuple[float, Event]] = {}
    for at_least in (True, False):
        for level in levels:
            for favoured, (numerator, denominator) in (("D", (with_target, without)), ("D'", (without, with_target))):
                events = [Event(at_least, int(c), favoured, level) for c in range(counts.min(), counts.max() + 1)]
                top = np.array([int(e.holds(numerator).sum()) for e in events])
                bottom = np.array([int(e.holds(denominator).sum()) for e in events])
                low, high = _wilson(top, len(numerator.counts), z)[0], _wilson(bottom, len(denominator.counts), z)[1]
                with np.errstate(divide="ignore"):
                    margin = np.log(low) - np.log(high) - events[0].claimed(largest)
                i = int(np.argmax(margin))
                if favoured not in best or margin[i] > best[favoured][0]:
                    best[favoured] = (float(margin[i]), events[i])
    return best["D"][1], best["D'"][1]


@dataclass(frozen=True)
class Bound:
    """The estimation batch's result for one event: hits under D and D', the one-sided bounds on the
    favoured input's probability (lower) and the other's (upper), eps_lb and the claimed spend."""

    event: str
    hits_d: int
    hits_neighbour: int
    p_lower: float
    p_upper: float
    epsilon_lower: float
    claimed: float


def bound(event: Event, with_target: Runs, without: Runs, alpha: float, largest: float) -> Bound:
    """eps_lb of one event: ln(p_lo(favoured) / p_hi(other)), each bound one-sided at level alpha."""
    hits_d, hits_n = int(event.holds(with_target).sum()), int(event.holds(without).sum())
    favoured, other = ((hits_d, with_target), (hits_n, without)) if event.favoured == "D" else (
        (hits_n, without), (hits_d, with_target))
    p_lo = clopper_pearson(favoured[0], len(favoured[1].counts), alpha)[0]
    p_hi = clopper_pearson(other[0], len(other[1].counts), alpha)[1]
    eps = math.log(p_lo / p_hi) if p_lo > 0 else -math.inf
    return Bound(event.describe(), hits_d, hits_n, p_lo, p_hi, eps, event.claimed(largest))


@dataclass(frozen=True)
class Result:
    """One mechanism's test. `flagged`: some event's lower bound exceeds the spend it claims."""

    mechanism: str
    noise: str
    runs: int
    selection_runs: int
    confidence: float
    slot: int
    largest_spend: float
    window_bound: float
    bounds: tuple[Bound, Bound]

    @property
    def best(self) -> Bound:
        """The bound with the largest eps_lb - claimed."""
        return max(self.bounds, key=lambda b: b.epsilon_lower - b.claimed)

    @property
    def flagged(self) -> bool:
        return any(exceeds(b.epsilon_lower, b.claimed) for b in self.bounds)

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out["flagged"] = self.flagged
        return out


def _batch(scenario: Scenario, rng: Randomness, neighbour: bool, runs: int, tick: Callable[[], None]) -> Runs:
    counts, spends = np.empty(runs, dtype=np.int64), np.empty(runs, dtype=float)
    for i in range(runs):
        counts[i], spends[i] = scenario.run(rng, neighbour)
        tick()
    return Runs(counts, spends)


def privacy_test(
    scenario: Scenario,
    runs: int,
    selection_runs: int,
    seed: int,
    confidence: float = 0.95,
    break_noise_scale: float | None = None,
    progress: Progress | None = None,
) -> Result:
    """Selection batch, then a fresh estimation batch, for D and D' each (see the module docstring)."""
    if runs < 1 or selection_runs < 1 or not 0 < confidence < 1:
        raise ValueError("need runs >= 1, selection runs >= 1 and 0 < confidence < 1")
    seeds = np.random.SeedSequence(seed).spawn(4)
    sources: list[Randomness] = [NumpyRandomness(int(s.generate_state(1)[0])) for s in seeds]
    if break_noise_scale is not None:
        sources = [ScaledNoise(source, break_noise_scale) for source in sources]
    total, done = 2 * (runs + selection_runs), [0]

    def tick() -> None:
        done[0] += 1
        if progress and (done[0] % 200 == 0 or done[0] == total):
            progress(done[0], total)

    plan = ((False, selection_runs), (True, selection_runs), (False, runs), (True, runs))
    batches = [_batch(scenario, rng, neighbour, n, tick) for rng, (neighbour, n) in zip(sources, plan, strict=True)]
    events = choose_events(batches[0], batches[1])
    largest = max(float(b.spends.max()) for b in batches)
    alpha = (1 - confidence) / 4  # Bonferroni: two events, two one-sided bounds each
    bounds = (
        bound(events[0], batches[2], batches[3], alpha, largest),
        bound(events[1], batches[2], batches[3], alpha, largest),
    )
    target = scenario.requirement(0)
    window_bound = target.forward.epsilon if isinstance(target, DynamicRequirement) else target.epsilon
    return Result(
        scenario.mechanism, sources[0].label, runs, selection_runs, confidence, scenario.target_slot, largest,
        window_bound, bounds,
    )


def render(results: list[Result]) -> str:
    """A Markdown table, one row per mechanism (its event with the largest eps_lb - claimed)."""
    lines = [
        "| mechanism | slot t* | runs per input | eps_lb | claimed spend | largest spend at t* | E | event | flagged |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        b = r.best
        lines.append(
            f"| {r.mechanism} | {r.slot} | {r.selection_runs} + {r.runs} | {b.epsilon_lower:.3f} | {b.claimed:.3f} | "
            f"{r.largest_spend:.3f} | {r.window_bound:g} | {b.event} | {'YES' if r.flagged else 'no'} |"
        )
    if results:
        lines.append(f"\nconfidence {results[0].confidence:g} per mechanism; noise: {results[0].noise}")
    return "\n".join(lines)


def cmd_privacy_test(args: argparse.Namespace, progress: Callable[[str], Progress] | None = None) -> int:
    results = []
    try:
        scenarios = [
            Scenario(name, args.users, args.d, args.epsilon, args.window, args.slot) for name in args.mechanisms
        ]
        for scenario in scenarios:
            show = None if args.quiet or progress is None else progress(f"privacy-test {scenario.mechanism}")
            results.append(privacy_test(
                scenario, args.runs, args.selection_runs, args.seed, args.confidence, args.break_noise_scale, show
            ))
    except ValueError as err:
        print(f"pwevent privacy-test: {err}", file=sys.stderr)
        return 2
    print(json.dumps([r.to_json() for r in results], indent=2) if args.json else render(results))
    return 1 if any(r.flagged for r in results) else 0


def add_privacy_test_parser(sub: argparse._SubParsersAction, progress: Callable[[str], Progress]) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "privacy-test", help="black-box lower bound on each mechanism's real epsilon vs its claimed spend",
        description="Run each mechanism many times on two neighbouring inputs (one user's value at one slot "
        "added or removed), estimate the probability of a threshold event on the released count with exact "
        "Clopper-Pearson bounds, and report a lower confidence bound on the realised epsilon against the "
        "user's claimed spend at that slot. Exit 1 if any mechanism is flagged. Method: docs/privacy-test.md.",
    )
    p.add_argument("--mechanisms", type=lambda s: tuple(s.split(",")), default=REGISTRY.names(),
                   help="comma-separated (default: every registered mechanism)")
    p.add_argument("--runs", type=int, default=10_000, help="estimation runs per input (default 10000)")
    p.add_argument("--selection-runs", type=int, default=2_500, help="runs per input that pick the event (2500)")
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--d", type=int, default=2, help="cells")
    p.add_argument("--epsilon", type=float, default=4.0, help="E of the target (and the baselines' global E)")
    p.add_argument("--window", type=int, default=4, help="w of the target (and the baselines' global w)")
    p.add_argument("--slot", type=int, default=0, help="slot t* where the inputs differ (default w + 1)")
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--seed", type=int, default=0, help="seed of the numpy noise")
    p.add_argument("--break-noise-scale", type=float, metavar="FACTOR",
                   help="TEST ONLY: multiply every discrete Laplace scale by FACTOR (e.g. 0.5) to check "
                   "that a broken mechanism is flagged")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=lambda args: cmd_privacy_test(args, progress))
