"""No budget weakens the noise, end to end through `pwevent replay` (docs/mechanisms.md, Budget floor).

The reproductions: budgets whose noise scale left OpenDP's old 32-bit sampler domain, where a
clipped draw is the true value plus the known constant 2^31 - 1, and a per-slot budget so small that
OBS computed NaN.
"""

from __future__ import annotations

import json
import math

import numpy as np

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.files import DEMO_ORIGIN, DEMO_ORIGIN_MS
from pwevent.jobs.offline.replay import run_replay

I32_MAX = 2**31 - 1
SLOT_MS = 60_000


def read(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle]


def strict_json_lines(path):
    """Every line parses as strict JSON: NaN and Infinity are refused."""
    def refuse(constant):
        raise ValueError(f"{constant} in {path}")

    with open(path) as handle:
        return [json.loads(line, parse_constant=refuse) for line in handle]


def replay(tmp_path, raw_config, requirements, slots, users, seed=None):
    """Replay `users` users with random binary values over `slots` slots; returns the outputs."""
    rng = np.random.default_rng(7)
    events = tmp_path / "events.jsonl"
    with open(events, "w") as handle:
        for slot in range(1, slots + 1):
            for user in range(users):
                time = DEMO_ORIGIN_MS + (slot - 1) * SLOT_MS + 1
                handle.write(json.dumps({"user": f"u{user}", "time": time, "value": int(rng.integers(2))}) + "\n")
    reqs = tmp_path / "requirements.jsonl"
    with open(reqs, "w") as handle:
        for record in requirements:
            handle.write(json.dumps(record) + "\n")
    config = parse_config({"slot": "60s", "origin": DEMO_ORIGIN, "domain": {"type": "binary"}, **raw_config})
    outs = {k: str(tmp_path / f"{k}.jsonl") for k in ("releases", "spend", "truth", "rejects")}
    run_replay(config, str(events), str(reqs), outs["releases"], outs["spend"], outs["truth"], outs["rejects"], seed)
    return {k: strict_json_lines(v) for k, v in outs.items()}


def at(slot):
    return DEMO_ORIGIN_MS + (slot - 1) * SLOT_MS


def test_uniform_at_declared_tiny_budget_never_releases_a_clipped_cell(tmp_path):
    """20 users at E = 1e-6, w = 1000 (within the caps): Uniform spends 1e-9 a slot (scale 1e9)."""
    raw = {"mechanism": "Uniform", "window": 1000, "epsilon": 1e-6, "noise": "opendp"}
    requirements = [{"user": f"u{u}", "time": at(1), "w": 1000, "epsilon": 1e-6} for u in range(20)]
    out = replay(tmp_path, raw, requirements, 60, 20)
    assert not out["rejects"]
    cells = 0
    for release, truth in zip(out["releases"], out["truth"], strict=True):
        assert release["kind"] == "publish"
        for count, true in zip(release["counts"], truth["counts"], strict=True):
            cells += 1
            assert abs(abs(count - true) - I32_MAX) > 1e3, (release["slot"], count, true)
    assert cells == 120


def test_pbd_at_declared_tiny_budget_never_reveals_the_distance(tmp_path):
    """PBD with every user at (1000, 1e-6): eps1 = 5e-10; the dissimilarity's noise must not clip."""
    raw = {"mechanism": "PBD", "noise": "opendp"}
    requirements = [{"user": f"u{u}", "time": at(1), "w": 1000, "epsilon": 1e-6} for u in range(20)]
    out = replay(tmp_path, raw, requirements, 60, 20)
    assert not out["rejects"]
    last = np.zeros(2, dtype=np.int64)
    checked = 0
    for release, truth in zip(out["releases"], out["truth"], strict=True):
        # one budget level: OBS keeps every user, so the sampled counts are the true counts
        distance = int(np.abs(np.asarray(truth["counts"]) - last).sum())
        noisy = release["dissimilarity"] * 2
        assert abs(abs(noisy - distance) - I32_MAX) > 1e3, (release["slot"], noisy, distance)
        checked += 1
        if release["kind"] == "publish":
            last = np.asarray(release["counts"])
    assert checked == 60


def test_float_residue_calculation_budget_is_zero(tmp_path):
    """DPBA: backward (1, 10) forward (3, 0.3), then backward (2, 0.1): 0.1/2 - 0.3/6 = 6.9e-18 in floats."""
    assert 0.1 / 2 - 0.3 / 6 > 0  # the residue this test is about
    raw = {"mechanism": "DPBA", "noise": "opendp"}
    forward = {"w": 3, "epsilon": 0.3}
    requirements = [{"user": f"u{u}", "time": at(1), "backward": {"w": 1, "epsilon": 10}, "forward": forward}
                    for u in range(50)]
    requirements += [{"user": f"u{u}", "time": at(2), "backward": {"w": 2, "epsilon": 0.1}, "forward": forward}
                     for u in range(50)]
    out = replay(tmp_path, raw, requirements, 2, 50)
    assert not out["rejects"]
    second = out["releases"][1]
    assert second["epsilon_calculation"] is None and second["dissimilarity"] is None
    assert second["kind"] == "skip"
    spends = [s for s in out["spend"] if s.get("record") == "spend" and s["slot"] == 2]
    assert spends and all(s["spend1"] == 0.0 and s["spend2"] == 0.0 for s in spends)


def test_requirement_below_the_floor_is_rejected_and_the_rest_release(tmp_path):
    """One user at (1, 1e-300) used to make OBS return NaN: every slot became a skip with threshold NaN."""
    raw = {"mechanism": "PBD", "noise": "opendp"}
    requirements = [{"user": f"u{u}", "time": at(1), "w": 10, "epsilon": 1.0} for u in range(19)]
    requirements.append({"user": "u19", "time": at(1), "w": 1, "epsilon": 1e-300})
    out = replay(tmp_path, raw, requirements, 20, 19)
    [reject] = out["rejects"]
    assert reject["reason"] == "invalid_requirement"
    assert "caps.min_slot_epsilon" in reject["detail"] and "floor" in reject["detail"]
    assert all(r["threshold"] is not None and math.isfinite(r["threshold"]) for r in out["releases"])
