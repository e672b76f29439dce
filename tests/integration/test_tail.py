"""`pwevent tail` against a real broker (jobs/streaming/tail.py; README.md, "Exit codes"): the table's
header comes only once the release topic is known to exist; a missing topic is exit 4 and a message,
with nothing on standard output."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml

from pwevent.jobs.streaming.kafka_io import producer
from tests.integration.conftest import PWEVENT

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
HEADER = "  slot                      end     kind    users   thresh  counts"


def tail(config: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PWEVENT, "tail", "--config", config, *args], capture_output=True, text=True,
                          timeout=120)


def test_tail_prints_its_header_only_for_a_topic_that_exists(streaming_job: Any) -> None:
    job = streaming_job("PBD")
    release = {"slot": 1, "start": "2024-01-01T00:00:00Z", "end": "2024-01-01T00:01:00Z", "kind": "publish",
               "population": 3, "threshold": None, "counts": [1, 2]}
    client = producer(job.kafka)
    try:
        client.send(job.topics["releases"], key=b"1", value=json.dumps(release).encode())
        client.flush()
    finally:
        client.close()
    shown = tail(str(job.config_path), "--max-slots", "1", "--timeout", "60")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == HEADER and lines[1].split()[:2] == ["1", "2024-01-01T00:01:00Z"], lines

    raw = yaml.safe_load(job.config_path.read_text())
    raw["kafka"]["topics"]["releases"] = f"{job.topics['releases']}.missing"
    missing = job.folder / "missing.yaml"
    missing.write_text(yaml.safe_dump(raw))
    refused = tail(str(missing), "--timeout", "2")
    assert refused.returncode == 4, refused.stderr
    assert f"topic {job.topics['releases']}.missing does not exist" in refused.stderr
    assert refused.stdout == ""
