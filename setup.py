"""Only the build step pyproject.toml cannot declare: the wheel carries the job's JVM classes compiled
(docs/architecture.md, "Dependencies", says why), built by deploy/local/build-jvm.sh into the wheel's
copy of pwevent/jobs/streaming/jvm/pwevent-jvm.jar (never into the source tree). An editable install
skips it: a checkout compiles on first use (jobs/streaming/jars.py)."""

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithJvmClasses(build_py):
    def run(self) -> None:
        if not self.editable_mode:  # setuptools keeps build/lib between builds: a deleted module must not ship
            shutil.rmtree(Path(self.build_lib) / "pwevent", ignore_errors=True)
        super().run()
        if self.editable_mode:
            return
        built = subprocess.run(["bash", str(HERE / "deploy" / "local" / "build-jvm.sh")], capture_output=True,
                               text=True)
        if built.returncode != 0:
            raise SystemExit("pwevent wheel: deploy/local/build-jvm.sh failed (run deploy/local/setup.sh first; "
                             f"it needs javac 17+):\n{built.stderr}")
        target = Path(self.build_lib) / "pwevent" / "jobs" / "streaming" / "jvm" / "pwevent-jvm.jar"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built.stdout.strip().splitlines()[-1], target)


setup(cmdclass={"build_py": BuildPyWithJvmClasses})
