"""Where a job's state is (docs/operations.md, "Savepoints, upgrades and rescaling", "Checkpoints
and savepoints on an object store"; docs/kubernetes.md, "State"): the newest completed checkpoint,
in a local folder or on an object store, the folders of earlier jobs a local run removes, and what the
cluster entry point takes for restored state."""

from __future__ import annotations

import glob
import os
import re
import shutil
from pathlib import Path

from pwevent.jobs.common.config import ConfigError
from pwevent.jobs.streaming.object_store import ObjectStoreError, S3Settings, is_object_store, latest_stored_checkpoint

#: The Flink keys the cluster sets when it restores a job (a savepoint or checkpoint path; HA).
RECOVERY_PATH = "execution.state-recovery.path"
HA_TYPE = "high-availability.type"


def cluster_restore(recovery_path: str | None, ha_type: str | None) -> str | None:
    """What the entry point treats as restored state when the cluster, not `--restore`, decides it
    (docs/kubernetes.md, "State"): a recovery path the cluster was given (the Kubernetes operator's
    savepoint upgrade, `flink run -s`), or, under high availability, the cluster's own recovery of
    its latest checkpoint ("ha:<type>"), since in application mode this entry point runs again on
    every JobManager fail-over, though after a loss of the HA metadata it starts without state. It
    only bounds `late_through`: the Population itself checks the release topic whenever it finds no
    state (docs/streaming.md, "Starting twice")."""
    if recovery_path:
        return recovery_path
    if ha_type and ha_type.lower() not in ("none", ""):
        return f"ha:{ha_type}"
    return None


def latest_checkpoint(checkpoint_dir: str, s3: S3Settings | None = None) -> str | None:
    """The newest completed checkpoint (a chk-N folder with _metadata) under the checkpoint dir; on
    an object store (s3://...) found through its S3 API, reached as `s3` (`flink.s3`) says. A store
    that refuses or does not answer is a ConfigError naming it."""
    if is_object_store(checkpoint_dir):
        try:
            return latest_stored_checkpoint(s3 or S3Settings(), checkpoint_dir)
        except ObjectStoreError as err:
            raise ConfigError(f"--restore latest: {err}; check flink.s3 or name the checkpoint to restore") from None
    base = checkpoint_dir.removeprefix("file://")
    found = glob.glob(os.path.join(base, "*", "chk-*", "_metadata"))
    if not found:
        return None
    return os.path.dirname(max(found, key=os.path.getmtime))


def clean_checkpoints(checkpoint_dir: str, keep: int, restore: str | None) -> list[str]:
    """Remove the checkpoint folders of earlier jobs (docs/operations.md, "Savepoints, upgrades and
    rescaling"): under a local checkpoint dir, every job-id folder except the `keep` + 1 whose
    newest completed checkpoint is newest (the first is what `--restore latest` picks) and the one
    `restore` lies in. Folders without a completed checkpoint are earlier jobs' too. Remote stores
    (s3://, ...) are left alone. Returns the removed folders."""
    if "://" in checkpoint_dir and not checkpoint_dir.startswith("file://"):
        return []
    base = Path(checkpoint_dir.removeprefix("file://"))
    if not base.is_dir():
        return []
    jobs = [p for p in base.iterdir() if p.is_dir() and re.fullmatch("[0-9a-f]{32}", p.name)]

    def newest(folder: Path) -> float:
        done = [m.stat().st_mtime for m in folder.glob("chk-*/_metadata")]
        return max(done, default=-1.0)

    ranked = sorted(jobs, key=newest, reverse=True)
    kept = {p for p in ranked[:keep + 1] if newest(p) >= 0}
    if restore:
        local = Path(restore.removeprefix("file://").removeprefix("file:")).resolve()
        kept |= {p for p in jobs if p.resolve() in local.parents}
    removed = [p for p in jobs if p not in kept]
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    return [str(p) for p in removed]
