"""The budget in view as records of the spend log (docs/formats.md, "Spend log", the `utilisation`
record): one per decided slot, every window bucket in it, the numbers the metric
`budget_utilisation_ppm` shows (jobs/common/service_metrics.py, `window_utilisation`, which writes
both), written alike by the replay and the job's Population, and recomputed by `pwevent audit` from
the spend lines and the requirements, which fails any other value naming the slot and the bucket."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from pwevent.jobs.common.config import Config, parse_config
from pwevent.jobs.common.population_operator import PopulationOperator, SlotChanges, SlotCount
from pwevent.jobs.common.service_metrics import PPM, WINDOW_BUCKETS, utilisation_ppm, window_utilisation
from pwevent.jobs.common.shared_budget import SharedBudget
from pwevent.jobs.offline import audit
from pwevent.jobs.offline.audit import AuditInputs, AuditReport, audit_records
from pwevent.jobs.offline.replay import run_replay
from pwevent.operators.noise import NumpyRandomness
from pwevent.state.requirements import DynamicRequirement, Requirement
from tests.jobs.test_statistics import STATISTICS, inputs, settings, two_valued
from tests.jobs.test_statistics import replay as replay_two

Record = dict[str, Any]
ROOT = Path(__file__).parents[2]
SLOTS = 30
#: Three requirement levels, one in each of the buckets w1_9, w10_99 and w100_999 (none in w1000_up).
LEVELS = [Requirement(4, 1.0), Requirement(20, 2.0), Requirement(150, 3.0)]


def config(mechanism: str = "PBD", statistics: list[Record] | None = None, **more: Any) -> Config:
    raw = settings(mechanism, statistics, **more)
    raw["caps"] = {"max_w": 200}
    if statistics is None:
        raw.setdefault("domain", {"type": "cells", "d": 3})
    return parse_config(raw)


def drive(cfg: Config, declared: dict[int, list[tuple[str, Any]]], slots: int = SLOTS,
          seed: int = 4) -> tuple[SharedBudget, list[Record], list[dict[str, Fraction]]]:
    """The replay's SharedBudget over `slots` slots: `declared[slot]` (user, requirement) records, every
    registered user present each slot with a random value per statistic. Returns the budget, its
    spend log and, per slot, `window_utilisation` over every statistic's live classes."""
    log: list[Record] = []
    budget = SharedBudget(cfg, NumpyRandomness(seed), log.append)
    rng = np.random.default_rng(seed)
    shares = []
    for slot in range(1, slots + 1):
        for user, requirement in declared.get(slot, []):
            budget.declare(user, slot, requirement)
        users = np.arange(budget.users, dtype=np.int64)
        budget.step(slot, users, [rng.integers(0, s.domain.d, len(users)) for s in cfg.statistics])
        live = [engine.population.live() for engine in budget.engines]
        shares.append(window_utilisation(live[0], slot, *live[1:]))
    return budget, log, shares


def views(log: list[Record]) -> list[Record]:
    return [r for r in log if r["record"] == "utilisation"]


def requirement_lines(declared: dict[int, list[tuple[str, Any]]]) -> list[tuple[str, str]]:
    """The requirement records of `declared` as the input lines of the tests' clock (1 s slots from 0)."""
    records = [{"user": user, "time": (slot - 1) * 1000 + 5, **requirement.to_json()}
               for slot, items in sorted(declared.items()) for user, requirement in items]
    return [(f"requirements:{n}", json.dumps(r)) for n, r in enumerate(records, 1)]


