"""The README's demo command (`bash deploy/local/demo.sh`), as a new user runs it, with a small
stream: it sets up, starts its own broker and the job, produces a live stream whose slot 1 begins
60 s after the start (the default `--lead`: under load a job start can take over 30 s, and events the
producer sends after their slot's release are late), shows every committed release, audits the spend
log without a violation and stops everything it started (its broker and job by their pids). Each slot
is released 15 s after its end (`--release-delay`, the demo's own is 3 s): beside the rest of the
suite on two cores the job once read every record more than 3 s after its slot's end, and refused
them all as late, as it should (measured 2026-12-07: 0 users audited, 500 late dead letters)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import REPO

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


def test_the_demo_runs_end_to_end_and_stops_what_it_started(tmp_path: Path) -> None:
    run = tmp_path / "demo"
    done = subprocess.run(["bash", str(REPO / "deploy" / "local" / "demo.sh"), "--users", "100", "--slots", "4",
                           "--pace", "2s", "--release-delay", "15s"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PWEVENT_DEMO_RUN": str(run)})
    out = done.stdout
    assert done.returncode == 0, f"{out[-3000:]}\n{done.stderr[-3000:]}"
    assert "took longer than --lead" not in done.stderr, done.stderr
    released = [int(m) for m in re.findall(r"^\s+(\d+)\s+\d{4}-\d\d-\d\dT\S+Z\s+(?:publish|skip)\s", out, flags=re.M)]
    assert released == [1, 2, 3, 4], out
    assert re.search(r"audited \d+ ledgers?, 100 users, .*: no violation", out), out
    assert "demo stopped" in out
    assert not list(run.rglob("*.pid")), "a pid file is left: something the demo started was not stopped"
