"""A real S3-compatible object store for the tests: Moto's server, started on loopback by
deploy/local/s3-server.sh on a run folder of its own with one bucket, and stopped by its pid
(docs/operations.md, "Checkpoints and savepoints on an object store"). Its objects are read back
through the S3 API by the job's own client (jobs/streaming/object_store.py)."""

from __future__ import annotations

import os
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pwevent.jobs.streaming.object_store import S3Settings

SCRIPT = Path(__file__).resolve().parents[1] / "deploy" / "local" / "s3-server.sh"
BUCKET = "pwevent-state"
#: Moto accepts any credentials; these stand for a store's own (the job signs its listings with them).
CREDENTIALS = {"access_key": "pwevent-test", "secret_key": "not-a-secret"}


@contextmanager
def s3_server(run_dir: Path, owner: int | None = None) -> Iterator[str]:
    """A server on `run_dir` with bucket BUCKET (stopped by its pid once `owner`, else this process,
    has exited, or when the block ends); yields its endpoint URL."""
    started = subprocess.run([str(SCRIPT), "start", "--run-dir", str(run_dir), "--bucket", BUCKET,
                              "--owner", str(owner or os.getpid())], capture_output=True, text=True, timeout=700)
    assert started.returncode == 0, started.stderr
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(SCRIPT), "stop", "--run-dir", str(run_dir)], capture_output=True, timeout=60)


def settings(endpoint: str) -> dict[str, object]:
    """The `flink.s3` section of a job whose state is on the server at `endpoint`."""
    return {"endpoint": endpoint, "path_style_access": True, **CREDENTIALS}


def client(endpoint: str) -> S3Settings:
    return S3Settings.model_validate(settings(endpoint))


def put_object(endpoint: str, key: str, data: bytes) -> None:
    """Write `data` at BUCKET/`key` (Moto takes an unsigned PUT)."""
    request = urllib.request.Request(f"{endpoint}/{BUCKET}/{key}", data=data, method="PUT",
                                     headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(request, timeout=10):
        pass