def test_one_record_per_slot_with_every_bucket_and_0_where_no_class_is() -> None:
    declared = {3: [(f"u{i}", LEVELS[i % 2]) for i in range(6)], 9: [("late", LEVELS[2])]}
    _, log, shares = drive(config(), declared)
    got = views(log)
    assert [r["slot"] for r in got] == list(range(1, SLOTS + 1))  # one per decided slot, none else
    assert all(list(r["ppm"]) == list(WINDOW_BUCKETS) for r in got)  # every bucket, in one order
    assert got[0]["ppm"] == got[1]["ppm"] == dict.fromkeys(WINDOW_BUCKETS, 0)  # nobody registered yet
    assert all(r["ppm"]["w1000_up"] == 0 for r in got)  # no class of that bucket
    assert all(r["ppm"]["w100_999"] == 0 for r in got[:8]) and all(r["ppm"]["w100_999"] > 0 for r in got[8:])
    assert all(r["ppm"]["w1_9"] > 0 and r["ppm"]["w10_99"] > 0 for r in got[2:])
    # the record is the metric's numbers: window_utilisation in millionths
    assert [r["ppm"] for r in got] == [utilisation_ppm(s) for s in shares]
    # the record closes its slot: after the slot's spend lines, before the next slot's lines
    last_spend = max(i for i, r in enumerate(log) if r["record"] == "spend" and r["slot"] == 20)
    assert log[last_spend + 1] == {"record": "utilisation", "slot": 20, "ppm": got[19]["ppm"]}


def test_several_statistics_are_summed_against_the_whole_budget() -> None:
    """Each class's spend over its window is added up over both statistics (shares 0.4 and 0.6) and
    set against its members' whole E: what `window_utilisation` gives for both populations, more
    than for either statistic alone."""
    declared = {1: [(f"u{i}", LEVELS[i % 2]) for i in range(6)]}
    budget, log, shares = drive(config("PBD", STATISTICS), declared)
    got = views(log)
    assert [r["ppm"] for r in got] == [utilisation_ppm(s) for s in shares]
    assert all("statistic" not in r for r in got)  # one record for both statistics
    cells, screen = (engine.population.live() for engine in budget.engines)
    both = utilisation_ppm(window_utilisation(cells, SLOTS, screen))
    for alone in (window_utilisation(cells, SLOTS), window_utilisation(screen, SLOTS)):
        assert all(both[b] > utilisation_ppm(alone)[b] for b in ("w1_9", "w10_99"))
    assert both == got[-1]["ppm"]
    assert all(v <= PPM for r in got for v in r["ppm"].values())  # shares add up to 1: within the budget


def test_a_dynamic_requirement_counts_by_its_backward_window() -> None:
    """DPBD: the backward window (w 12) puts the class in w10_99, not its forward window's bucket (w 5);
    a backward budget below what the window spent is projected (docs/mechanisms.md section 7), and
    the record then shows more than the whole of it, as the metric does."""
    wide = DynamicRequirement(Requirement(12, 2.0), Requirement(5, 1.0))
    tight = DynamicRequirement(Requirement(12, 0.001), Requirement(5, 1.0))
    declared = {1: [(f"u{i}", wide) for i in range(5)], 7: [("u0", tight)]}
    budget, log, shares = drive(config("DPBD"), declared, slots=12)
    got = views(log)
    assert [r["ppm"] for r in got] == [utilisation_ppm(s) for s in shares]  # window_utilisation, reused
    assert all(r["ppm"]["w1_9"] == 0 and r["ppm"]["w10_99"] > 0 for r in got)
    assert got[6]["ppm"]["w10_99"] > PPM  # the projected class: its window spent more than EB = 0.001
    assert any(r["record"] == "spend" and "projected_backward" in r for r in log)


