"""Upgrades (docs/operations.md, "Savepoints, upgrades and rescaling"): a savepoint of the job as an
earlier release of pwevent ran it, restored by this checkout's job. The input arrives in two halves
around the stop; every slot is released once, equal to the replay of the whole input by this
checkout, with the replay's spend log and a full audit, and no dead letters; under PBA, Adaptive
(switching families) and PBD with a default requirement (most users registered at their first
event). The users registered before the stop are known after the restore: the second half is written
slot by slot and each slot is released once the next one's events are in, while the events source is
busy (its idleness, after which time would follow the requirements' instead, is 300 s).

Opt-in: PWEVENT_UPGRADE_FROM names the Python of an installation of the earlier release (a clone at
that commit set up by deploy/local/setup.sh: `<clone>/.venv/bin/python`); CI installs no earlier
release, so it skips there. Before a release, run it against the last one:

    PWEVENT_UPGRADE_FROM=<clone>/.venv/bin/python .venv/bin/python -m pytest tests/integration/test_upgrade.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pwevent.jobs.common.files import iso
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    PWEVENT,
    QUICK_SWITCH,
    SEED,
    TEST_RANDOMNESS_SWITCH,
    ahead_origin,
    check_equals_replay,
    generate,
    replay,
    stop_with_savepoint,
)

EARLIER = os.environ.get("PWEVENT_UPGRADE_FROM")

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow,
              pytest.mark.skipif(not EARLIER, reason="PWEVENT_UPGRADE_FROM names an earlier release's Python")]

SLOTS = 12
HALF = 6
#: The time settings of an earlier release without the release schedule (before 0.2.0): slots close
#: 1 s after their partition's last valid event; a source goes idle only after 300 s. This release
#: refuses them, so its run gets the configuration without them and with the schedule.
BUSY_SOURCE = {"close_after": "1s", "source_idleness": "300s"}


#: With a default requirement only users u0-u9 declare one; the others are registered at their first
#: event (FirstPresence, Membership's default), in both halves.
DEFAULT = {"default_requirement": {"w": 5, "epsilon": 1.0}}


#: Adaptive as releases before bursts ran it (even spending first): the earlier release runs the
#: first half, this checkout's replay the whole input, so both must start alike. A restored job
#: continues in the family its state names, whatever `start` says. Without `level_margin`, which
#: earlier releases do not know (only a probe's level test reads it).
EVEN_FIRST = {"adaptive": {**{key: value for key, value in QUICK_SWITCH["adaptive"].items()
                              if key != "level_margin"}, "start": "Uniform"}}
#: Adaptive's users all at one budget: release version 4 chose a rescaled release's threshold for the
#: mean cell, where version 3 (0.2.0) chose it for the worst case (docs/mechanisms.md section 14, "The
#: mean cell"); at one budget level both choose alike, so this checkout's replay is the earlier
#: release's first half too.
ONE_LEVEL = 0.6


def knows_the_schedule(pwevent: list[str]) -> bool:
    """Whether the earlier release has the release schedule (its configuration schema names
    `release_delay`): it then runs this release's configuration as it is."""
    schema = subprocess.run([*pwevent, "config-schema"], capture_output=True, text=True, timeout=120).stdout
    return '"release_delay"' in schema


def earlier_test_switches(pwevent: list[str]) -> list[str]:
    """The test switch, for an earlier release that knows it (`run --help` names it); none before it."""
    usage = subprocess.run([*pwevent, "run", "--help"], capture_output=True, text=True, timeout=120).stdout
    return [TEST_RANDOMNESS_SWITCH] if TEST_RANDOMNESS_SWITCH in usage else []


