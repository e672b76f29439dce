"""Restarts of the streaming job (docs/streaming.md, "Starting twice"; docs/operations.md): a kill and
a restore from the latest checkpoint mid-backlog, a restore after the whole input was read, and a
start without state over a release topic that already holds releases."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from typing import Any

import pytest
import yaml

from pwevent.jobs.streaming.kafka_io import producer, read_to_end, read_topic
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    SEED,
    check_equals_replay,
    cpu_burner,
    generate,
    make_job,
    replay,
    run_folder,
)
from tests.integration.test_metrics import scrape, total

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


def test_kill_and_restore_mid_backlog_longer_than_the_windows(streaming_job: Any) -> None:
    """SIGKILL mid-backlog (30 slots, windows of 5), restore from the latest checkpoint: every slot
    exactly once (read_committed), equal to the replay, spend log equal and audited."""
    slots = 30
    job = make_job(streaming_job, "PBA", {"flink": {"checkpoint_interval": "300ms"}})
    events, requirements = generate(job.folder, users=30, slots=slots, w=5)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    with cpu_burner():
        job.start(seed=SEED)
        job.wait_releases(6, timeout=180)
        job.stop()  # SIGKILL: no savepoint, open transactions left behind
        job.start(seed=SEED, restore="latest")
        check_equals_replay(job, events, requirements, slots)
    restored = [line for line in (job.folder / "job-2.log").read_text().splitlines() if "restoring from" in line]
    assert restored and "chk-" in restored[0], restored
    killed = job.run_folders()[0] / "tmp"  # the killed JVM's temporary files stay in its run's folder, not in /tmp
    assert list(killed.glob("flink-table-planner_*.jar")), list(killed.iterdir())
    assert list(killed.glob("flink-rpc-*.jar")), list(killed.iterdir())
    raw = read_topic(job.kafka, job.topics["releases"], committed=False)
    repeated = sum(n - 1 for n in Counter(json.loads(m.value)["slot"] for m in raw).values())
    print(f"\nkill/restore: read_uncommitted sees {len(raw)} releases ({repeated} aborted by the restore)")


def test_a_restore_after_the_whole_input_was_read_closes_the_last_slot(streaming_job: Any) -> None:
    """The first run reads the whole input but cannot close the last slot (close_after off); it is
    killed once its sources' consumer groups have committed every partition's end (which the sources
    do for completed checkpoints only), so the checkpoint it is restored from holds readers at the
    end of every partition. Restored with close_after on, no
    partition gives a record again, and none remembers its latest time: without the restore seed
    (docs/streaming.md, "Time") the last slot was never released. The restore runs with a start grace
    and an idleness of an hour: its readers have nothing left to read (the groups' committed offsets
    are at every partition's end), so no partition waits for either (before, the last slot was not
    released within 600 s)."""
    slots = 8
    job = make_job(streaming_job, "PBA", {"flink": {"close_after": "0", "checkpoint_interval": "300ms",
                                                    "source_start_grace": "2s"}})
    events, requirements = generate(job.folder, users=20, slots=slots, w=5)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    job.wait_releases(slots - 1, timeout=240)
    deadline = time.monotonic() + 120  # a guard against a hang, not a measured duration
    while not all(read_to_end(job.kafka, job.topics[role], job.kafka.source_group_id(role), 100)
                  for role in ("events", "requirements")):
        assert job.alive() and time.monotonic() < deadline, job.log_tail()
        time.sleep(0.5)
    job.stop()
    raw = yaml.safe_load(job.config_path.read_text())
    raw["flink"].update({"close_after": "1s", "source_start_grace": "1h", "source_idleness": "1h"})
    job.config_path.write_text(yaml.safe_dump(raw))
    job.start(seed=SEED, restore="latest")
    began = time.monotonic()
    job.wait_releases(slots, timeout=600)
    print(f"\nrestore at the end: the last slot {time.monotonic() - began:.1f} s after the restored job ran")
    check_equals_replay(job, events, requirements, slots)
    assert "readers have nothing left to read" in (job.folder / "job-2.log").read_text()


def test_no_second_life_without_state(streaming_job: Any) -> None:
    """A job started without state against a release topic that holds releases is refused by its
    Population (the job fails, `pwevent run` exits 2 naming the slot); with
    kafka.resume_after_last_release it continues after the last release the audit topic confirms,
    each slot once. A forged release keyed 99999 moves neither the refusal's slot nor the resume
    point. Re-read from the earliest offset, every event of a decided slot is a `late` dead letter,
    counted in the metrics (docs/streaming.md, "Starting twice")."""
    slots = 6
    port = free_loopback_port()
    job = make_job(streaming_job, "PBD", {"flink": {"restart_attempts": 1, "restart_delay": "0s",
                                                    "prometheus": {"port": str(port)}}})
    events, requirements = generate(job.folder, users=20, slots=slots + 4)
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=slots)
    job.start(seed=SEED)
    expected = replay(job, events, requirements, slots)
    first = job.wait_releases(slots, timeout=180)
    for release in first:
        assert release == expected["releases"][release["slot"] - 1]
    job.stop()
    last = max(r["slot"] for r in first)
    forged = producer(job.kafka)
    forged.send(job.topics["releases"], key=b"99999",
                value=json.dumps({"slot": 99999, "kind": "publish", "counts": [7, 7]}).encode())
    forged.flush()
    forged.close()

    # The refusal fails the job on its first attempt: a failover restart that restores a checkpoint
    # taken after the readers reached the end of the topics would wait for new records before its
    # Population checks again (docs/operations.md, "Refused start").
    raw = yaml.safe_load(job.config_path.read_text())
    raw["flink"]["restart_attempts"] = 0
    job.config_path.write_text(yaml.safe_dump(raw))
    refused = subprocess.run([*job.command(seed=SEED)], capture_output=True, text=True, timeout=300,
                             cwd=str(job.folder))
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert f"refusing to start: topic {job.topics['releases']} already holds releases up to slot 99999 (the " \
           f"audit topic confirms up to slot {last})" in refused.stderr, refused.stderr[-3000:]
    assert f"kafka.resume_after_last_release: true (--resume-after-last-release on the command line) to " \
           f"continue after slot {last} with" in refused.stderr
    folder = run_folder(refused.stderr)  # a run that ends removes its temporary files
    assert folder is not None and folder.is_dir() and not (folder / "tmp").exists()

    raw = yaml.safe_load(job.config_path.read_text())
    raw["kafka"]["resume_after_last_release"] = True  # the configuration, as under the Kubernetes operator
    job.config_path.write_text(yaml.safe_dump(raw))
    job.start(seed=SEED)
    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=slots + 1)
    releases = job.wait_releases(slots + 4, timeout=180)
    counted = Counter(r["slot"] for r in releases if r.get("mechanism"))
    assert all(n == 1 for n in counted.values()), counted
    assert set(counted) >= set(range(1, slots + 4)) and min(s for s in counted if s > last) == last + 1

    decided = {(m.partition, m.offset) for m in job.read("events")
               if job.config.clock.slot_of(json.loads(m.value)["time"]) <= last}
    assert len(decided) > 100
    late = [d for d in (m.json() for m in job.read("dead_letters", idle_s=1.0)) if d["reason"] == "late"]
    assert {(d["position"]["partition"], d["position"]["offset"]) for d in late} == decided
    assert len(late) == len(decided)
    assert all(d["detail"].endswith(f"was decided before this job resumed after slot {last}") for d in late)
    deadline = time.monotonic() + 60  # the counters run ahead of the committed dead letters, never behind
    while total(scrape(port), "late_records") < len(decided) and time.monotonic() < deadline:
        time.sleep(1.0)
    metrics = scrape(port)
    assert total(metrics, "late_records") == len(decided)
    assert total(metrics, "reason_dead_letters", reason="late") == len(decided)

    job.stop(signal.SIGTERM)  # (the process group, as a service manager stops it)
    assert job.process_code == 128 + signal.SIGTERM
    assert not (job.run_folders()[-1] / "tmp").exists()  # a stopped run removes its temporary files
