"""Installed like a library (docs/streaming.md, "Installing from the wheel"): the wheel built as a user builds
it, `pip wheel .` in a fresh clone of this repository (its HEAD: what is committed) with pip's build
isolation, so from pyproject.toml's build requirements and a JDK alone, installed alone into a fresh venv
outside it, replays and audits without PyFlink and says how to install the extra `stream` for `pwevent run`;
with that extra installed by the command the message gives, it runs the job against the local broker from a
folder outside the checkout, and equals `pwevent replay`. The tests run in file order: the first sees the venv
before the extra is installed.

The connector jar is fetched the way an installed package fetches it (jobs/streaming/jars.py), and the build's
compile jars the way setup.py fetches them, from a Maven-layout folder standing in for Maven Central
(`$PWEVENT_MAVEN_REPOSITORY`), into a fresh user cache and the clone; the JVM classes come from the wheel; the
workers' Python files are a copy in the user state folder. pip resolves the dependencies as a user's would
(its cache makes it quicker, not different).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.streaming.jars import FLINK_AVRO, KAFKA_CONNECTOR, avro_jar, connector_jar
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import REPO, check_equals_replay, generate

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


def run(args: list[str], **kwargs: Any) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel_alone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(venv, wheel): the wheel of a fresh clone, built by `pip wheel .` in the clone, installed with its
    dependencies, no extra, into a fresh venv."""
    base = tmp_path_factory.mktemp("wheel")
    clone = base / "clone"
    run(["git", "clone", "-q", str(REPO), str(clone)])
    env = {**user_environment(base / "home", maven_repository(base / "maven", [connector_jar(), avro_jar()])),
           "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip")}  # quicker, not different
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(base / "dist"), "."], cwd=clone, env=env)
    (wheel,) = (base / "dist").glob("pwevent-*.whl")
    venv = base / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", str(wheel)])
    return venv, wheel


def run_without_stream(venv: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """`pwevent run` in the venv, for its message about the missing extra."""
    config = folder / "job.yaml"
    config.write_text("mechanism: PBD\nslot: 60s\norigin: 2024-01-01\ndomain: {type: binary}\n")
    return subprocess.run([str(venv / "bin" / "pwevent"), "run", "--config", str(config)], capture_output=True,
                          text=True, timeout=300, cwd=folder)


@pytest.fixture(scope="module")
def installed(wheel_alone: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(venv, wheel) with the extra `stream`, installed by the first command `pwevent run` gives."""
    venv, wheel = wheel_alone
    done = run_without_stream(venv, tmp_path_factory.mktemp("hint"))
    assert done.returncode == 2 and "extra `stream`" in done.stderr, done.stderr
    command = done.stderr.splitlines()[1].strip()
    run([*shlex.split(command), "-q", "--no-compile"])
    return wheel_alone


def test_the_wheel_alone_replays_and_audits_and_names_the_extra_for_the_job(
        wheel_alone: tuple[Path, Path], tmp_path: Path) -> None:
    venv, wheel = wheel_alone
    python, pwevent = str(venv / "bin" / "python"), str(venv / "bin" / "pwevent")
    assert subprocess.run([python, "-c", "import pyflink"], capture_output=True, timeout=120).returncode == 1
    env = user_environment(tmp_path / "home", tmp_path / "maven")
    run([pwevent, "generate", "--users", "20", "--slots", "4", "--out", "data"], cwd=tmp_path, env=env)
    config = run_without_stream(venv, tmp_path)
    files = ["--requirements", "data/requirements.jsonl", "--config", "job.yaml"]
    run([pwevent, "replay", "--quiet", "--events", "data/events.jsonl", "--releases-out", "releases.jsonl",
         "--spend-log", "spend.jsonl", "--through", "4", *files], cwd=tmp_path, env=env)
    run([pwevent, "audit", "--spend-log", "spend.jsonl", "--releases", "releases.jsonl", *files], cwd=tmp_path, env=env)

    assert config.returncode == 2, config.stderr
    hint = f"{shlex.quote(python)} -m pip install {shlex.quote(f'pwevent[stream] @ {wheel.as_uri()}')}"
    assert config.stderr.splitlines()[1].strip() == hint, config.stderr
    assert "apache-flink<2.3,>=2.2" in config.stderr and "Traceback" not in config.stderr


def maven_repository(folder: Path, jars: list[Path]) -> Path:
    """`folder` as a Maven repository holding `jars` (each one of the pinned jars, by its file name)."""
    for jar in jars:
        (pinned,) = (p for p in (KAFKA_CONNECTOR, FLINK_AVRO) if p.file_name == jar.name)
        target = Path(pinned.url(folder.as_uri()).removeprefix("file://"))
        target.parent.mkdir(parents=True)
        shutil.copyfile(jar, target)
    return folder


def user_environment(home: Path, maven: Path) -> dict[str, str]:
    """A user's environment: nothing of this checkout or its venv, fresh cache and state folders."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PWEVENT_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({"HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state"),
                "PWEVENT_MAVEN_REPOSITORY": maven.as_uri()})
    return env


def test_the_installed_wheel_runs_the_job_outside_the_checkout(installed: tuple[Path, Path], streaming_job: Any,
                                                               tmp_path: Path) -> None:
    venv, _ = installed
    maven = maven_repository(tmp_path / "maven", [connector_jar()])
    home = tmp_path / "home"
    env = user_environment(home, maven)
    python = str(venv / "bin" / "python")

    where = run([python, "-c", "import pwevent.jobs.streaming.locations as l; print(l.PACKAGE_ROOT, l.checkout())"],
                env=env, cwd=tmp_path).split()
    assert where[0].startswith(str(venv)) and where[1] == "None", where
    assert run([str(venv / "bin" / "pwevent"), "--version"], env=env).strip() == f"pwevent {version('pwevent')}"
    listed = run([str(venv / "bin" / "pwevent"), "examples", "--out", str(tmp_path / "ex")], env=env).split()
    assert {Path(p).name for p in listed} >= {"stream-pbd.yaml", "release.schema.json", "spend.schema.json"}

    job = streaming_job("PBD")
    job.pwevent, job.env = [str(venv / "bin" / "pwevent")], env
    events, requirements = generate(job.folder, users=30, slots=3)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start()
    check_equals_replay(job, events, requirements, slots=3)

    assert (home / "cache" / "pwevent" / "jars" / "flink" / KAFKA_CONNECTOR.file_name).is_file()
    copies = list((home / "state" / "pwevent" / "pyroot").glob("*/pwevent/jobs/streaming/job.py"))
    assert len(copies) == 1 and not any(p.is_symlink() for p in copies[0].parents[3].rglob("*"))
    site = next((venv / "lib").glob("python3.*/site-packages/pwevent"))
    assert not (site / ".run").exists() and not (site / ".cache").exists()
