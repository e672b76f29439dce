"""Only the build step pyproject.toml cannot declare: the wheel carries the job's JVM classes compiled
(docs/architecture.md, "Dependencies", says why), built by deploy/local/build-jvm.sh into the wheel's
copy of pwevent/jobs/streaming/jvm/pwevent-jvm.jar (never into the source tree). The classes compile
against the build environment's PyFlink (pyproject.toml's [build-system] requires it), the Kafka
connector and Flink's Avro jar, which this step downloads first (jobs/streaming/maven_jars.py, from
Maven Central or $PWEVENT_MAVEN_REPOSITORY) into the jar cache deploy/local/build-jvm.sh reads: a
clean checkout builds with javac 17+ and network access alone. An editable install skips it: a
checkout compiles on first use (jobs/streaming/jars.py)."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def fetch_compile_jars(cache: Path) -> None:
    """The connector and Avro jars the JVM classes compile against, into `cache`/flink."""
    spec = importlib.util.spec_from_file_location("pwevent_maven_jars", HERE / "jobs" / "streaming" / "maven_jars.py")
    assert spec is not None and spec.loader is not None
    maven = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = maven  # dataclasses look their module up by name
    spec.loader.exec_module(maven)
    repository = os.environ.get("PWEVENT_MAVEN_REPOSITORY") or maven.MAVEN_CENTRAL
    for jar in (maven.KAFKA_CONNECTOR, maven.FLINK_AVRO):
        maven.download(jar, cache / "flink", repository)


class BuildPyWithJvmClasses(build_py):
    def run(self) -> None:
        if not self.editable_mode:  # setuptools keeps build/lib between builds: a deleted module must not ship
            shutil.rmtree(Path(self.build_lib) / "pwevent", ignore_errors=True)
        super().run()
        if self.editable_mode:
            return
        cache = Path(os.environ.get("PWEVENT_CACHE") or HERE / ".cache" / "jars")
        fetch_compile_jars(cache)
        built = subprocess.run(["bash", str(HERE / "deploy" / "local" / "build-jvm.sh")], capture_output=True,
                               text=True, env={**os.environ, "PWEVENT_CACHE": str(cache),
                                               "PWEVENT_VENV_PYTHON": sys.executable})
        if built.returncode != 0:
            raise SystemExit(f"pwevent wheel: deploy/local/build-jvm.sh failed (it needs javac 17+):\n{built.stderr}")
        target = Path(self.build_lib) / "pwevent" / "jobs" / "streaming" / "jvm" / "pwevent-jvm.jar"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built.stdout.strip().splitlines()[-1], target)


setup(cmdclass={"build_py": BuildPyWithJvmClasses})
