"""Reading an existing events topic from a position (docs/streaming.md, "Reading an existing events
topic"): the job started at a time reads the events from there on, and every requirement record ever
declared; it equals the replay of exactly those inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.common.files import DEMO_ORIGIN_MS
from pwevent.jobs.common.slots import iso
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import SLOT_MS, check_equals_replay, generate

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


def test_a_job_started_at_a_time_equals_the_replay_of_the_events_from_that_time(streaming_job: Any) -> None:
    slots, first_read = 4, 3
    start_ms = DEMO_ORIGIN_MS + (first_read - 1) * SLOT_MS
    job = streaming_job("PBD", {"kafka": {"start": iso(start_ms)},
                                "flink": {"close_after": "1s", "source_idleness": "3s"}})
    events, requirements = generate(job.folder, users=30, slots=slots)
    produce_files(job.kafka, job.config, events, requirements, 0.0)  # all of it in the topics first
    job.start()
    lines = Path(events).read_text().splitlines()
    later = [line for line in lines if json.loads(line)["time"] >= start_ms]
    assert 0 < len(later) < len(lines)
    read = job.folder / "data" / "events-read.jsonl"
    read.write_text("".join(line + "\n" for line in later))
    job.wait_releases(slots, timeout=240)
    assert [m.json() for m in job.read("dead_letters")] == []
    releases = check_equals_replay(job, str(read), requirements, slots)
    by_slot = {r["slot"]: r for r in releases}
    assert all(by_slot[slot]["population"] == 30 for slot in range(1, slots + 1))
