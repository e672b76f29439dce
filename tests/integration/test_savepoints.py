"""Savepoints, upgrades and rescaling (docs/operations.md): `pwevent stop --savepoint` over Flink's
REST API and `pwevent run --restore`, on the local mini-cluster and on standalone session clusters
(deploy/local/flink-cluster.sh). The input arrives in two halves around the stop; every slot is
released exactly once, equal to the replay, and the spend log passes the full audit. Locally a
restore whose configuration changes a fingerprinted field is refused first, naming it
(test_cluster_submit.py: the same across session clusters, restored at another parallelism)."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from pwevent.jobs.common.slots import iso, parse_time_ms
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.job import TEST_RANDOMNESS_SWITCH
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    PWEVENT,
    SEED,
    ahead_origin,
    check_equals_replay,
    generate,
    run_folder,
    stop_with_savepoint,
)

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]

SLOTS = 12
HALF = 6


def listening_addresses(port: int) -> set[str]:
    """Local addresses of the sockets listening on `port` (/proc/net/tcp and tcp6, state 0A)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def test_local_run_stop_with_savepoint_and_restore(streaming_job: Any) -> None:
    """Half the input, a stop with a savepoint, the other half, a refused restore (a changed cap) and
    a restore. The input lies ahead of the clock (`ahead_origin`): its slots close by event time,
    all but the last."""
    origin = ahead_origin()
    job = streaming_job("PBA", {"origin": iso(origin)})
    events, requirements = generate(job.folder, users=30, slots=SLOTS, w=5, origin_ms=origin)
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=HALF)
    job.start(seed=SEED)
    said = re.search(r"web UI and REST API at http://(127\.0\.0\.1:(\d+)) \(loopback only\); Flink log in (\S+)",
                     job.log_tail())
    assert said, job.log_tail()
    rest, port, first_log = said.group(1), int(said.group(2)), Path(said.group(3))
    # 127.0.0.1 (IPv4, or IPv4-mapped in the IPv6 table) and nothing else
    assert listening_addresses(port) <= {"0100007F", "0000000000000000FFFF00000100007F"}, listening_addresses(port)
    assert listening_addresses(port)
    with urllib.request.urlopen(f"http://{rest}/jobs/overview", timeout=10) as answer:
        assert '"state":"RUNNING"' in answer.read().decode()
    job.wait_releases(3, timeout=180)

    savepoint = stop_with_savepoint(rest, job.folder / "savepoints")
    assert job.process is not None and job.process.wait(timeout=120) == 0, job.log_tail()
    job_id = (job.folder / "ready-1").read_text().strip()
    logged = {log.name: log.read_text(errors="replace") for log in first_log.glob("flink-*.log")}
    assert any(job_id in text for text in logged.values()), {name: len(text) for name, text in logged.items()}

    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=HALF + 1)

    # A changed cap: the Population refuses the state, naming the field (no restart: fail at once).
    changed = yaml.safe_load(job.config_path.read_text())
    changed["caps"]["max_w"] = 300
    changed["flink"]["restart_attempts"] = 0
    (job.folder / "changed.yaml").write_text(yaml.safe_dump(changed))
    refused = subprocess.run([*PWEVENT, "run", "--config", str(job.folder / "changed.yaml"), TEST_RANDOMNESS_SWITCH,
                              "--seed", str(SEED), "--restore", savepoint], capture_output=True, text=True,
                             timeout=600, cwd=job.folder)
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert "failed: restore refused: the configuration changed caps (caps: state has" in refused.stderr, \
        refused.stderr[-3000:]

    job.start(seed=SEED, restore=savepoint)
    second_log = run_folder(job.log_tail())
    assert second_log is not None and second_log != first_log
    check_equals_replay(job, events, requirements, SLOTS - 1)
    second = [log.read_text(errors="replace") for log in second_log.glob("flink-*.log")]
    assert second and not any(job_id in text for text in second)


def rest_address(job: Any) -> str:
    said = re.search(r"web UI and REST API at http://(127\.0\.0\.1:\d+)", job.log_tail())
    assert said, job.log_tail()
    return said.group(1)


