"""Topics as they are, in the replay and the audit: value mappings (category aliases, a case rule, an
`other` cell, numeric ranges), requirement fields at configured paths, preferences declared before the
origin, and no silent success (an input none of whose records was usable is exit 6)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.cli.main import EXIT_UNUSABLE, main
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import parse_event, parse_requirement_update
from pwevent.jobs.offline.audit import audit_file
from pwevent.jobs.offline.replay import run_replay
from pwevent.operators.domain import OutOfDomainError, RangesDomain

ORIGIN = 1_704_067_200_000
SLOT = 60_000
DAY = 86_400_000
BASE: dict[str, Any] = {"mechanism": "PBD", "slot": "60s", "origin": ORIGIN, "caps": {"max_w": 200}}
CATEGORIES = {"type": "categories", "values": ["web", "app"], "aliases": {"iOS": "app", "Android": "app"},
              "case": "fold", "other": "other"}
RANGES = {"type": "ranges", "edges": [0, 18, 65], "other": "unknown"}


def at(slot: int, ms: int = 0) -> int:
    return ORIGIN + (slot - 1) * SLOT + ms


def write(path: Path, records: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def replay(tmp_path: Path, config: Any, events: list[dict[str, Any]], requirements: list[dict[str, Any]],
           through: int) -> dict[str, Any]:
    outs = {k: tmp_path / f"{k}.jsonl" for k in ("releases", "spend", "truth", "rejects")}
    ev = write(tmp_path / "events.jsonl", events)
    req = write(tmp_path / "requirements.jsonl", requirements)
    summary = run_replay(config, ev, req, str(outs["releases"]), str(outs["spend"]), str(outs["truth"]),
                         str(outs["rejects"]), through=through)
    read = {k: [json.loads(line) for line in p.read_text().splitlines()] for k, p in outs.items()}
    report = audit_file(str(outs["spend"]), req, str(outs["releases"]), config)
    return {"summary": summary, "audit": report, **read}


# -- value mapping ------------------------------------------------------------------------------------


def test_aliases_a_case_rule_and_the_other_cell_put_every_spelling_in_its_cell(tmp_path: Path) -> None:
    config = parse_config({**BASE, "domain": CATEGORIES})
    values = ["web", "Web", "WEB", "iOS", "ios", "ANDROID", "app", "fax", "Straße"]
    events = [{"user": f"u{n}", "time": at(1, n), "value": v} for n, v in enumerate(values)]
    events.append({"user": "u9", "time": at(1, 9), "value": 3})  # not a string: out of the domain, not `other`
    requirements = [{"user": f"u{n}", "time": at(1), "w": 10, "epsilon": 1.0} for n in range(10)]
    out = replay(tmp_path, config, events, requirements, 1)
    assert out["truth"][0]["counts"] == [3, 4, 2]
    assert [r["reason"] for r in out["rejects"]] == ["out_of_domain"]
    assert out["releases"][0]["domain"] == {"type": "categories", "values": ["web", "app", "other"],
                                            "aliases": {"iOS": "app", "Android": "app"}, "case": "fold",
                                            "other": "other"}
    assert out["audit"].ok, out["audit"].render()


def test_without_other_an_unlisted_category_is_out_of_the_domain_and_exact_case_is_the_default() -> None:
    config = parse_config({**BASE, "domain": {"type": "categories", "values": ["web"], "aliases": {"www": "web"}}})
    assert config.domain.cell("www") == 0 and config.domain.d == 1
    for value in ("Web", "WWW", "fax"):
        with pytest.raises(Rejected) as err:
            parse_event(json.dumps({"user": "u", "time": at(1), "value": value}), config.events, config.domain)
        assert err.value.reason is Reason.OUT_OF_DOMAIN and "domain.aliases" in err.value.detail
    assert config.domain.describe() == {"type": "categories", "values": ["web"], "aliases": {"www": "web"}}


def test_numeric_ranges_are_half_open_cells_with_an_optional_other_cell(tmp_path: Path) -> None:
    config = parse_config({**BASE, "domain": RANGES})
    values: list[Any] = [0, 17.999, 18, 64.5, 65, -1, 1e6, 30]
    events = [{"user": f"u{n}", "time": at(1, n), "value": v} for n, v in enumerate(values)]
    events += [{"user": "u8", "time": at(1, 8), "value": "30"}, {"user": "u9", "time": at(1, 9), "value": True}]
    requirements = [{"user": f"u{n}", "time": at(1), "w": 10, "epsilon": 1.0} for n in range(10)]
    out = replay(tmp_path, config, events, requirements, 1)
    assert out["truth"][0]["counts"] == [2, 3, 3]
    assert sorted(r["reason"] for r in out["rejects"]) == ["out_of_domain", "out_of_domain"]
    assert out["releases"][0]["domain"] == {"type": "ranges", "edges": [0.0, 18.0, 65.0], "other": "unknown"}
    assert out["audit"].ok, out["audit"].render()
    closed = RangesDomain((0.0, 18.0))
    assert closed.d == 1 and closed.cell(0) == 0
    for outside in (18, -0.5, float("nan"), float("inf")):
        with pytest.raises(OutOfDomainError):
            closed.cell(outside)


@pytest.mark.parametrize(("domain", "message"), [
    ({"type": "categories", "values": ["a"], "aliases": {"b": "c"}}, "domain.aliases: 'b' maps to 'c'"),
    ({"type": "categories", "values": ["a", "b"], "aliases": {"b": "a"}}, "domain.aliases: 'b' is already"),
    ({"type": "categories", "values": ["a", "A"], "case": "fold"}, "domain.values: 'a' and 'A' are the same"),
    ({"type": "categories", "values": ["a"], "other": "a"}, "domain.values must be a non-empty list of distinct"),
    ({"type": "categories", "values": ["a"], "case": "upper"}, "domain.case: Input should be 'exact' or 'fold'"),
    ({"type": "ranges", "edges": [1, 1]}, "domain.edges must be strictly increasing"),
    ({"type": "ranges", "edges": [1]}, "domain.edges: List should have at least 2 items"),
    ({"type": "ranges", "edges": [0, ".inf"]}, "domain.edges[1]: Input should be a valid number"),
])
def test_a_bad_value_mapping_is_a_configuration_error_naming_the_key(domain: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({**BASE, "domain": domain})
    assert str(err.value).startswith(message), str(err.value)


# -- requirement fields by path -----------------------------------------------------------------------

MAPPED = {"user": "subject.id", "time": "issued_at", "w": "pref.window", "epsilon": "pref.budget",
          "backward": {"w": "pref.back.w", "epsilon": "pref.back.eps"},
          "forward": {"w": "fwd_w", "epsilon": "fwd_eps"}}


def test_every_requirement_field_is_read_at_its_path_with_the_same_rules() -> None:
    fixed = parse_config({**BASE, "domain": {"type": "binary"}, "requirements": MAPPED})
    dynamic = parse_config({**BASE, "mechanism": "DPBD", "domain": {"type": "binary"}, "requirements": MAPPED})

    def parse(config: Any, record: dict[str, Any]) -> Any:
        return parse_requirement_update(json.dumps(record), config.requirements, config.caps).requirement

    head = {"subject": {"id": "u1"}, "issued_at": at(1)}
    assert parse(fixed, {**head, "pref": {"window": 10, "budget": 1.5}}).to_json() == {"w": 10, "epsilon": 1.5}
    both = {**head, "pref": {"back": {"w": 1, "eps": 10}}, "fwd_w": 8, "fwd_eps": 0.8}
    assert parse(dynamic, both).to_json() == {"backward": {"w": 1, "epsilon": 10.0},
                                              "forward": {"w": 8, "epsilon": 0.8}}
    bad = [({**head, "pref": {"window": 10}}, Reason.INVALID_REQUIREMENT, "requirement lacks pref.budget"),
           ({**head, "pref": {"window": 0, "budget": 1}}, Reason.INVALID_REQUIREMENT, "w must be >= 1"),
           ({**head, "pref": {"window": 10, "budget": 1e9}}, Reason.INVALID_REQUIREMENT, "over the configured cap"),
           ({**head, "pref": [10]}, Reason.MISTYPED_FIELD, "'pref' is an array"),
           ({**head, "pref": None}, Reason.MISSING_FIELD, "'pref' is null"),
           ({**head, "fwd_w": 8, "pref": {"window": 10, "budget": 1}}, Reason.INVALID_REQUIREMENT,
            "backward lacks pref.back.w, pref.back.eps"),
           ({"subject": {"id": "u1"}, "w": 10, "epsilon": 1.0, "issued_at": at(1)}, Reason.INVALID_REQUIREMENT,
            "requirement lacks pref.window, pref.budget")]
    for record, reason, detail in bad:
        with pytest.raises(Rejected) as err:
            parse(fixed, record)
        assert (err.value.reason, detail in err.value.detail) == (reason, True), (record, err.value.detail)


@pytest.mark.parametrize(("requirements", "message"), [
    ({"w": "backward.x"}, "requirements.w ('backward.x') lies where a record holds its backward requirement"),
    ({"user": "pref.id", "backward": {"w": "pref.bw", "epsilon": "pref.be"}},
     "requirements.user ('pref.id') lies where a record holds its backward requirement ('pref')"),
    ({"time": "forward.t"}, "requirements.time ('forward.t') lies where a record holds its forward requirement"),
    ({"epsilon": "p", "w": "p.w"}, "requirements.w ('p.w') lies inside requirements.epsilon ('p')"),
    ({"w": "$key"}, "requirements.w: '$key' is not a path into the value"),
    ({"forward": {"w": "$headers.w", "epsilon": "forward.epsilon"}},
     "requirements.forward.w: '$headers.w' is not a path into the value"),
])
def test_requirement_paths_that_would_read_every_record_wrong_are_configuration_errors(
        requirements: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({**BASE, "domain": {"type": "binary"}, "requirements": requirements})
    assert message in str(err.value), str(err.value)


# -- old preferences ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["PBD", "DPBD", "Adaptive"])
def test_a_preference_declared_before_the_origin_counts_from_slot_1_the_latest_one_per_user(
        tmp_path: Path, name: str) -> None:
    """Fifty users declared 200 days before the origin: every one of their events counts from slot 1
    (before: 300 `unknown_user` rejects, 0 counted). A user who declared twice before the origin runs
    at the later one, the earlier is `superseded_before_origin`; one who declared once before and once
    after the origin follows the mechanism's rule from that slot on; events before the origin are still
    `before_origin`. The full audit, fed the same requirement records, passes."""
    dynamic = name == "DPBD"
    config = parse_config({**BASE, "mechanism": name, "domain": RANGES})

    def requirement(w: int, epsilon: float) -> dict[str, Any]:
        if dynamic:
            return {"backward": {"w": 1, "epsilon": 10.0}, "forward": {"w": w, "epsilon": epsilon}}
        return {"w": w, "epsilon": epsilon}

    requirements = [{"user": f"u{n}", "time": ORIGIN - 200 * DAY + n, **requirement(10, 1.0)} for n in range(50)]
    requirements.append({"user": "u0", "time": ORIGIN - 100 * DAY, **requirement(20, 2.0)})  # later: in force
    requirements.append({"user": "u1", "time": at(4), **requirement(30, 3.0)})  # after the origin: the rule's
    events = [{"user": f"u{n}", "time": at(slot, n), "value": (n * slot) % 80}
              for slot in range(1, 7) for n in range(50)]
    events.append({"user": "u2", "time": ORIGIN - 1, "value": 5})
    out = replay(tmp_path, config, events, requirements, 6)
    assert all(t["present"] == 50 for t in out["truth"])
    reasons = Counter(r["reason"] for r in out["rejects"])
    after = {} if dynamic else {"requirement_change_under_fixed_mechanism": 1}
    assert reasons == Counter({"superseded_before_origin": 1, "before_origin": 1, **after}), reasons
    superseded = next(r for r in out["rejects"] if r["reason"] == "superseded_before_origin")
    assert json.loads(superseded["original"])["user"] == "u0" and "-200" not in superseded["position"]
    u0 = next(m for m in out["spend"] if m["record"] == "member" and m["user"] == "u0")
    ledger = next(line for line in out["spend"] if line["record"] == "ledger" and line["ledger"] == u0["ledger"])
    assert u0["since"] == 1 and ledger["requirement"] == requirement(20, 2.0) | (
        {"epsilon": 2.0} if not dynamic else {})
    assert out["releases"][0]["population"] == 50
    assert out["audit"].ok, out["audit"].render()


def test_the_audit_checks_the_latest_preference_from_before_the_origin(tmp_path: Path) -> None:
    """The auditor derives the same rule from the requirement records: told that u0's earlier
    preference was the one in force (its later one removed from the input), it finds the ledger runs
    at another requirement."""
    config = parse_config({**BASE, "domain": {"type": "binary"}})
    requirements = [{"user": "u0", "time": ORIGIN - 2 * DAY, "w": 10, "epsilon": 1.0},
                    {"user": "u0", "time": ORIGIN - DAY, "w": 20, "epsilon": 2.0}]
    events = [{"user": "u0", "time": at(slot), "value": 1} for slot in (1, 2, 3)]
    out = replay(tmp_path, config, events, requirements, 3)
    assert out["audit"].ok
    only_first = write(tmp_path / "first.jsonl", requirements[:1])
    report = audit_file(str(tmp_path / "spend.jsonl"), only_first, str(tmp_path / "releases.jsonl"), config)
    assert "requirement_mismatch" in report.rules(), report.render()


# -- no silent success --------------------------------------------------------------------------------


def test_a_replay_none_of_whose_events_counted_exits_6_and_says_so(tmp_path: Path, capsys: Any) -> None:
    """The issue's case: every event of a user without a requirement (`unknown_user`): the releases are
    written, the summary says which input held no usable record, and the exit code is 6; with one user
    registered it is 0. An audit whose requirements input has no valid record is exit 6 as well."""
    config = tmp_path / "c.yaml"
    config.write_text(f"mechanism: PBD\nslot: 60s\norigin: {ORIGIN}\ndomain: {{type: binary}}\n")
    events = write(tmp_path / "e.jsonl", [{"user": f"u{n}", "time": at(1, n), "value": 1} for n in range(3)])
    unusable = write(tmp_path / "r.jsonl", [{"user": "x", "time": at(1), "w": 0, "epsilon": 1.0}])
    args = ["replay", "--config", str(config), "--events", events, "--requirements", unusable, "--through", "1",
            "--releases-out", str(tmp_path / "rel.jsonl"), "--spend-log", str(tmp_path / "s.jsonl"), "--quiet"]
    assert main(args) == EXIT_UNUSABLE
    text = capsys.readouterr().out
    assert "usable: events 0 of 3 records, requirements 0 of 1 records" in text
    assert "NO USABLE RECORD: none of the 3 events records" in text
    assert "NO USABLE RECORD: none of the 1 requirements records" in text
    assert len((tmp_path / "rel.jsonl").read_text().splitlines()) == 1
    audit = ["audit", "--spend-log", str(tmp_path / "s.jsonl"), "--requirements", unusable,
             "--releases", str(tmp_path / "rel.jsonl"), "--config", str(config)]
    assert main(audit) == EXIT_UNUSABLE
    assert "NO USABLE RECORD: requirements: none of the 1 records is a valid requirement record" in \
        capsys.readouterr().out
    usable = write(tmp_path / "r2.jsonl", [{"user": "u1", "time": at(1), "w": 5, "epsilon": 1.0}])
    assert main([*args[:6], usable, *args[7:]]) == 0
    assert main([*audit[:4], usable, *audit[5:]]) == 0
