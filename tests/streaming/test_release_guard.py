"""The refusal to start twice and the resume point (jobs/streaming/release_guard.py; docs/streaming.md,
"Starting twice"): pure logic, no Kafka. A forged release record must not move the resume point past
the last slot the audit topic shows decided."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.release_schema import RELEASE_SCHEMA_VERSION
from pwevent.jobs.streaming.job import with_resume
from pwevent.jobs.streaming.release_guard import (
    RESUME_FLAG,
    RESUME_KEY,
    AlreadyReleasedError,
    GuardInputs,
    ResumePoint,
    audited_slot,
    fresh_start,
    job_release,
    job_releases,
)
from pwevent.jobs.streaming.settings import stream_settings

TOPIC = "t.releases"


def release(slot: int, kind: str = "publish", counts: list[Any] | None = None) -> dict[str, Any]:
    return {"slot": slot, "kind": kind, "counts": [slot, 2 * slot] if counts is None else counts,
            "mechanism": "PBD"}


def message(record: dict[str, Any], key: str | None = None) -> tuple[bytes | None, bytes]:
    return (str(record.get("slot")) if key is None else key).encode(), json.dumps(record).encode()


def spend(slot: int) -> bytes:
    return json.dumps({"record": "spend", "ledger": "c1", "slot": slot, "members": 3, "spend1": 0.1,
                       "spend2": 0.0, "kind": "skip", "requirement": {"w": 10, "epsilon": 1.0}}).encode()


def inputs(records: list[dict[str, Any]], audited: int) -> GuardInputs:
    found = [job_release(*message(r)) for r in records]
    return GuardInputs(tuple(r for r in found if r is not None), audited)


def test_only_the_jobs_own_records_are_releases() -> None:
    assert job_release(*message(release(3))) == release(3)
    assert job_release(*message(release(3), key="4")) is None  # key is not the slot
    assert job_release(*message({"slot": "3", "counts": [1]}, key="3")) is None  # slot not an integer
    assert job_release(*message({"slot": 3, "kind": "nullify"})) is None  # no counts
    assert job_release(*message(release(3, counts=[1.5, 2]))) is None
    assert job_release(*message(release(3, counts=[True, 2]))) is None  # a boolean is no count
    assert job_release(*message(release(0))) is None
    assert job_release(b"3", b"not json") is None


def utilisation(slot: int) -> bytes:
    return json.dumps({"record": "utilisation", "slot": slot, "ppm": {"w1_9": 0}}).encode()


def test_the_audited_slot_is_the_last_spend_line_or_utilisation_record() -> None:
    """Either record is written in its slot's release transaction; a slot before anybody registered
    has only the utilisation record."""
    member = json.dumps({"record": "member", "user": "u", "ledger": "c1", "since": 90}).encode()
    assert audited_slot([spend(1), spend(7), member, spend(5), b"{", b"[]"]) == 7
    assert audited_slot([member]) == 0
    assert audited_slot([utilisation(s) for s in range(1, 10)]) == 9
    assert audited_slot([spend(3), utilisation(3), utilisation(4)]) == 4


def test_a_job_that_released_only_slots_without_users_resumes_after_them() -> None:
    """A job without state after nine slots before anybody registered: the utilisation records confirm
    them, so it resumes after slot 9 (it was refused with "confirms none of them" before)."""
    records = [release(s, "skip", [0, 0]) for s in range(1, 10)]
    audited = audited_slot([utilisation(s) for s in range(1, 10)])
    assert fresh_start(inputs(records, audited), True, TOPIC) == ResumePoint(9, (0, 0), None)


def test_no_release_is_a_fresh_start_with_or_without_resume() -> None:
    assert fresh_start(GuardInputs((), 0), False, TOPIC) is None
    assert fresh_start(GuardInputs((), 12), True, TOPIC) is None


def test_releases_without_resume_refuse_naming_the_slot_and_both_ways_on() -> None:
    with pytest.raises(AlreadyReleasedError) as refused:
        fresh_start(inputs([release(s) for s in range(1, 41)], 40), False, TOPIC)
    text = str(refused.value)
    assert text.startswith("refusing to start: topic t.releases already holds releases up to slot 40,")
    assert "--restore latest" in text and f"{RESUME_KEY}: true" in text and RESUME_FLAG in text
    assert "continue after slot 40" in text


def test_resume_continues_after_the_last_release_with_its_counts_and_last_publication() -> None:
    records = [release(1), release(2), release(3, "skip", [1, 2]), release(4, "nullify", [1, 2])]
    assert fresh_start(inputs(records, 4), True, TOPIC) == ResumePoint(4, (1, 2), 2)
    assert fresh_start(inputs([release(1, "skip", [0, 0])], 1), True, TOPIC) == ResumePoint(1, (0, 0), None)


def test_a_forged_release_past_the_audit_moves_nothing() -> None:
    genuine = [release(s) for s in range(1, 41)]
    forged = release(99999)
    assert fresh_start(inputs([*genuine, forged], 40), True, TOPIC) == ResumePoint(40, (40, 80), 40)
    with pytest.raises(AlreadyReleasedError) as refused:
        fresh_start(inputs([*genuine, forged], 40), False, TOPIC)
    text = str(refused.value)
    assert "up to slot 99999 (the audit topic confirms up to slot 40)" in text
    assert "continue after slot 40 " in text and "99999 with" not in text


def test_releases_the_audit_confirms_none_of_refuse_even_with_resume() -> None:
    for resume in (False, True):
        with pytest.raises(AlreadyReleasedError, match=r"confirms none of them\), so there is no slot to resume"):
            fresh_start(inputs([release(99999)], 0), resume, TOPIC)


def test_the_cli_flag_is_a_shorthand_for_the_configuration_key() -> None:
    base = {"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"}}
    settings = stream_settings(parse_config(base))
    assert not settings.kafka.resume_after_last_release
    assert with_resume(settings, True).kafka.resume_after_last_release
    assert with_resume(settings, False) is settings
    configured = stream_settings(parse_config({**base, "kafka": {"resume_after_last_release": True}}))
    assert configured.kafka.resume_after_last_release
    with pytest.raises(ValueError, match="kafka.resume_after_last_release"):
        stream_settings(parse_config({**base, "kafka": {"resume_after_last_release": "yes"}}))


@pytest.mark.parametrize("hostile", [b"[" * 100_000, b"\xff\xfe{", b"{" + b'"a":' * 50_000])
def test_hostile_bytes_on_the_release_or_audit_topic_are_ignored_not_a_crash(hostile: bytes) -> None:
    """Any bytes (nesting too deep to parse, invalid UTF-8) are no release and no spend line: the guard
    must not fail the job's start on them."""
    assert job_release(b"3", hostile) is None
    assert audited_slot([spend(4), hostile]) == 4


