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
HEADER = ("  slot                      end     kind    users   thresh  "
          "smoothed [95% interval] per cell (raw counts where a release has none)")


def tail(config: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PWEVENT, "tail", "--config", config, *args], capture_output=True, text=True,
                          timeout=120)


def test_tail_prints_its_header_only_for_a_topic_that_exists(streaming_job: Any) -> None:
    job = streaming_job("PBD")
    release = {"slot": 1, "start": "2024-01-01T00:00:00Z", "end": "2024-01-01T00:01:00Z", "kind": "publish",
               "population": 3, "threshold": None, "counts": [1, 2]}
    smoothed = {**release, "slot": 2, "end": "2024-01-01T00:02:00Z", "smoothed": [1.25, 1.75],
                "interval": [[0.5, 2.0], [1.0, 2.5]]}
    client = producer(job.kafka)
    try:
        for record in (release, smoothed):
            client.send(job.topics["releases"], key=str(record["slot"]).encode(), value=json.dumps(record).encode())
        client.flush()
    finally:
        client.close()
    shown = tail(str(job.config_path), "--max-slots", "2", "--timeout", "60")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == HEADER and lines[1].split()[:2] == ["1", "2024-01-01T00:01:00Z"], lines
    assert lines[1].endswith("1      2  (raw counts)") and lines[2].endswith("1.2 [0.5, 2.0]  1.8 [1.0, 2.5]"), lines
    raw = tail(str(job.config_path), "--max-slots", "2", "--timeout", "60", "--raw").stdout.splitlines()
    assert raw[0].endswith("counts") and raw[2].endswith("     1      2"), raw

    raw = yaml.safe_load(job.config_path.read_text())
    raw["kafka"]["topics"]["releases"] = f"{job.topics['releases']}.missing"
    missing = job.folder / "missing.yaml"
    missing.write_text(yaml.safe_dump(raw))
    refused = tail(str(missing), "--timeout", "2")
    assert refused.returncode == 4, refused.stderr
    assert f"topic {job.topics['releases']}.missing does not exist" in refused.stderr
    assert refused.stdout == ""
