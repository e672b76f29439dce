"""Savepoints on standalone session clusters (deploy/local/flink-cluster.sh; docs/operations.md,
"Savepoints, upgrades and rescaling"): a job stopped with a savepoint at parallelism 1 is restored at 2 on a new
cluster; the input arrives in two halves around the stop, and every slot is released exactly once,
equal to the replay, with the full audit."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import FAST_CLOSE, SEED, check_equals_replay, generate, stop_with_savepoint
from tests.integration.test_cluster_submit import ClusterJob, _rest, session_cluster

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

SLOTS = 12
HALF = 6


def rewrite_config(path: Path, **flink: Any) -> None:
    raw = yaml.safe_load(path.read_text())
    raw["flink"].update(flink)
    path.write_text(yaml.safe_dump(raw))


def wait_state(job: ClusterJob, want: str, passing: tuple[str, ...]) -> None:
    deadline = time.monotonic() + 240  # a guard against a hang, not a measured duration
    while (state := job.state()) != want:
        assert state in passing, job.log_tail()
        assert time.monotonic() < deadline, f"job still {state}"
        time.sleep(0.5)


def test_cluster_savepoint_then_restore_at_parallelism_2(kafka_bootstrap: str, tmp_path: Path) -> None:
    """Stop with a savepoint at parallelism 1, restore at 2 on a new cluster (as an upgrade in
    application mode does; thread mode cannot start a second Python job in a TaskManager that ran
    one: pemja fails with NoSuchFieldException loadedLibraryNames, docs/operations.md)."""
    with session_cluster(tmp_path / "cluster-1") as rest:
        job = ClusterJob(rest, kafka_bootstrap, tmp_path, "DPBD", {"flink": {"parallelism": 1, **FAST_CLOSE["flink"]}})
        events, requirements = generate(tmp_path, users=40, slots=SLOTS, dynamic=True)
        produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=HALF)
        try:
            job.submit(SEED)
            wait_state(job, "RUNNING", ("CREATED", "INITIALIZING"))
            job.wait_releases(3, timeout=240)
            savepoint = stop_with_savepoint(rest, tmp_path / "savepoints")
            assert job.state() == "FINISHED"
        finally:
            job.stop()
    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=HALF + 1)
    rewrite_config(job.config_path, parallelism=2)
    with session_cluster(tmp_path / "cluster-2") as rest:
        job.rest = rest
        try:
            words = job.submit(SEED, ("--restore", savepoint))
            assert words[words.index("-s") + 1] == savepoint and words[words.index("-p") + 1] == "2"
            wait_state(job, "RUNNING", ("CREATED", "INITIALIZING"))
            check_equals_replay(job, events, requirements, SLOTS)
            vertices = {v["name"]: v["parallelism"] for v in _rest(rest, f"/jobs/{job.job_id}")["vertices"]}
            assert any("Membership" in name and p == 2 for name, p in vertices.items()), vertices
            assert any("Population" in name and p == 1 for name, p in vertices.items()), vertices
        finally:
            job.stop()

