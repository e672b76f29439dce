"""`pseudonymise:` in the streaming job (docs/operations.md, "Retention and erasure"): the job, whose
SQL fast paths name users in Java (`pwevent.flink.parsing.Pseudonyms`) and whose reference parsers
name them in Python (jobs/common/pseudonyms.py), equals the replay with the same key, and its audit
topic and its dead letters' parsed fields name no raw user id."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    SEED,
    check_dead_letters,
    check_equals_replay,
    generate,
    make_job,
    replay,
    slot_time,
)

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

KEY = "pwevent-test-pseudonym-key-0123456789abcdef"
STRANGER = "stranger"  # an event's user without any requirement record: an unknown_user dead letter


def test_a_pseudonymised_job_equals_the_replay_and_names_no_raw_id(streaming_job: Any) -> None:
    """Dynamic requirements (changes fork classes, keyed by the pseudonym), events on the fast path
    and one off it (two spaces: the reference parser; the last of its user in its slot), an unknown
    user. The releases and the spend log are the replay's; every `member` line names the pseudonym
    of a declared id, and no raw id is on the audit topic; the unknown user's dead letter names its
    pseudonym in its detail (its `original`, the raw record's head, keeps the raw id, as documented)."""
    slots = 8
    job = make_job(streaming_job, "DPBA", {"pseudonymise": {"key": KEY}})
    pseudonyms = job.config.pseudonyms
    assert pseudonyms is not None
    events, requirements = generate(job.folder, users=20, slots=slots, dynamic=True)
    with open(events, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"user": "u1", "time": slot_time(3, 59_999), "value": 1}).replace(": ", ":  ") + "\n")
        handle.write(json.dumps({"user": STRANGER, "time": slot_time(slots, 1000), "value": 1}) + "\n")
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    expected = replay(job, events, requirements, slots)
    check_equals_replay(job, events, requirements, slots, expected)

    declared = {json.loads(line)["user"] for line in Path(requirements).read_text().splitlines()}
    audit = job.wait_records("audit", len(expected["spend"]), lambda r: r.get("slot", r.get("since", 0)) <= slots)
    members = {r["user"] for r in audit if r.get("record") == "member"}
    assert members == {pseudonyms.of(user) for user in declared}
    text = json.dumps(audit)
    raw = [user for user in (*declared, STRANGER) if re.search(f'"{re.escape(user)}"', text)]
    assert raw == [], "raw user ids on the audit topic"

    dead = check_dead_letters(job, expected["rejects"])
    (unknown,) = [d for d in dead if d["reason"] == "unknown_user"]
    assert pseudonyms.of(STRANGER) in unknown["detail"] and STRANGER not in unknown["detail"]
    assert STRANGER in unknown["original"]
