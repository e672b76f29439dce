"""Checkpoints and savepoints on an S3-compatible object store (docs/operations.md, "Checkpoints and
savepoints on an object store"): the job, with `flink.checkpoint_dir: s3://...` on Moto's server
(deploy/local/s3-server.sh) and Flink's S3 file system plugin, checkpoints there, is stopped with a
savepoint there, restored from it, killed, and restored from its newest checkpoint there
(`--restore latest`, found through the S3 API). The input arrives in three parts around the two
restores; every slot is released exactly once, equal to the replay, and the spend log passes the
full audit. What the store holds is read back through its S3 API."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.common.slots import iso
from pwevent.jobs.streaming.checkpoints import latest_checkpoint
from pwevent.jobs.streaming.jars import s3_plugins_dir
from pwevent.jobs.streaming.object_store import list_objects
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import SEED, ahead_origin, check_equals_replay, generate, stop_with_savepoint
from tests.s3_server import BUCKET, client, s3_server, settings

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

SLOTS = 12


@pytest.fixture(scope="module")
def object_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The endpoint of a local S3 server with bucket BUCKET; the S3 plugin jar fetched beforehand
    (its download is no part of a job's timed start)."""
    s3_plugins_dir()
    with s3_server(tmp_path_factory.mktemp("s3")) as endpoint:
        yield endpoint


def keys(endpoint: str, uri: str) -> list[str]:
    return [o.key for o in list_objects(client(endpoint), uri)]


def test_checkpoints_and_a_savepoint_on_an_object_store_are_restored(streaming_job: Any, object_store: str) -> None:
    checkpoints = f"s3://{BUCKET}/checkpoints"
    origin = ahead_origin()
    job = streaming_job("PBA", {"origin": iso(origin),
                                "flink": {"checkpoint_dir": checkpoints, "s3": settings(object_store)}})
    events, requirements = generate(job.folder, users=30, slots=SLOTS, w=5, origin_ms=origin)

    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=4)
    job.start(seed=SEED)
    assert f"checkpoints under {checkpoints}" in job.log_tail()
    first = job.job_id
    job.wait_releases(3, timeout=180)
    job.wait_checkpoints(2)
    assert any(re.fullmatch(rf"checkpoints/{first}/chk-\d+/_metadata", k) for k in keys(object_store, checkpoints))
    savepoint = stop_with_savepoint(job.rest().address, f"s3://{BUCKET}/savepoints")
    assert job.process is not None and job.process.wait(timeout=120) == 0, job.log_tail()
    assert savepoint.startswith(f"s3://{BUCKET}/savepoints/savepoint-"), savepoint
    assert f"{savepoint.removeprefix(f's3://{BUCKET}/')}/_metadata" in keys(object_store, savepoint)

    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=5, last_slot=8)
    job.start(seed=SEED, restore=savepoint)
    second = job.job_id
    job.wait_releases(7, timeout=240)
    job.wait_checkpoints(2)
    job.stop()  # killed: what its last completed checkpoint holds is all that is kept
    newest = latest_checkpoint(checkpoints, client(object_store))
    assert newest is not None and newest.startswith(f"{checkpoints}/{second}/chk-"), newest

    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=9)
    job.start(seed=SEED, restore="latest")
    assert f"restoring from {newest}\n" in (Path(job.folder) / f"job-{job.runs}.log").read_text()
    check_equals_replay(job, events, requirements, SLOTS - 1)
    # the first job's checkpoints went when it finished (stop-with-savepoint); the killed one's stay
    assert {k.split("/")[1] for k in keys(object_store, checkpoints)} >= {second, job.job_id}