def test_the_jobs_population_writes_the_record_the_metric_shows() -> None:
    """The streaming job's Population (`PopulationOperator`) emits the slot's record among its audit
    lines, and its metrics report (`SlotReport.utilisation_ppm`, the gauge) holds the same numbers."""
    cfg = config("PBA", STATISTICS)
    operator = PopulationOperator(cfg, NumpyRandomness(2))
    from pwevent.jobs.common.membership import Membership, UserState
    from pwevent.jobs.common.requirement_rules import RequirementRules
    from pwevent.jobs.common.statistic_cells import joint_size

    membership = Membership(RequirementRules(cfg.mechanism_spec(), cfg.caps.max_w))
    changes = []
    for i in range(6):
        applied = membership.apply(f"u{i}", UserState(), 1, LEVELS[i % 3])
        assert applied.change is not None
        changes.append(applied.change)
    rows: list[SlotChanges | SlotCount] = [SlotChanges(1, tuple(changes))]
    for slot in range(1, 13):
        rows += [SlotCount(slot, change.target, (slot + n) % joint_size(cfg.statistics), 1)
                 for n, change in enumerate(changes)]
    closed = operator.on_slot_end(12, rows, ended=False)
    got = views(closed.emitted.audit)
    assert [r["slot"] for r in got] == list(range(1, 13))
    reports = closed.emitted.reports[::2]  # one report per statistic and slot, the same numbers
    assert [r["ppm"] for r in got] == [report.utilisation_ppm() for report in reports]
    assert got[-1]["ppm"]["w100_999"] > 0


# ----------------------------------------------------------------------------- replay and audit


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`pwevent replay` of the mutation suite's users (fixed levels, late joiners) under PBD."""
    folder = tmp_path_factory.mktemp("view")
    cfg = config("PBD", domain={"type": "binary"})
    requirements, events = inputs(False)
    texts = [json.dumps(r) for r in requirements]
    (folder / "req.jsonl").write_text("".join(t + "\n" for t in texts))
    (folder / "ev.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    run_replay(cfg, str(folder / "ev.jsonl"), str(folder / "req.jsonl"), str(folder / "rel.jsonl"),
               str(folder / "spend.jsonl"), seed=3, through=60)
    log, releases = ([json.loads(line) for line in (folder / f).read_text().splitlines()]
                     for f in ("spend.jsonl", "rel.jsonl"))
    return {"config": cfg, "log": log, "releases": releases, "requirements": texts, "folder": folder}


def full(run: dict[str, Any], log: list[Record] | None = None, **more: Any) -> AuditReport:
    lines = [(f"requirements:{n}", text) for n, text in enumerate(run["requirements"], 1)]
    return audit_records(run["log"] if log is None else log,
                         AuditInputs.build(lines, run["releases"], run["config"], **more))


def test_the_replay_writes_them_bounded_and_in_the_schema(replayed: dict[str, Any]) -> None:
    got = views(replayed["log"])
    assert [r["slot"] for r in got] == [r["slot"] for r in replayed["releases"]] == list(range(1, 61))
    schema = Draft202012Validator(json.loads((ROOT / "docs" / "schemas" / "spend.schema.json").read_text()))
    for record in replayed["log"]:
        schema.validate(record)
    text = (replayed["folder"] / "spend.jsonl").read_text().splitlines()
    sizes = [len(line.encode()) for line in text if '"record":"utilisation"' in line]
    assert len(sizes) == 60 and max(sizes) <= 110  # about 100 bytes a slot, whatever the population
    assert full(replayed).ok


def _changed(log: list[Record], slot: int, bucket: str, value: Any) -> list[Record]:
    return [{**r, "ppm": {**r["ppm"], bucket: value}} if r["record"] == "utilisation" and r["slot"] == slot else r
            for r in log]


@pytest.mark.parametrize("delta", [1, -1, 1000])
def test_one_value_altered_fails_the_audit_naming_the_slot_and_the_bucket(replayed: dict[str, Any],
                                                                          delta: int) -> None:
    view = views(replayed["log"])[40]
    bucket = next(b for b, v in view["ppm"].items() if v)
    log = _changed(replayed["log"], 41, bucket, view["ppm"][bucket] + delta)
    for report in (full(replayed, log), audit_records(log)):  # the full audit and the log alone
        assert [(v.rule, v.slot) for v in report.violations] == [("utilisation_mismatch", 41)], report.render()
        line = str(report.violations[0])
        assert line.startswith(f"slot 41: utilisation_mismatch: bucket {bucket}: the record says "
                               f"{view['ppm'][bucket] + delta} ppm, the spend lines give {view['ppm'][bucket]} ppm")


