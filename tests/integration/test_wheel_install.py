"""Installed like a library (docs/streaming.md, "Installing from the wheel"): the wheel built from this
checkout, installed into a fresh venv outside it, runs the job against the local broker from a folder
outside the checkout, and equals `pwevent replay`.

The connector jar is fetched the way an installed package fetches it (jobs/streaming/jars.py), from a
Maven-layout folder standing in for Maven Central (`$PWEVENT_MAVEN_REPOSITORY`), into a fresh user
cache; the JVM classes come from the wheel; the workers' Python files are a copy in the user state
folder. pip resolves the dependencies as a user's would (its cache makes it quicker, not different).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.streaming.jars import KAFKA_CONNECTOR, connector_jar
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import REPO, check_equals_replay, generate

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


def run(args: list[str], **kwargs: Any) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(venv, wheel): the wheel of this checkout installed with its dependencies into a fresh venv."""
    base = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(base / "dist"),
         str(REPO)])
    (wheel,) = (base / "dist").glob("pwevent-*.whl")
    venv = base / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", str(wheel)])
    return venv, wheel


def user_environment(home: Path, maven: Path) -> dict[str, str]:
    """A user's environment: nothing of this checkout or its venv, fresh cache and state folders."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PWEVENT_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state"),
                "PWEVENT_MAVEN_REPOSITORY": maven.as_uri()})
    return env


def test_the_installed_wheel_runs_the_job_outside_the_checkout(installed: tuple[Path, Path], streaming_job: Any,
                                                               tmp_path: Path) -> None:
    venv, _ = installed
    maven = tmp_path / "maven"
    jar = Path(KAFKA_CONNECTOR.url(maven.as_uri()).removeprefix("file://"))
    jar.parent.mkdir(parents=True)
    shutil.copyfile(connector_jar(), jar)
    home = tmp_path / "home"
    env = user_environment(home, maven)
    python = str(venv / "bin" / "python")

    where = run([python, "-c", "import pwevent.jobs.streaming.locations as l; print(l.PACKAGE_ROOT, l.checkout())"],
                env=env, cwd=tmp_path).split()
    assert where[0].startswith(str(venv)) and where[1] == "None", where
    assert run([str(venv / "bin" / "pwevent"), "--version"], env=env).strip() == "pwevent 0.1.0"
    listed = run([str(venv / "bin" / "pwevent"), "examples", "--out", str(tmp_path / "ex")], env=env).split()
    assert {Path(p).name for p in listed} >= {"stream-pbd.yaml", "release.schema.json", "spend.schema.json"}

    job = streaming_job("PBD", {"flink": {"close_after": "1s", "source_idleness": "3s"}})
    job.pwevent, job.env = [str(venv / "bin" / "pwevent")], env
    events, requirements = generate(job.folder, users=30, slots=3)
    job.start()
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    check_equals_replay(job, events, requirements, slots=3)

    assert (home / "cache" / "pwevent" / "jars" / "flink" / KAFKA_CONNECTOR.file_name).is_file()
    copies = list((home / "state" / "pwevent" / "pyroot").glob("*/pwevent/jobs/streaming/job.py"))
    assert len(copies) == 1 and not any(p.is_symlink() for p in copies[0].parents[3].rglob("*"))
    site = next((venv / "lib").glob("python3.*/site-packages/pwevent"))
    assert not (site / ".run").exists() and not (site / ".cache").exists()
