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

from pwevent.jobs.common.files import iso
from pwevent.jobs.streaming.kafka_io import producer, read_topic
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    SEED,
    SLOT_MS,
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


def test_a_restore_after_the_whole_input_was_read_releases_on_schedule(streaming_job: Any) -> None:
    """The first run reads the whole input (slots 1-8 of a stream whose origin is 20 minutes ago)
    under a release delay of 15 minutes: event time releases slots 1-7 and the schedule has not
    reached slot 8. It is killed once checkpoints hold every record read, and restored with a delay
    of a second: no partition gives a record again, and every one is read through the backlog the
    restored job finds (its own read offsets say so, whatever the consumer groups committed), so the
    schedule releases slot 8 and the empty slots after it at once (docs/streaming.md, "Time"). Each
    slot once, equal to the replay."""
    slots = 8
    origin = time.time_ns() // 1_000_000 // SLOT_MS * SLOT_MS - 20 * SLOT_MS
    job = make_job(streaming_job, "PBA", {"origin": iso(origin),
                                          "flink": {"release_delay": "15m", "checkpoint_interval": "300ms"}})
    events, requirements = generate(job.folder, users=20, slots=slots, w=5, origin_ms=origin)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    job.wait_releases(slots - 1, timeout=240)
    job.wait_checkpoints(3)
    assert {m.json()["slot"] for m in job.read("releases")} == set(range(1, slots))
    job.stop()
    raw = yaml.safe_load(job.config_path.read_text())
    raw["flink"]["release_delay"] = "1s"
    job.config_path.write_text(yaml.safe_dump(raw))
    job.start(seed=SEED, restore="latest")
    began = time.monotonic()
    job.wait_releases(slots + 5, timeout=240)
    print(f"\nrestore at the end: slots {slots}-{slots + 4} {time.monotonic() - began:.1f} s after it ran")
    check_equals_replay(job, events, requirements, slots + 5, replay(job, events, requirements, slots + 5))


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
    for release in job.wait_releases(slots, timeout=180):
        if release["slot"] <= slots:
            assert release == expected["releases"][release["slot"] - 1]
    job.stop()
    last = max(m.json()["slot"] for m in job.read("releases"))  # the schedule went on until the stop
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
    releases = job.wait_releases(last + 2, timeout=180)  # the schedule's next slot (and the forged 99999)
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