def test_spend_lines_that_move_the_view_fail_it(replayed: dict[str, Any]) -> None:
    """Spend lines lowered, which no window check can see (less spent is within every bound): the
    slot's record no longer follows from the lines."""
    lowered = [{**r, "spend1": r["spend1"] / 2} if r["record"] == "spend" and r["slot"] == 41 else r
               for r in replayed["log"]]
    assert any(r["spend1"] > 0 for r in lowered if r["record"] == "spend" and r["slot"] == 41)
    report = audit_records(lowered)
    assert {v.rule for v in report.violations} == {"utilisation_mismatch"}, report.render()
    assert min(v.slot for v in report.violations) == 41


def test_a_log_written_before_the_records_still_audits(replayed: dict[str, Any]) -> None:
    """Backward compatibility: a spend log without any utilisation record (a release before them)
    passes the full and the quick audit, each saying that the budget in view was not checked."""
    old = [r for r in replayed["log"] if r["record"] != "utilisation"]
    for report in (full(replayed, old), audit_records(old)):
        assert report.ok, report.render()
        assert any("no utilisation records" in note for note in report.notes)
    # a job upgraded mid-run: records from the upgrade on, none missing after
    upgraded = [r for r in replayed["log"] if not (r["record"] == "utilisation" and r["slot"] < 30)]
    assert full(replayed, upgraded).ok
    holes = [r for r in upgraded if not (r["record"] == "utilisation" and r["slot"] in (35, 36))]
    report = full(replayed, holes)
    assert [(v.rule, v.slot) for v in report.violations] == [("utilisation_missing", 35)], report.render()
    assert "slots 35..36" in report.render()


def test_malformed_records_are_input_errors_or_findings(replayed: dict[str, Any]) -> None:
    with pytest.raises(audit.AuditInputError, match="field 'ppm'"):
        audit_records([{"record": "utilisation", "slot": 1, "ppm": [1, 2, 3, 4]}])
    with pytest.raises(audit.AuditInputError, match="field 'slot'"):
        audit_records([{"record": "utilisation", "slot": 0, "ppm": {}}])
    with pytest.raises(audit.AuditInputError, match="names none"):
        audit_records([{"record": "utilisation", "statistic": "cells", "slot": 1, "ppm": {}}])
    for value in (True, "12", None, 12.0, math.inf):
        report = audit_records(_changed(replayed["log"], 5, "w1000_up", value))
        assert report.rules() == {"utilisation_mismatch"}, value
    extra = [{**r, "ppm": {**r["ppm"], "w10000_up": 0}} if r["record"] == "utilisation" and r["slot"] == 5 else r
             for r in replayed["log"]]
    assert "'w10000_up' is not a window bucket" in audit_records(extra).render()


def test_two_statistics_are_recomputed_from_the_shares_and_the_declared_requirements(tmp_path: Path) -> None:
    """The lines of a statistic at share s state s E: the auditor finds E among the requirements the
    input declares. A quick audit (no shares) says it did not check them; where a class's requirement
    is declared by nobody left in the input (erased users), those buckets are noted, not guessed."""
    cfg = parse_config(settings("PBD", STATISTICS))
    requirements, plain = inputs(False)
    log, releases = replay_two(tmp_path, cfg, requirements, two_valued(plain))

    def audited(log: list[Record], requirements: list[Record], **more: Any) -> AuditReport:
        lines = [(f"requirements:{n}", json.dumps(r)) for n, r in enumerate(requirements, 1)]
        return audit_records(log, AuditInputs.build(lines, releases, cfg, **more))

    assert audited(log, requirements).ok
    view = next(r for r in views(log) if r["slot"] == 20)
    bucket = next(b for b, v in view["ppm"].items() if v)
    assert audited(_changed(log, 20, bucket, view["ppm"][bucket] - 1), requirements).rules() == \
        {"utilisation_mismatch"}
    quick = audit_records(log)
    assert quick.ok and any("utilisation records not checked" in note for note in quick.notes)
    gone = {r["user"] for r in requirements if r["w"] == 8}  # one level, declared by nobody else
    report = audited(log, [r for r in requirements if r["user"] not in gone], erased=frozenset(gone))
    assert report.ok, report.render()
    assert any(note.startswith("utilisation not checked for") for note in report.notes)