@pytest.mark.parametrize(("mechanism", "extra"), [("PBA", {}), ("Adaptive", EVEN_FIRST), ("PBD", DEFAULT)])
def test_a_savepoint_of_an_earlier_release_restores(streaming_job: Any, mechanism: str,
                                                    extra: dict[str, Any]) -> None:
    """The earlier release's releases keep their schema_version (3 for 0.2.0), the restored job's are of
    this one's: the audit reads each as its version says."""
    assert EARLIER is not None
    origin = ahead_origin()  # the input lies ahead of the clock: its slots close by event time, all but the last
    job = streaming_job(mechanism, {"origin": iso(origin), **extra})
    raw = yaml.safe_load(job.config_path.read_text())
    earlier_pwevent = [EARLIER, "-m", "pwevent.jobs.cli.main"]
    if not knows_the_schedule(earlier_pwevent):
        flink = {key: value for key, value in raw["flink"].items() if key != "release_delay"}
        job.config_path.write_text(yaml.safe_dump({**raw, "flink": {**flink, **BUSY_SOURCE}}))
    events, requirements = generate(job.folder, users=30, slots=SLOTS, w=5, origin_ms=origin)
    if "default_requirement" in extra:
        declared = [line for line in Path(requirements).read_text().splitlines()
                    if int(json.loads(line)["user"].removeprefix("u")) < 10]
        Path(requirements).write_text("".join(f"{line}\n" for line in declared))
    if mechanism == "Adaptive":
        lines = [json.loads(line) for line in Path(requirements).read_text().splitlines()]
        Path(requirements).write_text("".join(json.dumps({**r, "epsilon": ONE_LEVEL}) + "\n" for r in lines))
    produce_files(job.kafka, job.config, events, requirements, 0.0, last_slot=HALF)
    job.pwevent = earlier_pwevent
    job.test_switches = earlier_test_switches(job.pwevent)
    job.start(seed=SEED)
    job.wait_releases(3, timeout=180)
    said = re.search(r"REST API at http://(\S+)", job.log_tail())
    assert said, job.log_tail()
    savepoint = stop_with_savepoint(said.group(1), job.folder / "savepoints")
    assert job.process is not None and job.process.wait(timeout=120) == 0, job.log_tail()
    earlier = max(m.json()["slot"] for m in job.read("releases"))
    versions = {m.json().get("schema_version") for m in job.read("releases")}
    assert len(versions) == 1, versions
    expected = replay(job, events, requirements, SLOTS - 1)
    written = next(iter(versions))
    for release in expected["releases"]:  # the earlier release wrote its own version (absent: 1)
        if release["slot"] <= earlier:
            release.pop("schema_version")
            release.update({} if written is None else {"schema_version": written})
    # Releases before the noise label wrote spend lines without it (docs/mechanisms.md, `noise_label`).
    labelled = any("noise" in m.json() for m in job.read("audit") if m.json().get("record") == "spend")
    for line in expected["spend"]:
        if line.get("record") == "spend" and line["slot"] <= earlier and not labelled:
            line.pop("noise")
    # Releases before the budget in view wrote no utilisation records (docs/formats.md, "Spend log"): the
    # restored job writes them from its first slot on, which the audit accepts (an upgraded log).
    viewed = any(m.json().get("record") == "utilisation" for m in job.read("audit"))
    expected["spend"] = [line for line in expected["spend"]
                         if viewed or line.get("record") != "utilisation" or line["slot"] > earlier]

    job.pwevent, job.test_switches = PWEVENT, [TEST_RANDOMNESS_SWITCH]
    job.config_path.write_text(yaml.safe_dump(raw))
    # The SQL sinks of the releases (before ReleaseWriter) and of the spend lines (before they went
    # with the releases) have no place in this graph: their state, committed by the stop, is dropped.
    job.start(seed=SEED, restore=savepoint, extra_args=["--allow-non-restored-state"])

    def released_before(slot: int, _: float) -> None:
        if slot > HALF + 1:  # the slot before is released by the time the events of this one moved on
            job.wait_releases(slot - 1, timeout=60)

    produce_files(job.kafka, job.config, events, requirements, 0.0, first_slot=HALF + 1, on_slot=released_before)
    check_equals_replay(job, events, requirements, SLOTS - 1, expected)
    assert job.read("dead_letters") == []