def test_a_release_with_another_number_of_cells_is_not_the_jobs() -> None:
    """A record keyed like a real slot but with counts of another length cannot become the resumed
    job's r_0 (it would break every later slot): only records with one count per domain cell count."""
    genuine = [message(release(s)) for s in (1, 2)]
    forged = message(release(2, counts=[7, 7, 7]))
    assert job_releases([*genuine, forged], 2) == (release(1), release(2))
    assert fresh_start(GuardInputs(job_releases([*genuine, forged], 2), 2), True, TOPIC) == ResumePoint(2, (2, 4), 2)


def test_the_guard_sees_the_releases_of_every_format_and_refuses_what_it_cannot_read() -> None:
    """A job without state over a topic in a registered format: the guard reads its releases as it
    reads JSON ones, so the start is refused as it would be; an Avro topic it cannot read (no
    registry configured) stops the start rather than look empty."""
    from pwevent.jobs.common.avro_format import RegistryUnavailable
    from pwevent.jobs.streaming.release_format import ReleaseDecoder
    from tests.jobs.test_release_schema import SCHEMA_ID, encoders, registry_with_the_release_schema

    records = [full_release(slot) for slot in (1, 2, 3)]
    for encoder in encoders():
        messages = [(str(r["slot"]).encode(), encoder.encode(r)) for r in records]
        found = job_releases(messages, 2, ReleaseDecoder(registry_with_the_release_schema()))
        assert found == tuple(records), encoder.format
        with pytest.raises(AlreadyReleasedError, match="up to slot 3"):
            fresh_start(GuardInputs(found, 3), False, TOPIC)
    avro = [(b"1", encoders()[2].encode(records[0]))]
    assert avro[0][1][1:5] == SCHEMA_ID.to_bytes(4, "big")
    with pytest.raises(RegistryUnavailable):
        job_releases(avro, 2, ReleaseDecoder())


def full_release(slot: int) -> dict[str, Any]:
    """A release with every field the release formats carry (docs/formats.md, "Release")."""
    return {"schema_version": RELEASE_SCHEMA_VERSION, "slot": slot,
            "start": "2024-01-01T00:00:00Z", "end": "2024-01-01T00:01:00Z",
            "mechanism": "PBD", "kind": "publish", "counts": [slot, 2 * slot], "population": 3,
            "epsilon_calculation": 0.1, "epsilon_publication": 0.2, "threshold": 3.5, "kept_share": None,
            "dissimilarity": 1.5, "noise": "numpy-geometric", "domain": {"type": "binary"}}
