"""The numbers the job exports as Flink metrics (jobs/common/service_metrics.py), checked against the
spend log the engine writes (an independent account of what each ledger spent)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.service_metrics import WINDOW_BUCKETS, SlotReport, window_bucket, window_utilisation
from pwevent.operators.noise import NumpyRandomness
from pwevent.operators.registry import mechanism
from pwevent.state.requirements import DynamicRequirement, Requirement

D = 4


def run(name: str, requirements: dict[str, Requirement | DynamicRequirement], slots: int,
        window: int | None = None, epsilon: float | None = None) -> tuple[Engine, list[SlotReport], list[dict]]:
    log: list[dict] = []
    engine = Engine(mechanism(name, window, epsilon), D, NumpyRandomness(3), 50, log.append)
    for user, requirement in requirements.items():
        engine.declare(user, 1, requirement)
    reports = []
    rng = np.random.default_rng(1)
    for slot in range(1, slots + 1):
        users = np.arange(engine.users, dtype=np.int64)
        outcome, _ = engine.step(slot, users, rng.integers(0, D, len(users)))
        reports.append(SlotReport.of(slot, outcome.kind.value, outcome.threshold, engine.population.live()))
    return engine, reports, log


def spent_by_log(log: list[dict], slot: int) -> dict[str, float]:
    """Requirement level -> the largest window share of a ledger, from the spend log alone."""
    spends: dict[str, dict[int, float]] = defaultdict(dict)
    requirement: dict[str, dict] = {}
    for record in log:
        if record["record"] == "spend":
            spends[record["ledger"]][record["slot"]] = record["spend1"] + record["spend2"]
            requirement[record["ledger"]] = record["requirement"]
    out: dict[str, float] = {}
    for ledger, by_slot in spends.items():
        req = requirement[ledger]
        fixed = req.get("backward", req)
        share = sum(v for s, v in by_slot.items() if slot - fixed["w"] < s <= slot) / fixed["epsilon"]
        level = f"w{fixed['w']}_eps{fixed['epsilon']:g}"
        out[level] = max(out.get(level, 0.0), share)
    return out


def test_utilisation_equals_what_the_spend_log_says() -> None:
    requirements = {f"u{i}": Requirement(4 + 2 * (i % 2), 0.8 + 0.4 * (i % 2)) for i in range(10)}
    engine, reports, log = run("PBA", requirements, 12)
    last = reports[-1]
    by_level = spent_by_log(log, 12)
    assert set(by_level) == {"w4_eps0.8", "w6_eps1.2"}
    assert all(0.0 <= share <= 1.0 + 1e-9 for share in by_level.values())
    # both levels' w are in the bucket of 1 to 9 slots: its value is the larger share, the others 0
    assert last.utilisation == pytest.approx({**dict.fromkeys(WINDOW_BUCKETS, 0.0), "w1_9": max(by_level.values())})
    assert (last.users, last.classes) == (10, 2)
    assert last.gauges()["registered_users"] == 10 and last.gauges()["last_decided_slot"] == 12


def test_a_uniform_level_fills_its_window_and_stays_pinned() -> None:
    """Uniform spends E/w every slot: half the window after w/2 slots, all of it from slot w on."""
    requirements = {f"u{i}": Requirement(8, 1.0) for i in range(5)}
    _, reports, _ = run("Uniform", requirements, 12, window=8, epsilon=1.0)
    assert reports[3].utilisation["w1_9"] == pytest.approx(0.5)
    assert all(r.utilisation["w1_9"] == pytest.approx(1.0) for r in reports[7:])
    assert reports[-1].utilisation_ppm() == {"w1_9": 1_000_000, "w10_99": 0, "w100_999": 0, "w1000_up": 0}


def test_kinds_thresholds_and_dynamic_levels() -> None:
    requirements = {f"u{i}": DynamicRequirement(Requirement(6, 2.0), Requirement(5, 1.0)) for i in range(6)}
    engine, reports, log = run("DPBD", requirements, 8)
    assert {r.kind for r in reports} <= {"publish", "skip", "nullify"}
    for report in reports:
        assert report.gauges()["obs_threshold_milli"] == round((report.threshold or 0.0) * 1000)
    assert reports[-1].utilisation["w1_9"] == pytest.approx(spent_by_log(log, 8)["w6_eps2"])  # the backward window
    assert window_utilisation([], 3) == dict.fromkeys(WINDOW_BUCKETS, 0.0)


@pytest.mark.parametrize(("w", "bucket"), [(1, "w1_9"), (9, "w1_9"), (10, "w10_99"), (99, "w10_99"),
                                           (100, "w100_999"), (999, "w100_999"), (1000, "w1000_up"),
                                           (50_000, "w1000_up")])
def test_a_requirement_counts_in_the_bucket_of_its_window(w: int, bucket: str) -> None:
    """Four buckets, the decades of w, whatever levels users declare (a bounded label)."""
    assert window_bucket(Requirement(w, 0.5)) == bucket
    assert window_bucket(DynamicRequirement(Requirement(w, 0.5), Requirement(3, 1.0))) == bucket
