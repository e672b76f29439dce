"""The restore fingerprint (jobs/common/restore_fingerprint.py): what a restore must not change."""

from __future__ import annotations

import json

import pytest

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.restore_fingerprint import (
    FIELDS,
    JOB_STATE_VERSION,
    RestoreFingerprint,
    RestoreMismatchError,
    StateVersionError,
)

BASE = {"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"},
        "caps": {"max_w": 200}, "noise": "numpy-fast"}


def fingerprint(**changes) -> RestoreFingerprint:
    return RestoreFingerprint.of(parse_config({**BASE, **changes}))


def test_a_json_round_trip_is_equal_and_passes() -> None:
    stored = fingerprint()
    again = RestoreFingerprint.from_json(stored.to_json())
    assert again.differences(stored) == [] and stored.differences(again) == []
    fingerprint().check_restore(again)


@pytest.mark.parametrize(("changes", "field"), [
    ({"mechanism": "PBA"}, "mechanism"),
    ({"origin": "2024-01-02T00:00:00Z"}, "origin_ms"),
    ({"slot": "30s"}, "slot_ms"),
    ({"domain": {"type": "cells", "d": 2}}, "domain"),  # same size, another domain
    ({"domain": {"type": "categories", "values": ["b", "a"]}}, "domain"),
    ({"caps": {"max_w": 201}}, "caps"),
    ({"caps": {"max_w": 200, "max_epsilon": 5}}, "caps"),
    ({"noise": "opendp"}, "noise"),
    ({"postprocess": "none"}, "postprocess"),
    ({"mechanism": "BD", "window": 10, "epsilon": 1.0}, "mechanism"),
])
def test_a_changed_field_is_refused_by_name(changes, field) -> None:
    stored = RestoreFingerprint.from_json(fingerprint().to_json())
    with pytest.raises(RestoreMismatchError, match=f"changed {field} ") as err:
        fingerprint(**changes).check_restore(stored)
    assert "state has" in str(err.value) and "docs/operations.md" in str(err.value)


def test_a_baseline_requirement_change_names_window_and_epsilon() -> None:
    stored = fingerprint(mechanism="BD", window=10, epsilon=1.0)
    changed = fingerprint(mechanism="BD", window=12, epsilon=0.5)
    assert [name for name, _, _ in changed.differences(stored)] == ["window", "epsilon"]
    with pytest.raises(RestoreMismatchError, match="changed window .*epsilon: state has 1.0, configuration has 0.5"):
        changed.check_restore(stored)


@pytest.mark.parametrize("changes", [
    {"flink": {"parallelism": 2, "checkpoint_interval": "5s", "restart_attempts": 0}},
    {"kafka": {"group_id": "other", "properties": {"security.protocol": "SASL_SSL"}}},
    {"max_record_bytes": 1024},
    {"events": {"user": "uid", "time": "ts", "value": "v"}},
])
def test_safe_changes_pass(changes) -> None:
    fingerprint(**changes).check_restore(fingerprint())


def test_a_field_only_one_side_knows_differs() -> None:
    """A fingerprint of another version (a field added or dropped) is a difference, not ignored."""
    stored = RestoreFingerprint(fingerprint().values + (("future_field", "x"),), JOB_STATE_VERSION)
    assert fingerprint().differences(stored) == [("future_field", "x", None)]
    with pytest.raises(RestoreMismatchError, match="changed future_field"):
        fingerprint().check_restore(stored)
    assert [name for name, _ in fingerprint().values] == list(FIELDS)


@pytest.mark.parametrize("text", ['["mechanism"]', '{"mechanism": 1}', "null"])
def test_a_malformed_stored_fingerprint_is_an_error(text) -> None:
    with pytest.raises(ValueError, match="not a restore fingerprint"):
        RestoreFingerprint.from_json(text)


def test_a_changed_mechanism_section_is_refused() -> None:
    stored = fingerprint(mechanism="Adaptive", adaptive={"evidence": 240})
    with pytest.raises(RestoreMismatchError, match="changed options "):
        fingerprint(mechanism="Adaptive", adaptive={"evidence": 120}).check_restore(stored)
    fingerprint(mechanism="Adaptive", adaptive={"evidence": 240}).check_restore(stored)


def test_a_restore_that_changes_the_pseudonyms_is_refused_without_showing_the_key() -> None:
    """Under another key (or with the setting switched on or off) every user would come back as a new
    one with a fresh budget; without the setting the fingerprint is an earlier release's."""
    key, other = "k" * 32, "K" * 32
    stored = fingerprint(pseudonymise={"key": key})
    fingerprint(pseudonymise={"key": key}).check_restore(stored)
    for changes in ({"pseudonymise": {"key": other}}, {}):
        with pytest.raises(RestoreMismatchError, match="changed pseudonyms") as err:
            fingerprint(**changes).check_restore(stored)
        assert key not in str(err.value) and other not in str(err.value)
    assert "pseudonyms" not in dict(fingerprint().values)


def test_the_stored_fingerprint_carries_this_releases_state_version() -> None:
    stored = json.loads(fingerprint().to_json())
    assert stored["state_version"] == str(JOB_STATE_VERSION)
    assert RestoreFingerprint.from_json(fingerprint().to_json()).state_version == JOB_STATE_VERSION


@pytest.mark.parametrize("version", [JOB_STATE_VERSION - 1, JOB_STATE_VERSION + 1])
def test_state_of_another_state_version_is_refused_with_the_way_out(version: int) -> None:
    written = json.loads(fingerprint().to_json())
    written["state_version"] = str(version)
    with pytest.raises(StateVersionError) as err:
        fingerprint(mechanism="PBA").check_restore(RestoreFingerprint.from_json(json.dumps(written)))
    assert str(err.value).startswith(f"restore refused: savepoint of state version {version}, this release reads "
                                     f"state version {JOB_STATE_VERSION}: start a new job with new ledgers")
    assert "docs/operations.md, 'State versions'" in str(err.value)


def test_a_fingerprint_without_a_state_version_is_of_the_first_one() -> None:
    written = json.loads(fingerprint().to_json())
    del written["state_version"]
    stored = RestoreFingerprint.from_json(json.dumps(written))
    assert stored.state_version == 1
    fingerprint().check_restore(stored)
