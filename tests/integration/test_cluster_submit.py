"""`pwevent run --print-submit` against a real Flink session cluster (deploy/local/flink-cluster.sh):
the printed command submits the job, detached; the job releases every slot once and its audit passes.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.common.files import write_synthetic
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import PWEVENT, REPO, StreamingJob, check_releases

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

CLUSTER_SH = REPO / "deploy" / "local" / "flink-cluster.sh"


@pytest.fixture
def flink_cluster(tmp_path: Path) -> Iterator[str]:
    run_dir = tmp_path / "cluster"
    started = subprocess.run([str(CLUSTER_SH), "start", "--run-dir", str(run_dir)], capture_output=True,
                             text=True, timeout=180)
    assert started.returncode == 0, started.stderr[-3000:]
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(CLUSTER_SH), "stop", "--run-dir", str(run_dir)], capture_output=True, timeout=120)


def _rest(address: str, path: str, method: str = "GET") -> Any:
    with urllib.request.urlopen(urllib.request.Request(f"http://{address}{path}", method=method), timeout=10) as r:
        body = r.read()
    return json.loads(body) if body else None


def test_printed_submit_command_runs_the_job_on_a_cluster(kafka_bootstrap: str, flink_cluster: str,
                                                          tmp_path: Path) -> None:
    job = StreamingJob(kafka_bootstrap, tmp_path, "PBD")
    printed = subprocess.run([*PWEVENT, "run", "--config", str(job.config_path), "--print-submit",
                              "--jobmanager", flink_cluster], capture_output=True, text=True, check=True)
    command = printed.stdout.strip()
    assert " run -d -m " in command
    submitted = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert "Job has been submitted with JobID" in submitted.stdout, submitted.stdout[-2000:] + submitted.stderr[-3000:]
    job_id = submitted.stdout.split("JobID")[-1].split()[0]
    try:
        deadline = time.monotonic() + 120
        while _rest(flink_cluster, f"/jobs/{job_id}")["state"] != "RUNNING":
            assert time.monotonic() < deadline, "job not RUNNING on the cluster"
            time.sleep(0.5)
        time.sleep(3.0)  # tasks deployed, sources polling
        slots = 6
        stream = SyntheticStream("Sin", 30, slots + 1, seed=3)
        events, requirements = write_synthetic(stream, str(tmp_path / "data"), 0.6, 40, 60_000)
        produce_files(job.kafka, job.config, str(events), str(requirements), 1.3)
        deadline = time.monotonic() + 90
        while len({m.json()["slot"] for m in job.read("releases", idle_s=1.0)}) < slots:
            assert _rest(flink_cluster, f"/jobs/{job_id}")["state"] == "RUNNING", "the job failed on the cluster"
            assert time.monotonic() < deadline, "releases missing"
        check_releases([m.json() for m in job.read("releases")], slots)
    finally:
        _rest(flink_cluster, f"/jobs/{job_id}?mode=cancel", method="PATCH")
