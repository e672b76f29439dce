"""The auditor finds every kind of violation from the log alone (jobs.audit)."""

from __future__ import annotations

import json

import pytest

from pwevent.jobs.offline.audit import AuditInputError, audit_file, audit_records

FIXED = {"w": 3, "epsilon": 1.0}


def spend(ledger, slot, s1, s2, requirement=None, kind="publish"):
    return {"record": "spend", "ledger": ledger, "slot": slot, "members": 1, "spend1": s1, "spend2": s2,
            "kind": kind, "requirement": requirement or FIXED}



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
