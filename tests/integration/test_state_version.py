"""State versions (docs/operations.md, "State versions"): a release whose state layout differs refuses a
savepoint of another state version, before it writes anything, with the way out.

The savepoint is a real one, taken by `pwevent stop --savepoint` of this checkout's job; the restore
runs as the next release would, one whose `JOB_STATE_VERSION` is one more. The test harness makes it
so with a `sitecustomize` module on the restored run's PYTHONPATH, which Python imports at start in
every interpreter of the run (the client and the Flink job's Python workers, which inherit the
variable) and which sets that constant before the job reads it. Nothing in the job is built for the
test: no switch or variable of its own changes the version it writes or reads.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.common.files import iso
from pwevent.jobs.common.restore_fingerprint import JOB_STATE_VERSION
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import SEED, ahead_origin, generate, stop_with_savepoint

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

NEXT_RELEASE = '''"""This run is the next release: its job's state version is one more
(tests/integration/test_state_version.py)."""
import pwevent.jobs.common.restore_fingerprint as fingerprint

fingerprint.JOB_STATE_VERSION += 1
'''


def test_a_savepoint_of_another_state_version_is_refused_with_the_way_out(streaming_job: Any,
                                                                          tmp_path: Path) -> None:
    origin = ahead_origin()
    job = streaming_job("PBA", {"origin": iso(origin), "flink": {"restart_attempts": 0}})
    events, requirements = generate(job.folder, users=20, slots=6, w=5, origin_ms=origin)
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=3)
    job.start(seed=SEED)
    job.wait_releases(2, timeout=180)
    savepoint = stop_with_savepoint(job.rest().address, job.folder / "savepoints")
    assert job.process is not None and job.process.wait(timeout=120) == 0, job.log_tail()
    released = len(job.read("releases"))
    # The Population checks on its first record: the rest of the input is there when the restore starts.
    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=4)

    harness = tmp_path / "next-release"
    harness.mkdir()
    (harness / "sitecustomize.py").write_text(NEXT_RELEASE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(harness), os.environ.get("PYTHONPATH")]))}
    refused = subprocess.run(job.command(seed=SEED, restore=savepoint), capture_output=True, text=True,
                             timeout=600, cwd=job.folder, env=env)

    assert refused.returncode == 1, refused.stderr[-3000:]
    assert (f"failed: restore refused: savepoint of state version {JOB_STATE_VERSION}, this release reads state "
            f"version {JOB_STATE_VERSION + 1}: start a new job with new ledgers, on new release and audit topics "
            "(docs/operations.md, 'State versions'") in refused.stderr, refused.stderr[-3000:]
    assert len(job.read("releases")) == released
