"""Several statistics under one budget (docs/mechanisms.md, "Several statistics under one budget"):
two statistics replayed from one events file, for every mechanism, pass the full audit; an
independent check from the spend log alone (exact sums) finds every user's window spend, summed over
both statistics, within the user's declared budget; and what breaks the shared budget fails the
audit: a statistic charged at the whole budget instead of its share, and two separate runs at the
whole budget whose logs are put together.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.config import Config, ConfigError, parse_config
from pwevent.jobs.offline.audit import AuditInputs, AuditReport, audit_records
from pwevent.jobs.offline.replay import run_replay
from pwevent.operators.registry import REGISTRY
from pwevent.state.requirements import RELATIVE_TOLERANCE, parse_requirement
from tests.jobs.test_audit_mutations import DYNAMIC, SLOTS, inputs

Record = dict[str, Any]
ROOT = Path(__file__).parents[2]
#: The rules of the check across statistics, each caught below (tests/jobs/test_audit.py counts on it).
TOTAL_RULES = {"user_total_fixed_window", "user_total_backward_window", "user_total_forward_window"}
CAUGHT_HERE = TOTAL_RULES | {"unknown_statistic"}
SCREENS = ["home", "map", "feed"]
STATISTICS = [
    {"name": "cells", "domain": {"type": "cells", "d": 4}, "value": "payload.cell", "share": 0.4},
    {"name": "screen", "domain": {"type": "categories", "values": SCREENS}, "value": "screen", "share": 0.6},
]


def settings(name: str, statistics: list[dict[str, Any]] | None = None, **more: Any) -> dict[str, Any]:
    entry = REGISTRY.get(name)
    quick = {"evidence": 4, "static_drift": 100.0, "level_margin": 0.0}  # Adaptive: switches within a few slots
    return {"mechanism": name, "slot": "1s", "origin": 0, **entry.global_keys(8, 1.0), "caps": {"max_w": 20},
            "noise": "numpy-fast", **({entry.section: quick} if entry.section else {}),
            **({"statistics": statistics} if statistics is not None else {}), **more}


def two_valued(events: list[Record], seed: int = 5) -> list[Record]:
    """The mutation suite's events with a cell (nested) and a screen each, both moving with time."""
    rng = np.random.default_rng(seed)
    out = []
    for event in events:
        slot = event["time"] // 1000 + 1
        cell = int(rng.integers(0, 2)) + (2 if slot > SLOTS // 2 else 0)
        screen = SCREENS[int(rng.random() < 0.2 + 0.6 * (slot > SLOTS // 3))]
        out.append({"user": event["user"], "time": event["time"], "payload": {"cell": cell}, "screen": screen})
    return out


def replay(folder: Path, config: Config, requirements: list[Record], events: list[Record],
           seed: int = 3) -> tuple[list[Record], list[Record]]:
    (folder / "req.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requirements))
    (folder / "ev.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    run_replay(config, str(folder / "ev.jsonl"), str(folder / "req.jsonl"), str(folder / "rel.jsonl"),
               str(folder / "spend.jsonl"), rejects_out=str(folder / "rejects.jsonl"), seed=seed, through=SLOTS)
    return ([json.loads(line) for line in (folder / name).read_text().splitlines()]
            for name in ("spend.jsonl", "rel.jsonl"))  # type: ignore[return-value]


def audit(config: Config, requirements: list[Record], log: list[Record], releases: list[Record]) -> AuditReport:
    lines = [(f"requirements:{n}", json.dumps(r)) for n, r in enumerate(requirements, 1)]
    return audit_records(log, AuditInputs.build(lines, releases, config))


class Shared:
    """One mechanism's two-statistic replay."""

    def __init__(self, folder: Path, name: str) -> None:
        self.config = parse_config(settings(name, STATISTICS))
        self.requirements, plain = inputs(name in DYNAMIC)
        self.events = two_valued(plain)
        self.log, self.releases = replay(folder, self.config, self.requirements, self.events)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Shared]:
    return {name: Shared(tmp_path_factory.mktemp(name), name) for name in REGISTRY.names()}


# ------------------------------------------------------------------ the independent check


def user_spends(log: list[Record], slots: int = SLOTS) -> dict[str, dict[int, Fraction]]:
    """Each user's spend per slot, summed over every statistic, exactly (Fractions of the logged
    floats), from the spend log alone: a user's spend at a slot is the spend line of the ledger its
    latest member line (of that statistic) puts it in, forks stitched onto their parents."""
    lines: dict[tuple[Any, str], dict[int, Fraction]] = defaultdict(dict)
    parents: dict[tuple[Any, str], tuple[str | None, int]] = {}
    joins: dict[tuple[Any, str], list[tuple[int, str]]] = defaultdict(list)
    for rec in log:
        statistic = rec.get("statistic")
        if rec["record"] == "spend":
            lines[(statistic, rec["ledger"])][rec["slot"]] = Fraction(rec["spend1"]) + Fraction(rec["spend2"])
        elif rec["record"] == "ledger":
            parents[(statistic, rec["ledger"])] = (rec["parent"], rec["since"])
        elif rec["record"] == "member":
            joins[(statistic, rec["user"])].append((rec["since"], rec["ledger"]))
    out: dict[str, dict[int, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for (statistic, user), members in joins.items():
        members.sort()
        for i, (since, ledger) in enumerate(members):
            end = members[i + 1][0] - 1 if i + 1 < len(members) else slots
            for slot in range(since, end + 1):
                out[user][slot] += lines[(statistic, ledger)].get(slot, Fraction(0))
    return out


def slot_of_test_time(rec: Record) -> int:
    """The slot of a record of these tests: epoch ms from origin 0, 1-second slots."""
    return int(rec["time"]) // 1000 + 1


def declared(requirements: list[Record], slot_of: Callable[[Record], int]) -> dict[str, list[tuple[int, Record]]]:
    """Each user's requirement records by slot, in time order, then input order (a fixed mechanism
    keeps the first)."""
    out: dict[str, list[tuple[int, Record]]] = defaultdict(list)
    for rec in sorted(requirements, key=slot_of):
        out[rec["user"]].append((slot_of(rec), rec))
    return out


def within(total: Fraction, bound: float) -> bool:
    return total <= Fraction(bound) * (1 + Fraction(RELATIVE_TOLERANCE))


def window_breaches(log: list[Record], requirements: list[Record], dynamic: bool, slots: int = SLOTS,
                    slot_of: Callable[[Record], int] = slot_of_test_time) -> list[str]:
    """Every window of every user, summed over all statistics, that spends more than the user declared
    (through slot `slots`; `slot_of`: a requirement record's slot)."""
    spends = user_spends(log, slots)
    breaches = []
    for user, records in declared(requirements, slot_of).items():
        spent = spends.get(user, {})

        def window(first: int, last: int, spent: dict[int, Fraction] = spent) -> Fraction:
            return sum((spent.get(slot, Fraction(0)) for slot in range(first, last + 1)), Fraction(0))

        if not dynamic:
            w, epsilon = records[0][1]["w"], records[0][1]["epsilon"]
            breaches += [f"{user} {t - w + 1}..{t}" for t in range(1, slots + 1) if not within(window(t - w + 1, t),
                                                                                                epsilon)]
            continue
        in_force = {}
        for slot, rec in records:
            in_force[slot] = rec
        current = None
        for t in range(records[0][0], slots + 1):
            current = in_force.get(t, current)
            assert current is not None
            back, forward = current["backward"], current["forward"]
            # an infeasible EB is projected to what its window had spent: the slot itself spends 0 then
            prior = window(t - back["w"] + 1, t - 1)
            if not within(window(t - back["w"] + 1, t), max(back["epsilon"], float(prior))) or (
                    not within(prior, back["epsilon"]) and spent.get(t, 0) > 0):
                breaches.append(f"{user} backward at {t}")
            if not within(window(t, t + forward["w"] - 1), forward["epsilon"]):
                breaches.append(f"{user} forward from {t}")
    return breaches


# ------------------------------------------------------------------------------ the tests


@pytest.mark.parametrize("name", REGISTRY.names())
def test_two_statistics_pass_the_audit_and_the_independent_check(shared: dict[str, Shared], name: str) -> None:
    run = shared[name]
    report = audit(run.config, run.requirements, run.log, run.releases)
    assert report.ok, report.render()
    assert window_breaches(run.log, run.requirements, name in DYNAMIC) == []
    by_statistic = defaultdict(list)
    for release in run.releases:
        by_statistic[release["statistic"]].append(release)
    assert {s: [r["slot"] for r in rs] for s, rs in by_statistic.items()} == {
        "cells": list(range(1, SLOTS + 1)), "screen": list(range(1, SLOTS + 1))}
    assert by_statistic["screen"][0]["domain"] == {"type": "categories", "values": SCREENS}
    assert all(len(r["counts"]) == 4 for r in by_statistic["cells"])
    # every line of a statistic names it; the budget in view, one record per slot, is about both and names none
    assert {rec.get("statistic") for rec in run.log if rec["record"] != "utilisation"} == {"cells", "screen"}
    views = [rec for rec in run.log if rec["record"] == "utilisation"]
    assert [rec["slot"] for rec in views] == list(range(1, SLOTS + 1)) and all("statistic" not in rec for rec in views)
    assert report.windows_checked > 0
    for kind, records in (("spend", run.log), ("release", run.releases)):
        validator = Draft202012Validator(json.loads((ROOT / "docs" / "schemas" / f"{kind}.schema.json").read_text()))
        for record in records:
            validator.validate(record)


def test_the_shares_reach_the_ledgers(shared: dict[str, Shared]) -> None:
    run = shared["PBD"]
    requirement = {rec["requirement"]["w"]: rec["requirement"]["epsilon"] for rec in run.log
                   if rec["record"] == "ledger" and rec["statistic"] == "cells"}
    assert requirement == {4: 1.0 * 0.4, 6: 2.0 * 0.4, 8: 3.0 * 0.4, 5: 2.5 * 0.4}


def test_the_total_check_is_not_vacuous(shared: dict[str, Shared]) -> None:
    """The users' windows really come close to E: the budget split is spent, not left over."""
    run = shared["PBD"]
    spends = user_spends(run.log)
    fullest = max(sum(spends["u0"].get(t - k, Fraction(0)) for k in range(4)) for t in range(4, SLOTS + 1))
    assert float(fullest) > 0.5 * 1.0  # u0 runs at (w, E) = (4, 1.0)


@pytest.mark.parametrize("name", ["PBD", "DPBA", "Adaptive"])
def test_a_statistic_charged_at_the_whole_budget_fails_the_audit(
        shared: dict[str, Shared], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The mutation: statistic `screen` charged as if it were alone (share 1), `cells` at its share."""
    from pwevent.jobs.common import config as config_module

    run = shared[name]
    genuine = config_module.Config.statistics.fget  # type: ignore[attr-defined]

    def whole_for_screen(self: Config) -> tuple[Any, ...]:
        return tuple(s if s.name != "screen" else config_module.Statistic(s.name, s.domain, s.events, 1.0)
                     for s in genuine(self))

    monkeypatch.setattr(config_module.Config, "statistics", property(whole_for_screen))
    log, releases = replay(tmp_path, run.config, run.requirements, run.events)
    monkeypatch.undo()
    report = audit(run.config, run.requirements, log, releases)
    assert not report.ok
    assert {rule for rule in report.rules() if rule.startswith("user_total_")}, report.render()
    assert window_breaches(log, run.requirements, name in DYNAMIC) != []


@pytest.mark.parametrize("name", ["PBD", "DPBD", "Adaptive"])
def test_two_separate_runs_at_the_whole_budget_fail_where_the_shared_one_passes(
        shared: dict[str, Shared], tmp_path: Path, name: str) -> None:
    """What a team runs today: one job per statistic, each at the whole budget. Their spends, put
    together under the statistics' names, fail the audit of the shared configuration; the shared
    run of the same inputs passes it (test above)."""
    run = shared[name]
    log: list[Record] = []
    releases: list[Record] = []
    for statistic in STATISTICS:
        alone = parse_config(settings(name, None, domain=statistic["domain"],
                                      events={"value": statistic["value"]}))
        folder = tmp_path / str(statistic["name"])
        folder.mkdir()
        own_log, own_releases = replay(folder, alone, run.requirements, run.events)
        log += [{"record": rec["record"], "statistic": statistic["name"], **rec} for rec in own_log
                if rec["record"] != "utilisation"]  # each job's own budget in view, not the shared one
        releases += [{**rec, "statistic": statistic["name"]} for rec in own_releases]
    report = audit(run.config, run.requirements, log, releases)
    assert not report.ok
    totals = {rule for rule in report.rules() if rule.startswith("user_total_")}
    assert totals == (TOTAL_RULES - {"user_total_fixed_window"} if name in DYNAMIC else {"user_total_fixed_window"})
    assert window_breaches(log, run.requirements, name in DYNAMIC) != []


def test_two_separate_runs_at_half_the_budget_pass(shared: dict[str, Shared], tmp_path: Path) -> None:
    """Today's only safe way, two jobs at half the budget each, is one the shared audit accepts when
    its configuration says so (shares 0.5 and 0.5): the same ledgers, the same spends."""
    run = shared["PBD"]
    half = [{**s, "share": 0.5} for s in STATISTICS]
    config = parse_config(settings("PBD", half))
    log: list[Record] = []
    releases: list[Record] = []
    halved = [{**r, "epsilon": r["epsilon"] / 2} for r in run.requirements]
    for statistic in half:
        alone = parse_config(settings("PBD", None, domain=statistic["domain"], events={"value": statistic["value"]}))
        folder = tmp_path / str(statistic["name"])
        folder.mkdir()
        own_log, own_releases = replay(folder, alone, halved, run.events)
        log += [{"record": rec["record"], "statistic": statistic["name"], **rec} for rec in own_log
                if rec["record"] != "utilisation"]  # each job's own budget in view, at half the requirement
        releases += [{**rec, "statistic": statistic["name"]} for rec in own_releases]
    assert audit(config, run.requirements, log, releases).ok


def test_tampered_statistic_names_fail_the_audit(shared: dict[str, Shared]) -> None:
    run = shared["PBD"]
    renamed = [{**rec, "statistic": "other"} if rec.get("slot") == 7 and rec.get("statistic") == "screen" else rec
               for rec in run.log]
    assert "unknown_statistic" in audit(run.config, run.requirements, renamed, run.releases).rules()
    unnamed = [{k: v for k, v in rec.items() if k != "statistic"} if rec["slot"] == 3 else rec for rec in run.releases]
    assert "unknown_statistic" in audit(run.config, run.requirements, run.log, unnamed).rules()
    one = [rec for rec in run.releases if rec["statistic"] == "cells"]
    assert "unknown_statistic" in audit(run.config, run.requirements, run.log, one).rules()
    dropped = [rec for rec in run.log if not (rec.get("statistic") == "screen" and rec.get("slot") == 9)]
    assert "gap" in audit(run.config, run.requirements, dropped, run.releases).rules()


def test_one_statistic_writes_no_name(tmp_path: Path) -> None:
    requirements, plain = inputs(False)
    config = parse_config(settings("PBD", None, domain={"type": "binary"}))
    log, releases = replay(tmp_path, config, requirements, plain)
    assert all("statistic" not in rec for rec in log + releases)
    assert audit(config, requirements, log, releases).ok


def test_an_event_outside_one_statistics_domain_is_rejected_naming_it(tmp_path: Path) -> None:
    config = parse_config(settings("PBD", STATISTICS))
    requirements = [{"user": "a", "time": 5, "w": 4, "epsilon": 1.0}]
    events = [{"user": "a", "time": 500, "payload": {"cell": 1}, "screen": "settings"},
              {"user": "a", "time": 1500, "screen": "map"},
              {"user": "a", "time": 2500, "payload": {"cell": 2}, "screen": "map"}]
    log, releases = replay(tmp_path, config, requirements, events)
    rejects = [json.loads(line) for line in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert [(r["reason"], r["detail"].split(":")[0]) for r in rejects] == [
        ("out_of_domain", "statistic screen"), ("missing_field", "statistic cells")]
    truth = {(r["statistic"], r["slot"]): r for r in releases}
    assert truth[("cells", 3)]["population"] == 1


@pytest.mark.parametrize(("change", "message"), [
    ({"statistics": [{**STATISTICS[0], "share": 0.5}, {**STATISTICS[1], "share": 0.6}]},
     r"^statistics\[1\]\.share: the shares add up to 1\.1"),
    ({"statistics": [STATISTICS[0], {**STATISTICS[1], "name": "cells"}]}, r"^statistics\[1\]\.name: 'cells'"),
    ({"statistics": [STATISTICS[0], {k: v for k, v in STATISTICS[1].items() if k != "share"}]},
     r"^statistics\[1\]\.share: give every statistic a share, or none"),
    ({"statistics": STATISTICS, "domain": {"type": "binary"}}, r"^domain: with statistics"),
    ({"statistics": STATISTICS, "events": {"value": "v"}}, r"^events\.value: with statistics"),
    ({"statistics": [{k: v for k, v in STATISTICS[0].items() if k != "value"}]}, r"^statistics\[0\]: give value"),
    ({"statistics": [{**STATISTICS[0], "share": 0}]}, r"^statistics\[0\]\.share: Input should be greater than 0"),
    ({"statistics": [{**STATISTICS[0], "name": "a b"}]}, r"^statistics\[0\]\.name: String should match"),
    ({"statistics": [{**STATISTICS[0], "value": "user.id"}]}, r"^statistics\[0\]\.value \('user\.id'\) lies inside"),
    ({"statistics": []}, r"^statistics: a list of at least one statistic"),
    ({"statistics": {"name": "cells"}}, r"^statistics: a list of at least one statistic"),
])
def test_configuration_errors_name_the_key(change: dict[str, Any], message: str) -> None:
    raw = {**settings("PBD"), **change}
    raw.setdefault("domain", None) if "statistics" not in change else None
    with pytest.raises(ConfigError, match=message):
        parse_config({k: v for k, v in raw.items() if v is not None})


def test_equal_shares_without_any(tmp_path: Path) -> None:
    three = [{k: v for k, v in s.items() if k != "share"} for s in STATISTICS]
    three.append({"name": "binary", "domain": {"type": "binary"}, "value": "flag"})
    config = parse_config(settings("PBD", three))
    assert [s.share for s in config.statistics] == [1 / 3] * 3


def test_the_cli_replays_and_audits_two_statistics(shared: dict[str, Shared], tmp_path: Path) -> None:
    import yaml

    run = shared["Adaptive"]
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(settings("Adaptive", STATISTICS)))
    (tmp_path / "req.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run.requirements))
    (tmp_path / "ev.jsonl").write_text("".join(json.dumps(e) + "\n" for e in run.events))
    files = {name: str(tmp_path / f"{name}.jsonl") for name in ("rel", "spend", "truth")}
    assert main(["replay", "--config", str(tmp_path / "c.yaml"), "--events", str(tmp_path / "ev.jsonl"),
                 "--requirements", str(tmp_path / "req.jsonl"), "--releases-out", files["rel"],
                 "--spend-log", files["spend"], "--truth-out", files["truth"], "--through", str(SLOTS),
                 "--seed", "1"]) == 0
    truth = [json.loads(line) for line in Path(files["truth"]).read_text().splitlines()]
    assert [(t["slot"], t["statistic"]) for t in truth[:2]] == [(1, "cells"), (1, "screen")]
    assert main(["audit", "--spend-log", files["spend"], "--requirements", str(tmp_path / "req.jsonl"),
                 "--releases", files["rel"], "--config", str(tmp_path / "c.yaml")]) == 0


@pytest.mark.parametrize("extra", [[], ["--print-submit"]])
def test_the_streaming_job_refuses_to_resume_several_statistics(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 extra: list[str]) -> None:
    import yaml

    (tmp_path / "c.yaml").write_text(yaml.safe_dump(settings("PBD", STATISTICS, noise="opendp",
                                                             kafka={"bootstrap": "127.0.0.1:1"})))
    assert main(["run", "--config", str(tmp_path / "c.yaml"), "--resume-after-last-release", *extra]) == 2
    assert "kafka.resume_after_last_release: a job with several statistics" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["PBD", "DPBA", "Adaptive", "BA"])
def test_the_job_population_equals_the_replay(shared: dict[str, Shared], name: str) -> None:
    """The streaming job's Population (`PopulationOperator`, its rows as the JVM hands them: the
    Membership rule's changes and counts per (slot, class, joint cell)) decides both statistics as
    the replay does, release for release and line for line, also when restored from a snapshot
    taken half way."""
    from pwevent.jobs.common.membership import Membership, UserState
    from pwevent.jobs.common.population_operator import PopulationOperator, SlotChanges, SlotCount
    from pwevent.jobs.common.requirement_rules import RequirementRules
    from pwevent.jobs.common.service_metrics import window_utilisation
    from pwevent.jobs.common.statistic_cells import joint_cell, observe
    from pwevent.operators.noise import make_randomness

    run = shared[name]
    config = run.config
    membership = Membership(RequirementRules(config.mechanism_spec(), config.caps.max_w))
    states: dict[str, UserState] = {}
    latest: dict[int, dict[str, int]] = defaultdict(dict)
    for event in sorted(run.events, key=lambda e: e["time"]):
        seen = observe(json.dumps(event), config)
        latest[seen.time_ms // 1000 + 1][seen.user] = joint_cell(seen.cells, config.statistics)
    operator = PopulationOperator(config, make_randomness(config.noise, 3))
    releases, lines, reports, alone = [], [], [], []
    for slot in range(1, SLOTS + 1):
        rows: list[SlotChanges | SlotCount] = []
        for rec in [r for r in run.requirements if r["time"] // 1000 + 1 == slot]:
            requirement = {k: v for k, v in rec.items() if k not in ("user", "time")}
            applied = membership.apply(rec["user"], states.get(rec["user"], UserState()), slot,
                                       parse_requirement(requirement))
            states[rec["user"]] = applied.state
            if applied.change is not None:
                rows.append(SlotChanges(slot, (applied.change,)))
        counts: dict[tuple[str, int], int] = defaultdict(int)
        for user, cell in latest[slot].items():
            if user in states and states[user].class_id is not None:
                counts[(str(states[user].class_id), cell)] += 1
        rows += [SlotCount(slot, cls, cell, n) for (cls, cell), n in counts.items()]
        for row in rows:
            assert operator.on_row(row)[0]
        if slot == SLOTS // 2:
            restored = PopulationOperator(config, make_randomness(config.noise, 99))
            restored.restore(operator.snapshot())
            operator = restored
        closed = operator.on_slot_end(slot, rows, ended=False)
        releases += [record for _, record in closed.emitted.releases]
        lines += closed.emitted.audit
        reports += closed.emitted.reports
        alone += [window_utilisation(operator.budget.engines[0].population.live(), slot)]
    assert releases == run.releases
    assert sorted(map(str, lines)) == sorted(map(str, run.log))
    # the budget metric adds each class's spend up over both statistics, against its whole budget
    totals = [max(r.utilisation.values()) for r in reports[::2]]
    assert max(totals) <= 1 + 1e-9 and max(totals) > max(max(a.values()) for a in alone)


def test_tail_asks_which_statistic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    (tmp_path / "c.yaml").write_text(yaml.safe_dump(settings("PBD", STATISTICS, kafka={"bootstrap": "127.0.0.1:1"})))
    assert main(["tail", "--config", str(tmp_path / "c.yaml")]) == 2
    assert "several statistics, each with its release topic; name one with --statistic (cells, screen)" in \
        capsys.readouterr().err
    assert main(["tail", "--config", str(tmp_path / "c.yaml"), "--statistic", "other"]) == 2
    assert "--statistic other: not a statistic" in capsys.readouterr().err


def test_a_redrawn_slot_is_found_per_release_topic() -> None:
    """Two statistics' topics hold a record of slot 1 each, with other bytes: not a redraw; a second,
    different record of slot 1 on one topic is."""
    from pwevent.jobs.offline.release_topic import redrawn
    from pwevent.jobs.streaming.kafka_io import Message

    cells, screen = (Message(f"r.{name}", 0, 0, b"1", f'{{"statistic": "{name}"}}'.encode(), 0)
                     for name in ("cells", "screen"))
    assert redrawn([cells, screen]) == []
    again = Message("r.screen", 0, 1, b"1", b'{"statistic": "screen", "other": 1}', 0)
    [finding] = redrawn([cells, screen, again])
    assert finding.slot == 1 and finding.detail.startswith("topic r.screen: 2 different records")
