"""A slot's outcome is drawn once across a stop with a savepoint restored at another parallelism, and
a restore from an older retained checkpoint is refused (docs/streaming.md, "A slot's outcome is drawn
once").

Every test ends with `released_once`: every slot read `read_uncommitted` once or in byte-identical
copies (jobs/offline/release_topic.py), the committed releases and the spend log equal `pwevent
replay` with the same seed, and `pwevent audit --release-topic` (the full audit, the topic check
included) passes (tests/integration/released_once.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from pwevent.jobs.common.files import iso
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    SEED,
    StreamingJob,
    ahead_origin,
    generate,
    make_job,
    stop_with_savepoint,
)
from tests.integration.released_once import GUARD_S, analyst_read, released_once, wait_committed
from tests.integration.test_savepoints import rest_address

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


def test_a_savepoint_restored_at_another_parallelism(streaming_job: Any) -> None:
    """Stop with a savepoint at parallelism 2, the second half of the input, restore at parallelism 1.
    The input lies ahead of the clock (`ahead_origin`): its slots close by event time, all but the
    last."""
    slots, half = 20, 10
    origin = ahead_origin()
    job = make_job(streaming_job, "DPBD", {"origin": iso(origin), "flink": {"parallelism": 2}})
    events, requirements = generate(job.folder, users=30, slots=slots, dynamic=True, w=5, origin_ms=origin)
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=half)
    job.start(seed=SEED)
    job.wait_releases(half // 2, timeout=GUARD_S)
    savepoint = stop_with_savepoint(rest_address(job), job.folder / "savepoints")
    assert job.process is not None and job.process.wait(timeout=120) == 0, job.log_tail()
    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=half + 1)
    raw = yaml.safe_load(job.config_path.read_text())
    raw["flink"]["parallelism"] = 1
    job.config_path.write_text(yaml.safe_dump(raw))
    job.start(seed=SEED, restore=savepoint)
    released_once(job, events, requirements, slots - 1)


def retained_before(job: StreamingJob, stamp_ms: int) -> list[Path]:
    """The job's completed checkpoints triggered before `stamp_ms` whose folders are still there, oldest first."""
    history = job.rest().call(f"/jobs/{job.job_id}/checkpoints")["history"]
    found = [Path(c["external_path"].removeprefix("file:")) for c in sorted(history, key=lambda c: c["id"])
             if c["status"] == "COMPLETED" and c["trigger_timestamp"] < stamp_ms and c.get("external_path")]
    return [path for path in found if path.is_dir()]


def test_a_restore_from_an_older_checkpoint_is_refused(streaming_job: Any) -> None:
    """A retained checkpoint triggered before a slot's records were produced cannot hold its release;
    once that slot is committed, a restore from it is refused (exit 2, the topic unchanged), and
    `--restore latest` then continues as if nothing happened. The input lies ahead of the clock
    (`ahead_origin`): a slot is released once the next one's records come."""
    slots, first = 16, 8
    origin = ahead_origin()
    job = make_job(streaming_job, "PBD", {"origin": iso(origin), "flink": {"checkpoint_interval": "1500ms"}})
    events, requirements = generate(job.folder, users=25, slots=slots, w=5, origin_ms=origin)
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=first)
    job.start(seed=SEED)
    job.wait_releases(first - 1, timeout=GUARD_S)
    older: list[Path] = []
    slot = first
    while not older:  # until a retained checkpoint predates a committed slot (each round one slot more)
        assert slot < slots - 1, "no retained checkpoint older than a committed release"
        produced_ms = int(time.time() * 1000)
        slot += 1
        produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=slot, last_slot=slot)
        wait_committed(job, slot - 1)
        older = retained_before(job, produced_ms)
    job.stop()
    older = [path for path in older if path.is_dir()]
    assert older, "the older checkpoints went before the kill"
    older = older[-1:]  # the newest of them: it holds decided releases (an empty one meets the start guard)
    before = analyst_read(job.kafka, job.topics["releases"])
    print(f"\nrestoring {older[0]} (triggered before slot {slot} was produced; {len(before)} records on the topic)")
    restore = subprocess.Popen(job.command(seed=SEED, restore=str(older[0])), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=str(job.folder), start_new_session=True)
    try:
        _, stderr = restore.communicate(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(restore.pid, signal.SIGKILL)
        _, stderr = restore.communicate()
        pytest.fail(f"the restore from {older[0]} ran for {GUARD_S} s without refusing: {stderr[-3000:]}")
    assert restore.returncode == 2, stderr[-3000:]
    said = [line for line in stderr.splitlines() if "refusing to start:" in line]
    assert said and "older than the release topic" in said[0], stderr[-3000:]
    after = analyst_read(job.kafka, job.topics["releases"])
    assert [(m.key, m.value) for m in after] == [(m.key, m.value) for m in before]
    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=slot + 1)
    job.start(seed=SEED, restore="latest")
    released_once(job, events, requirements, slots - 1)
