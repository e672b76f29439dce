"""Topics as they are, end to end (docs/formats.md, "Value mapping" and Requirement): the job against a
real broker and PyFlink's mini-cluster equals `pwevent replay` of the same files, spend log line for
line, with the full audit, for a configuration that maps values (category aliases, a folded case and
an `other` cell; numeric ranges with an `other` cell), reads every requirement field at a configured
path, and takes preferences declared long before the origin, with invalid records of these kinds mixed
in. Both fast paths (SQL and the JVM) and the reference parser see records of every kind."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    SEED,
    TEST_ORIGIN_MS,
    check_dead_letters,
    check_equals_replay,
    cpu_burner,
    generate,
    make_job,
    replay,
    slot_time,
)

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

DAY_MS = 86_400_000
REQUIREMENTS = {"user": "subject.id", "time": "issued_at", "w": "pref.window", "epsilon": "pref.budget"}
#: domain -> (its configuration, the values the events take (canonical ones take the fast path,
#: capitals and non-ASCII the reference parser), a value of the right type in no cell, one of the wrong type)
DOMAINS: dict[str, tuple[dict[str, Any], list[Any], Any]] = {
    "categories": ({"type": "categories", "values": ["web", "app"], "aliases": {"iOS": "app", "Android": "app"},
                    "case": "fold", "other": "other"},
                   ["web", "app", "Web", "APP", "iOS", "android", "fax", "Straße"], 5),
    "ranges": ({"type": "ranges", "edges": [0, 10, 20.5, 100], "other": "outside"},
               [3, 10, 15.25, 20.5, 99.999, 150, -1, 0.5], "5"),
}


def requirement(user: str, time: Any, w: int, epsilon: float) -> dict[str, Any]:
    return {"subject": {"id": user}, "issued_at": time, "pref": {"window": w, "budget": epsilon}}


def inputs(folder: Path, domain: str, users: int, slots: int) -> tuple[str, str]:
    """The generated stream with mapped values and requirement records at the configured paths: half
    of the users declared 200 days before the origin (every fourth twice, the later one in force), the
    others at slot 1; invalid records of each kind among them."""
    events, requirements = generate(folder, users=users, slots=slots)
    _, values, wrong = DOMAINS[domain]
    lines = []
    for n, line in enumerate(Path(events).read_text().splitlines()):
        record = json.loads(line)
        record["value"] = values[(record["value"] + n) % len(values)]
        lines.append(json.dumps(record))
        if n == 3 * users:  # in slot 4: a value of the wrong type, and an event from before the origin
            lines.append(json.dumps({"user": "u1", "time": slot_time(4, 1), "value": wrong}))
            lines.append(json.dumps({"user": "u2", "time": TEST_ORIGIN_MS - 5, "value": values[0]}))
    mapped_events = folder / "events.mapped.jsonl"
    mapped_events.write_text("\n".join(lines) + "\n")
    old = TEST_ORIGIN_MS - 200 * DAY_MS
    out = []
    for n, line in enumerate(Path(requirements).read_text().splitlines()):
        flat = json.loads(line)
        if n % 4 == 0:  # an older preference, superseded by the next one
            out.append(requirement(flat["user"], old - DAY_MS + n, 10, 0.9))
        time = old + n if n % 2 == 0 else flat["time"]
        out.append(requirement(flat["user"], time, flat["w"], flat["epsilon"]))
    out += [requirement("late0", old, 0, 1.0),  # invalid (w 0): invalid_requirement, from before the origin too
            {"subject": [{"id": "late1"}], "issued_at": old, "pref": {"window": 5, "budget": 1.0}},  # an array
            {"subject": {"id": "late2"}, "issued_at": old, "pref": {"budget": 1.0}}]  # no window
    mapped_requirements = folder / "requirements.mapped.jsonl"
    mapped_requirements.write_text("".join(json.dumps(r) + "\n" for r in out))
    return str(mapped_events), str(mapped_requirements)


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_value_mapping_requirement_paths_and_old_preferences_equal_the_replay(streaming_job: Any,
                                                                              domain: str) -> None:
    """The whole input waits in the topics and is read at full speed beside a CPU burner. The job
    equals the replay of the same files, field by field, spend log line for line, with the full audit
    (the requirement records as the audit's input); every user counts from slot 1, a quarter of them at
    the later of two preferences from before the origin; the dead letters are the replay's rejects."""
    slots, users = 8, 24
    job = make_job(streaming_job, "PBD", {"domain": DOMAINS[domain][0], "requirements": REQUIREMENTS})
    events, requirements = inputs(job.folder, domain, users, slots)
    expected = replay(job, events, requirements, slots)
    assert all(r["population"] == users for r in expected["releases"])
    reasons = Counter(r["reason"] for r in expected["rejects"])
    assert reasons == Counter({"superseded_before_origin": users // 4, "out_of_domain": 1, "before_origin": 1,
                               "invalid_requirement": 2, "mistyped_field": 1}), reasons
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    with cpu_burner():
        job.start(seed=SEED)
        check_dead_letters(job, expected["rejects"])  # first: a difference shows in the reasons
        check_equals_replay(job, events, requirements, slots, expected)