def test_a_restore_switches_the_default_requirement_off_and_on(streaming_job: Any) -> None:
    """docs/streaming.md, "Users without a requirement record": three runs over one input, each
    restored from the savepoint of the one before, with `default_requirement` on (slots 1-4), off
    (5-8), on again (9-12). A user first seen while it is on is registered at that slot; while it is
    off the user's events are `unknown_user`; once it is on again, the user is registered at its first
    slot after the restore. The job equals the replay of the same events with those registrations as
    requirement records, and passes the full audit. Users u0-u9 declare records at slot 1. The
    input lies ahead of the clock (`ahead_origin`): each run's part is decided by its records, every
    slot but the last. A presence still pending at a savepoint (FirstPresence's epoch) needs
    parallelism above 1 to happen; tests/jobs/test_first_presence.py covers it."""
    default = {"w": 5, "epsilon": 1.0}
    origin = ahead_origin()
    job = streaming_job("PBD", {"origin": iso(origin), "default_requirement": default})
    events, generated = generate(job.folder, users=30, slots=SLOTS, w=5, origin_ms=origin)
    clock, fields = job.config.clock, job.config.events
    # u0-u9 from slot 1 with their records; u10-u29 first seen at slot 1 + (n - 10) % 12, every slot from then
    kept, seen = [], {}
    for line in Path(events).read_text().splitlines():
        record = json.loads(line)
        n, slot = int(record[fields.user].removeprefix("u")), clock.slot_of(parse_time_ms(record[fields.time]))
        if n < 10 or slot >= 1 + (n - 10) % SLOTS:
            kept.append(line)
            seen.setdefault(record[fields.user], set()).add(slot)
    Path(events).write_text("".join(f"{line}\n" for line in kept))
    declared = [line for line in Path(generated).read_text().splitlines()
                if int(json.loads(line)["user"].removeprefix("u")) < 10]
    requirements = job.folder / "declared.jsonl"
    requirements.write_text("".join(f"{line}\n" for line in declared))
    # what the three runs register by the default, as requirement records for the replay: a presence
    # registers its user when it is read with the default on and its slot is decided with it on. Each
    # run decides its part but the last slot (event time; the next part's records close it): run 1
    # (on) reads slots 1-4 and decides 1-3, run 2 (off) reads 5-8 and decides 4-7, run 3 (on) reads
    # 9-12 and decides 8-11
    registered: dict[str, int] = {}
    for user, slots in seen.items():
        on = sorted(s for s in slots if s <= 3 or s > 8)
        if int(user.removeprefix("u")) >= 10 and on:
            registered[user] = on[0]
    assert {1, 9} <= set(registered.values()) and not set(registered.values()) & {4, 5, 6, 7, 8}, registered
    expected_requirements = job.folder / "expected-requirements.jsonl"
    expected_requirements.write_text("".join(
        [f"{line}\n" for line in declared]
        + [json.dumps({"user": u, "time": iso(clock.start_ms(s)), **default}) + "\n"
           for u, s in sorted(registered.items(), key=lambda item: item[1])]))

    def run(first: int, last: int, with_default: bool, restore: str | None) -> str | None:
        raw = yaml.safe_load(job.config_path.read_text())
        raw.pop("default_requirement", None)
        if with_default:
            raw["default_requirement"] = default
        job.config_path.write_text(yaml.safe_dump(raw))
        produce_files(job.kafka, job.config, events, str(requirements), 0.0, first_slot=first, last_slot=last)
        job.start(seed=SEED, restore=restore)
        if last == SLOTS:
            return None
        job.wait_releases(last - 1, timeout=240)
        savepoint = stop_with_savepoint(rest_address(job), job.folder / f"savepoints-{first}")
        assert job.process is not None and job.process.wait(timeout=120) == 0, job.log_tail()
        return savepoint

    after_on = run(1, 4, True, None)
    after_off = run(5, 8, False, after_on)
    run(9, SLOTS, True, after_off)
    out = job.folder / "replay"
    out.mkdir()
    run_replay(job.config.model_copy(update={"default_requirement": None}), events, str(expected_requirements),
               str(out / "releases.jsonl"), str(out / "spend.jsonl"), rejects_out=str(out / "rejects.jsonl"),
               seed=SEED, through=SLOTS - 1)
    expected = {name: [json.loads(line) for line in (out / f"{name}.jsonl").read_text().splitlines()]
                for name in ("releases", "spend", "rejects")}
    assert any(r["reason"] == "unknown_user" for r in expected["rejects"])
    check_equals_replay(job, events, str(expected_requirements), SLOTS - 1, expected)


