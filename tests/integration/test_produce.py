"""`pwevent produce` checks every send: a record the broker refuses fails the run with the count and
the broker's reason (jobs/streaming/produce.py). A real broker (deploy/local/kafka.sh), no job."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.slots import iso

pytestmark = [pytest.mark.slow, pytest.mark.kafka]


def _write(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_a_record_the_broker_refuses_fails_the_run_and_says_why(streaming_job: Any, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """An event 2 h past the wall clock (the producer stamps records with their event time; the broker
    refuses a timestamp more than log.message.timestamp.after.max.ms, 1 h, ahead): it used to say
    "3 messages sent" and exit 0 while the topic held 1."""
    now = int(time.time() * 1000)
    origin = now - now % 60_000 - 60_000  # slot 1 started a minute or two ago
    job = streaming_job("PBD", {"origin": iso(origin)})
    requirements = _write(tmp_path / "req.jsonl", [{"user": "u1", "time": origin + 1, "w": 4, "epsilon": 1.0}])
    events = _write(tmp_path / "ev.jsonl", [
        {"user": "u1", "time": origin + 2, "value": 1},
        {"user": "u1", "time": now + 2 * 3_600_000, "value": 0},
    ])
    args = ["produce", "--config", str(job.config_path), "--events", events, "--requirements", requirements,
            "--pace", "1ms", "--timeout", "30s", "--quiet"]
    assert main(args) == 5
    err = capsys.readouterr().err
    assert "refused 1 record(s)" in err and "InvalidTimestamp" in err, err
    assert "2 acknowledged" in err and "messages sent" not in err, err
    assert len(job.read("events", idle_s=1.0)) == 1  # what the broker kept: the valid event only

    fine = _write(tmp_path / "fine.jsonl", [{"user": "u1", "time": origin + 3, "value": 0}])
    assert main([*args[:4], fine, *args[5:]]) == 0
    assert "2 messages sent and acknowledged" in capsys.readouterr().err


def test_only_slots_that_hold_records_are_sent_and_pace_0_is_a_backlog(streaming_job: Any, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Events in slot 1 and in the slot of now, 600,000 one-minute slots later: both are sent and the
    empty slots between them are skipped (walking them at even 1 ms each took 10 minutes); `--pace 0`
    is a backlog at full speed."""
    now = int(time.time() * 1000)
    origin = now - now % 60_000 - 600_000 * 60_000
    job = streaming_job("PBD", {"origin": iso(origin)})
    requirements = _write(tmp_path / "req.jsonl", [{"user": "u1", "time": origin + 1, "w": 4, "epsilon": 1.0}])
    events = _write(tmp_path / "ev.jsonl", [{"user": "u1", "time": origin + 2, "value": 1},
                                            {"user": "u1", "time": now - 1, "value": 0}])
    assert main(["produce", "--config", str(job.config_path), "--events", events, "--requirements", requirements,
                 "--pace", "0", "--timeout", "30s"]) == 0
    err = capsys.readouterr().err
    assert "3 messages sent and acknowledged" in err and "slot 600001 sent" in err, err
    assert len(job.read("events", idle_s=1.0)) == 2
