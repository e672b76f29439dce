"""The refusal to start twice under high availability (docs/streaming.md, "Starting twice"): the
cluster entry point (jobs/streaming/job.py `main`, as the Kubernetes operator runs it) treats an HA
cluster as one that recovers its state and checks nothing itself; with HA on and no HA metadata
(a `kubectl delete` and re-apply) the job starts without state, and its Population refuses.

HA here is ZooKeeper's (high-availability.type: zookeeper, through flink.extra), served on loopback
by the ZooKeeper that Flink's own distribution carries (FlinkZooKeeperQuorumPeer in flink-dist, what
bin/zookeeper.sh starts), with an empty data folder: no HA metadata. The entry point runs under
`flink run -t local` (Flink's CLI with a local mini-cluster) with the command `--print-submit` prints
for the configuration (`submit_command`), here with the seed and the test switch, which `--print-submit`
itself refuses to print (docs/streaming.md, "Test randomness").
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sysconfig
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyflink
import pytest
import yaml

from pwevent.jobs.streaming.job import submit_command
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import SEED, generate

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


@contextmanager
def zookeeper(folder: Path) -> Iterator[str]:
    """A one-node ZooKeeper on 127.0.0.1 with an empty data folder, stopped by its pid; yields host:port."""
    port = free_loopback_port()
    (folder / "data").mkdir(parents=True)
    config = folder / "zoo.cfg"
    config.write_text(f"tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir={folder / 'data'}\nclientPort={port}\n"
                      "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n")
    lib = Path(pyflink.__file__).parent / "lib"
    classpath = ":".join(str(p) for p in [*lib.glob("flink-dist-*.jar"), *lib.glob("log4j-*.jar")])
    with open(folder / "zookeeper.log", "wb") as log:
        server = subprocess.Popen(["java", "-Xmx128m", "-cp", classpath,
                                   "org.apache.flink.runtime.zookeeper.FlinkZooKeeperQuorumPeer",
                                   "--zkConfigFile", str(config), "--peerId", "1"],
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, (folder / "zookeeper.log").read_text()[-3000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "ZooKeeper did not listen in time"
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_ha_without_ha_metadata_over_releases_is_refused_by_the_population(streaming_job: Any,
                                                                           tmp_path: Path) -> None:
    slots = 4
    job = streaming_job("PBD")
    events, requirements = generate(job.folder, users=10, slots=slots)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    job.wait_releases(slots, timeout=180)
    job.stop()
    before = [m.json() for m in job.read("releases", idle_s=1.0)]  # the schedule went on until the stop

    with zookeeper(tmp_path / "zookeeper") as quorum:
        raw = yaml.safe_load(job.config_path.read_text())
        raw["flink"].update({"restart_attempts": 1, "restart_delay": "0s", "extra": {
            "high-availability.type": "zookeeper", "high-availability.zookeeper.quorum": quorum,
            "high-availability.storageDir": (tmp_path / "ha").as_uri()}})
        job.config_path.write_text(yaml.safe_dump(raw))
        words = shlex.split(submit_command(str(job.config_path), seed=SEED))
        environment = dict(word.split("=", 1) for word in words[:2])  # FLINK_HOME=... PYTHONPATH=...
        # thread mode in the CLI's own mini-cluster: the venv's site-packages (pemja), as make_environment adds
        environment["PYTHONPATH"] += os.pathsep + sysconfig.get_paths()["purelib"]
        environment["FLINK_LOG_DIR"] = str(tmp_path / "flink-log")
        command = words[2:]
        command[command.index("-d")] = "-t"
        command.insert(command.index("-t") + 1, "local")  # attached, on a local mini-cluster
        with open(tmp_path / "entry-point.log", "wb") as log:
            entry = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=str(job.folder),
                                     env={**os.environ, **environment}, start_new_session=True)
        try:  # until it ends, or releases a slot again (a job the guard let through never ends)
            deadline = time.monotonic() + 400
            while entry.poll() is None and len(job.read("releases", idle_s=0.5)) == len(before):
                assert time.monotonic() < deadline, "the entry point neither ended nor released"
                time.sleep(1.0)
        finally:
            if entry.poll() is None:
                os.killpg(entry.pid, signal.SIGKILL)  # the group of the process we started
                entry.wait(timeout=60)
    output = (tmp_path / "entry-point.log").read_text(errors="replace")
    assert "Job has been submitted" in output, output[-3000:]  # the entry point saw HA and checked nothing
    assert entry.returncode != 0, output[-3000:]
    assert f"refusing to start: topic {job.topics['releases']} already holds releases up to slot" in output, \
        output[-5000:]
    assert "kafka.resume_after_last_release: true" in output
    after = [m.json() for m in job.read("releases", idle_s=1.0)]
    assert Counter(r["slot"] for r in after) == Counter(r["slot"] for r in before)  # nothing released again
