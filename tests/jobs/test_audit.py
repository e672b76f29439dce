"""The auditor finds every kind of violation from the log alone (jobs.audit)."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.config import DEFAULT_MAX_RECORD_BYTES, Config, load_config, parse_config
from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.common.release import RELEASE_SCHEMA_VERSION
from pwevent.jobs.common.requirement_rejections import RefusedRequirement, refused_requirement_letter
from pwevent.jobs.common.slots import iso
from pwevent.jobs.offline import audit
from pwevent.jobs.offline.audit import AuditInputError, AuditInputs, audit_file, audit_records
from pwevent.jobs.offline.replay import run_replay
from pwevent.operators.family import FAMILIES
from pwevent.operators.noise import NumpyRandomness, SecureRandomness, discrete_laplace_variance
from pwevent.operators.obs import MIN_KEPT_SHARE, optimal_budget
from pwevent.operators.postprocess import MEAN_CELL_SINCE, PublicRelease
from pwevent.operators.registry import REGISTRY

FIXED = {"w": 3, "epsilon": 1.0}


def spend(ledger, slot, s1, s2, requirement=None, kind="publish"):
    return {"record": "spend", "ledger": ledger, "slot": slot, "members": 1, "spend1": s1, "spend2": s2,
            "kind": kind, "requirement": requirement or FIXED, "noise": NumpyRandomness(0).label}



def test_fixed_window_violation_and_its_report():
    log = [spend("a", t, 0.1, 0.3) for t in range(1, 5)]
    report = audit_records(log + [{"record": "member", "user": "alice", "ledger": "a", "since": 1}])
    assert not report.ok
    assert [v.slot for v in report.violations] == [3, 4]
    assert "alice" in report.render()


def test_exactly_at_the_bound_passes():
    log = [spend("a", t, 0.1, 0.2333333333333333 if t % 3 else 0.2333333333333334) for t in range(1, 10)]
    assert audit_records(log).ok


def test_gaps_count_as_zero():
    assert audit_records([spend("a", 1, 0.5, 0.5, FIXED), spend("a", 4, 0.5, 0.5, FIXED)]).ok


def test_backward_projection_allows_only_zero_spend():
    tight = {"backward": {"w": 3, "epsilon": 0.2}, "forward": {"w": 1, "epsilon": 9.0}}
    loose = {"backward": {"w": 3, "epsilon": 5.0}, "forward": {"w": 1, "epsilon": 9.0}}
    ok = [spend("a", 1, 0.3, 0.3, loose), spend("a", 2, 0.0, 0.0, tight, "skip")]
    assert audit_records(ok).ok
    bad = [spend("a", 1, 0.3, 0.3, loose), spend("a", 2, 0.01, 0.0, tight, "skip")]
    assert [v.rule for v in audit_records(bad).violations] == ["ledger_backward_window"]


def test_forward_window_from_an_earlier_declaration_binds():
    first = {"backward": {"w": 1, "epsilon": 9.0}, "forward": {"w": 3, "epsilon": 1.0}}
    later = {"backward": {"w": 1, "epsilon": 9.0}, "forward": {"w": 1, "epsilon": 9.0}}
    log = [spend("a", 1, 0.2, 0.5, first), spend("a", 2, 0.2, 0.5, later)]
    report = audit_records(log)
    assert [v.rule for v in report.violations] == ["ledger_forward_window"]


def test_forked_ledger_inherits_parent_history():
    req = {"w": 4, "epsilon": 1.0}
    log = [
        {"record": "ledger", "ledger": "0", "parent": None, "since": 1, "requirement": req},
        spend("0", 1, 0.0, 0.6, req),
        {"record": "ledger", "ledger": "1", "parent": "0", "since": 2, "requirement": req},
        spend("1", 2, 0.0, 0.6, req),
    ]
    assert [v.ledger for v in audit_records(log).violations] == ["1"]


def test_line_level_rules():
    log = [
        spend("a", 1, 0.0, 0.1, FIXED, "skip"),
        spend("b", 1, 0.1, 0.0, FIXED, "nullify"),
        spend("c", 1, -0.1, 0.0, FIXED),
        spend("d", 1, 0.1, 0.0, FIXED),
        spend("d", 1, 0.1, 0.0, FIXED),
    ]
    rules = sorted(v.rule for v in audit_records(log).violations)
    assert rules == ["bad_spend", "duplicate_line", "nullify_spent", "skip_spent"]


def test_audit_file_reports_bad_json(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps(spend("a", 1, 0.1, 0.1, FIXED)) + "\n{oops\n")
    with pytest.raises(AuditInputError, match="log.jsonl:2"):
        audit_file(str(path))


# ------------------------------------------------------------------------------- the full audit

CONFIG = parse_config({"mechanism": "DPBD", "slot": "1s", "origin": 0, "domain": {"type": "binary"},
                       "caps": {"max_w": 10}, "noise": "numpy-fast"})  # the seeded label: a test run
LOOSE = {"backward": {"w": 2, "epsilon": 2.0}, "forward": {"w": 2, "epsilon": 2.0}}
TIGHT = {"backward": {"w": 2, "epsilon": 0.5}, "forward": {"w": 2, "epsilon": 0.5}}


def declared(user, slot, requirement):
    return json.dumps({"user": user, "time": (slot - 1) * 1000, **requirement})


def releases_for(log: list[dict[str, Any]], slots: int, config: Config, kinds: dict[int, str] | None = None):
    """The releases the engine would write for a hand-made log: publications (or `kinds`) whose epsilons
    and thresholds come from operators.obs (the auditor's own OBS must agree), with dissimilarities that
    clear the threshold, fresh counts and the seeded noise label, as records of version 1 (no
    schema_version, domain or interval); with the configuration's post-processing, its `smoothed`."""
    counts, out = [0] * config.domain.d, []
    smoother = config.smoother()
    for t in range(1, slots + 1):
        lines = [r for r in log if r.get("record", "spend") == "spend" and r["slot"] == t]
        members = np.array([r["members"] for r in lines], dtype=float)
        calculation, publication = (
            optimal_budget(np.array([r[key] for r in lines], dtype=float), members, discrete_laplace_variance)
            if lines else None for key in ("spend1", "spend2"))
        kind = (kinds or {}).get(t, "publish")
        counts = [t + j for j in range(config.domain.d)] if kind == "publish" else counts
        threshold = math.sqrt(publication.error) if publication else None
        out.append({"slot": t, "start": iso(config.clock.start_ms(t)), "end": iso(config.clock.end_ms(t)),
                    "mechanism": config.mechanism, "kind": kind, "counts": counts, "population": int(members.sum()),
                    "epsilon_calculation": calculation.epsilon if calculation else None,
                    "epsilon_publication": publication.epsilon if publication else None, "threshold": threshold,
                    "dissimilarity": (threshold or 0.0) + 1.0 if calculation else None,
                    "noise": NumpyRandomness(0).label})
        if smoother is not None:
            out[-1]["smoothed"] = [round(float(x), 3) for x in smoother.step(PublicRelease.from_record(out[-1]))]
    return out


def full(log, requirements, slots=6, config=CONFIG):
    releases = releases_for(log, slots, config)
    lines = [(f"requirements:{n}", text) for n, text in enumerate(requirements, 1)]
    return audit_records(log, AuditInputs.build(lines, releases, config))


def test_opaque_ids_late_joins_and_a_dormant_class_pass():
    """Ids are opaque strings; bob joins the root class of his requirement long after it was created,
    while it is dormant (no members, no lines at 3..4, after alice forked away)."""
    log = [
        {"record": "ledger", "ledger": "r:9f2c", "parent": None, "since": 1, "requirement": LOOSE},
        {"record": "member", "user": "alice", "ledger": "r:9f2c", "since": 1},
        *[spend("r:9f2c", t, 0.1, 0.2, LOOSE) for t in (1, 2)],
        {"record": "ledger", "ledger": "f:77aa", "parent": "r:9f2c", "since": 3, "requirement": TIGHT},
        {"record": "member", "user": "alice", "ledger": "f:77aa", "since": 3},
        *[spend("f:77aa", t, 0.05, 0.1, TIGHT) for t in range(3, 7)],
        {"record": "member", "user": "bob", "ledger": "r:9f2c", "since": 5},
        *[spend("r:9f2c", t, 0.4, 0.5, LOOSE) for t in (5, 6)],
    ]
    requirements = [declared("alice", 1, LOOSE), declared("alice", 3, TIGHT), declared("bob", 5, LOOSE)]
    report = full(log, requirements)
    assert report.ok, report.render()
    assert report.users == 2


def test_user_windows_use_the_declared_requirement_not_the_log():
    """A strict user listed in a loose ledger: the ledger's own windows pass, the user's do not."""
    log = [
        {"record": "ledger", "ledger": "L", "parent": None, "since": 1, "requirement": LOOSE},
        {"record": "member", "user": "strict", "ledger": "L", "since": 1},
        *[spend("L", t, 0.4, 0.5, LOOSE) for t in range(1, 4)],
    ]
    report = full(log, [declared("strict", 1, TIGHT)], slots=3)
    assert audit_records(log).ok
    assert {"requirement_mismatch", "user_backward_window", "user_forward_window"} <= report.rules()


def test_baseline_ledger_must_run_at_the_global_requirement():
    config = parse_config({"mechanism": "BD", "slot": "1s", "origin": 0, "domain": {"type": "binary"},
                           "window": 4, "epsilon": 1.0, "noise": "numpy-fast"})
    own, stricter = {"w": 2, "epsilon": 3.0}, {"w": 5, "epsilon": 1.0}
    log = [
        {"record": "ledger", "ledger": "g", "parent": None, "since": 1, "requirement": {"w": 4, "epsilon": 1.0}},
        {"record": "member", "user": "u", "ledger": "g", "since": 1},
        *[spend("g", t, 0.1, 0.1, {"w": 4, "epsilon": 1.0}) for t in (1, 2)],
    ]
    assert full(log, [declared("u", 1, own)], slots=2, config=config).ok
    log[0] = {**log[0], "requirement": stricter}
    assert full(log, [declared("u", 1, own)], slots=2, config=config).rules() == {"requirement_mismatch"}


def test_the_quick_audit_says_what_it_skipped():
    report = audit_records([spend("a", 1, 0.1, 0.1)])
    assert report.ok and report.skipped and "NOT CHECKED" in report.render()


def test_cli_exit_codes(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("mechanism: DPBD\nslot: 1s\norigin: 0\ndomain: {type: binary}\ncaps: {max_w: 10}\n"
                      "noise: numpy-fast\n")
    log = [{"record": "ledger", "ledger": "L", "parent": None, "since": 1, "requirement": LOOSE},
           {"record": "member", "user": "a", "ledger": "L", "since": 1}, spend("L", 1, 0.1, 0.2, LOOSE)]
    paths = {name: tmp_path / f"{name}.jsonl" for name in ("spend", "req", "rel")}
    paths["spend"].write_text("".join(json.dumps(r) + "\n" for r in log))
    paths["req"].write_text(declared("a", 1, LOOSE) + "\n")
    paths["rel"].write_text(json.dumps(releases_for(log, 1, load_config(str(config)))[0]) + "\n")
    args = ["audit", "--spend-log", str(paths["spend"]), "--requirements", str(paths["req"]),
            "--releases", str(paths["rel"]), "--config", str(config)]
    assert main(args) == 0
    assert "NOT CHECKED" not in capsys.readouterr().out
    assert main(args[:3]) == 0
    assert "NOT CHECKED" in capsys.readouterr().out
    paths["rel"].write_text(json.dumps(releases_for(log, 1, load_config(str(config)), {1: "skip"})[0]) + "\n")
    assert main(args) == 1
    assert "kind_mismatch" in capsys.readouterr().out
    assert main(args[:5]) == 2
    paths["spend"].write_text('{"record": "spend", "ledger": "L"}\n')
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "cannot audit" in err and "spend.jsonl:1" in err and "Traceback" not in err
    assert main(["audit", "--spend-log", str(tmp_path / "missing.jsonl")]) == 2


def _refused_late(text: str, offset: int = 7) -> dict[str, Any]:
    """The dead letter the job writes for a requirement record it read after its slot was decided."""
    return refused_requirement_letter(RefusedRequirement(Reason.LATE, "slot had closed", 0, offset, text.encode()),
                                      "t.requirements")


def _late_run(bob_slot: int = 3):
    """alice registered at slot 1; bob's record (slot `bob_slot`) was refused as late by the job, which
    therefore never placed him in a ledger; alice's record sent twice, the second copy refused as late."""
    log = [
        {"record": "ledger", "ledger": "L", "parent": None, "since": 1, "requirement": LOOSE},
        {"record": "member", "user": "alice", "ledger": "L", "since": 1},
        *[spend("L", t, 0.1, 0.2, LOOSE) for t in range(1, 7)],
    ]
    alice, bob = declared("alice", 1, LOOSE), declared("bob", bob_slot, LOOSE)
    lines = [(f"requirements:{n}", text) for n, text in enumerate([alice, bob, alice], 1)]
    return log, lines, releases_for(log, 6, CONFIG), [_refused_late(bob, 8), _refused_late(alice, 9)]


def test_requirement_records_refused_as_late_declare_nothing_and_are_listed():
    """With the run's dead letters, a record the job refused as late is not a declaration (the job never
    applied it): bob is in no ledger and the audit passes, naming him in a note; one letter takes one
    of alice's two identical records, so she is still registered at slot 1. Without the dead letters
    bob's record is a declaration the job did not honour."""
    log, lines, releases, letters = _late_run()
    assert {v.rule for v in audit_records(log, AuditInputs.build(lines, releases, CONFIG)).violations} == \
        {"missing_member"}
    report = audit_records(log, AuditInputs.build(lines, releases, CONFIG, dead_letters=letters))
    assert report.ok, report.render()
    assert "2 requirement records were refused as late" in report.render() and "alice, bob" in report.render()
    event_letter = {**letters[0], "source": "events"}  # an event's late letter withdraws no declaration
    assert not audit_records(log, AuditInputs.build(lines, releases, CONFIG, dead_letters=[event_letter])).ok


def test_a_late_refusal_must_name_a_decided_slot_and_a_record_of_the_input():
    """A record refused as late whose slot comes after the last release was refused for nothing; a late
    letter of bytes the requirements input does not hold (another run's, or forged) is reported too."""
    log, lines, releases, letters = _late_run(bob_slot=9)
    report = audit_records(log, AuditInputs.build(lines, releases, CONFIG, dead_letters=letters))
    assert [(v.rule, v.slot, v.user) for v in report.violations] == [("late_refusal_of_an_undecided_slot", 9, "bob")]
    log, lines, releases, letters = _late_run()
    stranger = _refused_late(declared("carol", 2, LOOSE))
    report = audit_records(log, AuditInputs.build(lines, releases, CONFIG, dead_letters=[*letters, stranger]))
    assert [v.rule for v in report.violations] == ["late_refusal_unmatched"]


def test_the_cli_reads_the_dead_letters_for_the_full_audit_only(tmp_path, capsys):
    log, lines, releases, letters = _late_run()
    config = tmp_path / "c.yaml"
    config.write_text("mechanism: DPBD\nslot: 1s\norigin: 0\ndomain: {type: binary}\ncaps: {max_w: 10}\n"
                      "noise: numpy-fast\n")
    files = {name: tmp_path / f"{name}.jsonl" for name in ("spend", "req", "rel", "dead")}
    for name, rows in (("spend", log), ("rel", releases), ("dead", letters)):
        files[name].write_text("".join(json.dumps(row) + "\n" for row in rows))
    files["req"].write_text("".join(text + "\n" for _, text in lines))
    args = ["audit", "--spend-log", str(files["spend"]), "--requirements", str(files["req"]),
            "--releases", str(files["rel"]), "--config", str(config)]
    assert main(args) == 1
    assert "missing_member" in capsys.readouterr().out
    assert main([*args, "--dead-letters", str(files["dead"])]) == 0
    assert "refused as late" in capsys.readouterr().out
    assert main([*args[:3], "--dead-letters", str(files["dead"])]) == 2
    assert "pass --requirements, --releases and --config" in capsys.readouterr().err


def test_the_auditor_stays_independent():
    """It imports nothing from the ledgers, the policies or the engine, and its mechanism families
    agree with the policies'."""
    tree = ast.parse(Path(audit.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not {m for m in imported if m and m.endswith(("state.ledger", "operators.policies", "common.engine"))}
    assert not {m for m in imported if m and m.endswith("operators.registry")}
    assert set(audit.BASELINE_MECHANISMS) == {e.name for e in REGISTRY if not e.personalized}
    assert set(audit.DYNAMIC_MECHANISMS) == {e.name for e in REGISTRY if e.dynamic}
    assert set(audit.ADAPTIVE_FAMILIES) == set(FAMILIES) and audit.ADAPTIVE in REGISTRY.names()
    assert audit.NOISE_LABELS == {"opendp": SecureRandomness.label, "numpy-fast": NumpyRandomness().label}
    assert audit.SEEDED_NOISE_LABEL == NumpyRandomness(0).label
    assert audit.RELEASE_SCHEMA_VERSION == RELEASE_SCHEMA_VERSION == audit.READ_VERSIONS[-1] == audit.UPGRADE[1]
    assert audit.MEAN_CELL_SINCE == MEAN_CELL_SINCE <= RELEASE_SCHEMA_VERSION
    assert audit.MIN_KEPT_SHARE == MIN_KEPT_SHARE


def test_the_mean_cell_load_of_any_previous_release():
    """The auditor's L / N (section 14, "The mean cell") agrees with the job's `cell_load`, and a
    previous release of integers too large for a float (any JSON integer) clips instead of crashing."""
    from pwevent.operators.obs import cell_load
    for before, population in (((6, 4), 100), ((0, 0), 100), ((-3, 1), 100), ((150, 90), 100), ((7, 2, 0), 3)):
        assert audit._mean_cell_load(before, float(population)) == pytest.approx(
            cell_load(np.array(before), population), rel=1e-15)
    assert audit._mean_cell_load((10**400, 0), 5.0) == 1.0
    assert audit._mean_cell_load((-(10**400), 0), 5.0) == 0.2


def test_a_rescaled_publication_without_spend_lines_is_not_obs_choice():
    """A version-4 rescaled publication on a slot no spend line backs: no budget to choose from, so
    publication_scale, as for any other publication (nothing is skipped for want of members)."""
    release = audit.Release.of(3, {"kind": "publish", "counts": [5, 5], "population": 0, "epsilon_publication": 0.5,
                                   "threshold": 2.0, "schema_version": 4, "family": "Uniform"})
    found: list[tuple[str, str]] = []
    audit._publication_checks(release, np.array([]), np.array([]), (4, 4), True,
                              lambda rule, detail: found.append((rule, detail)))
    assert [rule for rule, _ in found] == ["publication_scale"]


@pytest.mark.parametrize("broken", [
    {"record": "spend", "ledger": "a", "slot": 0, "members": 1, "spend1": 0.0, "spend2": 0.0, "kind": "skip",
     "requirement": FIXED},
    {"record": "member", "user": "u", "ledger": "a"},
    {"record": "spend", "ledger": "a", "slot": 1, "members": 1, "spend1": 0.0, "spend2": 0.0, "kind": "skip",
     "requirement": {"w": 0, "epsilon": 1.0}},
    {"record": "budget", "ledger": "a"},
    ["not", "an", "object"],
])
def test_corrupt_records_are_input_errors(broken):
    with pytest.raises(AuditInputError, match="record 1"):
        audit_records([broken])


def test_every_rule_is_documented_and_caught_by_the_mutation_suite():
    from tests.jobs.test_audit_mutations import MUTATIONS

    page = (Path(__file__).parents[2] / "docs" / "mechanisms.md").read_text()
    assert [rule for rule in audit.RULES if f"`{rule}`" not in page] == []
    expected = {e if isinstance(e, str) else e(name) for _, e in MUTATIONS.values() for name in REGISTRY.names()}
    from tests.jobs.test_statistics import CAUGHT_HERE

    by_unit_tests = {"skip_spent", "ledger_fixed_window", "ledger_backward_window", "ledger_forward_window",
                     "user_backward_window", "release_redrawn", "late_refusal_of_an_undecided_slot",
                     "late_refusal_unmatched", *CAUGHT_HERE}
    assert set(audit.RULES) - expected - by_unit_tests == set()


@pytest.mark.parametrize("broken", [
    "window: 10\nepsilon: 1e-09\n",  # YAML 1.1 reads 1e-09 as a string
    "requirements: {user: user, time: time, signature: {key_env: PWEVENT_TEST_UNSET_KEY, field: sig}}\n",
])
def test_a_configuration_error_exits_2_with_the_message_replay_gives(tmp_path, capsys, monkeypatch, broken):
    monkeypatch.delenv("PWEVENT_TEST_UNSET_KEY", raising=False)
    mechanism = "Uniform" if "window" in broken else "PBD"
    config = tmp_path / "c.yaml"
    config.write_text(f"mechanism: {mechanism}\nslot: 1s\norigin: 0\ndomain: {{type: binary}}\n{broken}")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["audit", "--spend-log", str(empty), "--requirements", str(empty), "--releases", str(empty),
                 "--config", str(config)]) == 2
    audit_err = capsys.readouterr().err
    assert main(["replay", "--config", str(config), "--events", str(empty), "--requirements", str(empty),
                 "--releases-out", str(tmp_path / "r"), "--spend-log", str(tmp_path / "s"), "--through", "1"]) == 2
    assert audit_err == capsys.readouterr().err
    assert audit_err.startswith("pwevent: configuration error: ") and "Traceback" not in audit_err


def test_a_forged_release_slot_far_past_the_others_is_an_input_error_not_a_huge_report():
    """A release keyed 2^53 among a handful: the auditor refuses the input (exit 2) instead of
    allocating arrays to that slot or reporting billions of missing releases."""
    log = [{"record": "ledger", "ledger": "L", "parent": None, "since": 1, "requirement": LOOSE},
           {"record": "member", "user": "a", "ledger": "L", "since": 1}, spend("L", 1, 0.1, 0.2, LOOSE)]
    releases = releases_for(log, 1, CONFIG) + [{**releases_for(log, 1, CONFIG)[0], "slot": 2**53}]
    lines = [("requirements:1", declared("a", 1, LOOSE))]
    with pytest.raises(AuditInputError, match="this sparse"):
        audit_records(log, AuditInputs.build(lines, releases, CONFIG))


def test_the_audit_parses_the_requirements_with_the_configured_max_record_bytes(tmp_path):
    """A correct run whose configuration allows larger records than the default: a requirement record
    of exactly the configured max_record_bytes and one between the default and it register their users
    in the replay, and the audit, given the configuration, reads them alike (under the default limit
    it would not)."""
    limit = 2 * DEFAULT_MAX_RECORD_BYTES
    settings = {"mechanism": "PBD", "slot": "1s", "origin": 0, "domain": {"type": "binary"}, "noise": "numpy-fast"}
    config = parse_config({**settings, "max_record_bytes": limit})
    requirements = [json.dumps({"user": user, "time": 5, "w": 4, "epsilon": 1.0, "note": ""}) for user in "abc"]
    requirements[0] = requirements[0].replace('"note": ""', '"note": "' + "x" * (limit - len(requirements[0])) + '"')
    requirements[1] = requirements[1].replace('"note": ""', '"note": "' + "y" * DEFAULT_MAX_RECORD_BYTES + '"')
    sizes = [len(text.encode()) for text in requirements]
    assert sizes[0] == limit and DEFAULT_MAX_RECORD_BYTES < sizes[1] < limit
    paths = {name: tmp_path / f"{name}.jsonl" for name in ("req", "ev", "rel", "spend")}
    paths["req"].write_text("".join(text + "\n" for text in requirements))
    paths["ev"].write_text("".join(json.dumps({"user": user, "time": (slot - 1) * 1000 + 500, "value": slot % 2}) + "\n"
                                   for slot in range(1, 11) for user in "abc"))
    summary = run_replay(config, *(str(paths[name]) for name in ("ev", "req", "rel", "spend")), seed=1)
    assert summary.users == 3 and not summary.rejects
    report = audit_file(*(str(paths[name]) for name in ("spend", "req", "rel")), config)
    assert report.ok, report.render()
    under_default = audit_file(*(str(paths[name]) for name in ("spend", "req", "rel")), parse_config(settings))
    assert "unregistered_member" in under_default.rules()
