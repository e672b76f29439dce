"""deploy/local/s3-server.sh (docs/operations.md, "Checkpoints and savepoints on an object store"):
Moto's S3 server on loopback with the bucket it was asked for, listed through the S3 API by the job's
own client (signed requests, page by page), where `--restore latest` finds the newest completed
checkpoint; a second start on the same run folder reuses the server, which is stopped by its pid
once its owner has exited."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from pwevent.jobs.streaming.checkpoints import latest_checkpoint
from pwevent.jobs.streaming.object_store import list_objects
from tests.s3_server import BUCKET, SCRIPT, client, put_object, s3_server

JOB_A, JOB_B = "a" * 32, "b" * 32


def _status(run_dir: Path) -> int:
    return subprocess.run([str(SCRIPT), "status", "--run-dir", str(run_dir)], capture_output=True,
                          timeout=30).returncode


def test_the_server_lists_checkpoints_and_goes_with_its_owner(tmp_path: Path) -> None:
    owner = subprocess.Popen(["sleep", "600"])
    run_dir = tmp_path / "s3"
    try:
        with s3_server(run_dir, owner.pid) as endpoint:
            assert endpoint.startswith("http://127.0.0.1:") and (run_dir / "endpoint").read_text().strip() == endpoint
            store, checkpoints = client(endpoint), f"s3://{BUCKET}/ck"
            assert latest_checkpoint(checkpoints, store) is None
            put_object(endpoint, f"ck/{JOB_A}/chk-7/_metadata", b"m")
            put_object(endpoint, f"ck/{JOB_A}/chk-8/0b6c", b"state")  # chk-8 not complete: no _metadata
            put_object(endpoint, f"ck/{JOB_A}/shared/x", b"")
            put_object(endpoint, "elsewhere/chk-9/_metadata", b"m")
            assert latest_checkpoint(checkpoints, store) == f"s3://{BUCKET}/ck/{JOB_A}/chk-7"
            time.sleep(1.1)  # S3's LastModified counts seconds
            put_object(endpoint, f"ck/{JOB_B}/chk-2/_metadata", b"m")
            assert latest_checkpoint(f"s3p://{BUCKET}/ck/", store) == f"s3p://{BUCKET}/ck/{JOB_B}/chk-2"
            for n in range(1005):  # more than one page of ListObjectsV2 (1,000 keys)
                put_object(endpoint, f"many/{n:04d}", b"")
            keys = [o.key for o in list_objects(store, f"s3://{BUCKET}/many")]
            assert keys == [f"many/{n:04d}" for n in range(1005)]

            again = subprocess.run([str(SCRIPT), "start", "--run-dir", str(run_dir)], capture_output=True,
                                   text=True, timeout=60)
            assert again.returncode == 0 and again.stdout.strip() == endpoint and "already running" in again.stderr
            owner.kill()
            owner.wait(timeout=10)
            deadline = time.monotonic() + 30
            while _status(run_dir) == 0:
                assert time.monotonic() < deadline, "the server outlived its owner by 30 s"
                time.sleep(0.5)
            assert "owner" in (run_dir / "owner.out").read_text()
    finally:
        owner.kill()