# ------------------------------------------------------------------------------------ exactness


def test_the_auditors_constants_are_the_metrics() -> None:
    assert audit.WINDOW_BUCKETS == WINDOW_BUCKETS and audit.PPM == PPM


def test_the_auditors_exact_sums_and_rounding_are_the_writers() -> None:
    """The writer adds a window's spends with `math.fsum` (the exact sum rounded once) and divides as
    fractions; the auditor adds whole numbers of 2^-1074 and divides integers. Both are the one
    exact definition: equal on spends of every magnitude, and ties round half to even."""
    rng = np.random.default_rng(7)
    for _ in range(2000):
        n = int(rng.integers(1, 60))
        spends = [float(x) for x in rng.choice([1e-14, 1e-3, 0.1, 3.0], n) * rng.random(n)]
        epsilon = float(rng.choice([1e-3, 0.3, 1.0, 7.0]) * (0.5 + rng.random()))
        exact = sum(audit._exact(x) for x in spends) / audit.EXACT_UNIT
        assert exact == math.fsum(spends)
        assert audit._ppm(exact, epsilon) == round(Fraction(math.fsum(spends)) * PPM / Fraction(epsilon))
    for spent, want in ((12.5, 12), (13.5, 14), (0.5, 0), (1.5, 2)):  # 10^6 x spent / 10^6: exact ties
        assert audit._ppm(spent, 1e6) == round(Fraction(spent) * PPM / Fraction(1e6)) == want
    assert audit._exact(5e-324) == 1 and audit._exact(0.0) == 0


def test_a_log_of_slots_without_users_confirms_its_slots(tmp_path: Path) -> None:
    """Before anyone registers a slot has no spend line, only its utilisation record; `pwevent audit
    --release-topic` audits against the releases up to the log's last slot of either."""
    from pwevent.jobs.offline.release_topic import last_spend_slot

    log = tmp_path / "spend.jsonl"
    log.write_text("".join(json.dumps({"record": "utilisation", "slot": s, "ppm": dict.fromkeys(WINDOW_BUCKETS, 0)})
                           + "\n" for s in range(1, 6)))
    assert last_spend_slot(str(log)) == 5
    assert audit_records(json.loads(line) for line in log.read_text().splitlines()).ok


def test_sums_that_naive_addition_gets_wrong_are_exact() -> None:
    for spends in ([1.0, 1e-16, 1e-16], [0.1] * 10, [1e-14] * 1000 + [1.0], [3.0, 5e-324, 2.0**-60]):
        exact = sum(audit._exact(x) for x in spends) / audit.EXACT_UNIT
        assert exact == math.fsum(spends) == float(sum(map(Fraction, spends)))


def test_a_worked_vector_under_uniform() -> None:
    """Uniform at its global requirement (w 8, E 1.0) spends E / w = 0.125 of every member's budget each
    slot: the w1_9 bucket reads 125,000 ppm after slot 1, t x 125,000 after slot t, and the whole
    budget, 1,000,000, from slot 8 on, when the window is full; the other buckets 0. Before anybody
    registers (slots 1-2) every bucket is 0."""
    _, log, _ = drive(config("Uniform"), {3: [("u0", Requirement(8, 1.0)), ("u1", Requirement(8, 1.0))]}, slots=14)
    got = [r["ppm"] for r in views(log)]
    expected_w1_9 = [0, 0] + [min(t, 8) * 125_000 for t in range(1, 13)]
    assert [ppm["w1_9"] for ppm in got] == expected_w1_9
    assert all(ppm["w10_99"] == ppm["w100_999"] == ppm["w1000_up"] == 0 for ppm in got)
