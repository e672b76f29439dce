"""The optional extras (jobs/common/extras.py; docs/architecture.md, "Dependencies"): without PyFlink
(the extra `stream`) every command but the streaming job works, and a command whose extra is missing
exits 2 with an install command that works for this installation (no index serves pwevent[...])."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Makes modules unimportable, as in an environment that lacks them, then runs the CLI once per
#: command line of argv[1] (JSON), stopping at the first exit code other than 0 and exiting with it.
BLOCKED = """import importlib.abc, json, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the test)", name=name)
        return None
sys.meta_path.insert(0, Blocked())
from pwevent.jobs.cli.main import main
for argv in json.loads(sys.argv[1]):
    code = main(argv)
    assert not {{m.split(".")[0] for m in sys.modules}} & {blocked!r}
    if code:
        sys.exit(code)
"""
CONFIG = "mechanism: PBD\nslot: 60s\norigin: 2024-01-01\ndomain: {type: binary}\n"


def pwevent_without(blocked: set[str], commands: list[list[str]], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`pwevent COMMAND` for each command in turn, in one fresh interpreter where the `blocked`
    packages cannot be imported; the exit code is the first one other than 0."""
    return subprocess.run([sys.executable, "-c", BLOCKED.format(blocked=blocked), json.dumps(commands)],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def test_without_pyflink_every_command_but_run_works(tmp_path: Path) -> None:
    """An install without the extra `stream` replays, audits, generates, evaluates and tests privacy;
    `pwevent run` says which extra it needs and how to install it (exit 2)."""
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG + "kafka: {bootstrap: '127.0.0.1:1'}\n")
    no_flink = {"pyflink", "py4j"}
    commands = [
        ["generate", "--users", "20", "--slots", "5", "--out", "data"],
        ["replay", "--quiet", "--config", str(config), "--events", "data/events.jsonl", "--requirements",
         "data/requirements.jsonl", "--releases-out", "releases.jsonl", "--spend-log", "spend.jsonl", "--through", "5"],
        ["audit", "--spend-log", "spend.jsonl", "--requirements", "data/requirements.jsonl", "--releases",
         "releases.jsonl", "--config", str(config)],
        ["demo", "--users", "30", "--slots", "10", "--out", "demo"],
        ["evaluate", "--datasets", "Sin", "--mechanisms", "PBD", "--epsilons", "1.0", "--windows", "40",
         "--ratios", "0.1", "--reps", "1", "--users", "20", "--slots", "10", "--workers", "1", "--out", "eval",
         "--quiet"],
        ["privacy-test", "--mechanisms", "PBD", "--runs", "50", "--selection-runs", "20", "--users", "5", "--quiet"],
    ]
    done = pwevent_without(no_flink, commands, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len((tmp_path / "releases.jsonl").read_text().splitlines()) == 5
    assert (tmp_path / "eval" / "summary.md").is_file()

    done = pwevent_without(no_flink, [["run", "--config", str(config)]], cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith("pwevent: pwevent run runs the streaming job on PyFlink (apache-flink): install "
                                  "the optional extra `stream` (no package index serves pwevent[stream]):")
    assert "Traceback" not in done.stderr
    # This test's installation is the checkout's editable one (deploy/local/setup.sh): the hint installs
    # the extra from the checkout, or the extra's requirements alone.
    python = shlex.quote(sys.executable)
    assert f"{python} -m pip install -e {shlex.quote(f'{REPO}[stream]')}" in done.stderr
    assert f"{python} -m pip install 'apache-flink<2.3,>=2.2'" in done.stderr


def test_evaluate_without_matplotlib_says_how_to_install_its_extra(tmp_path: Path) -> None:
    done = pwevent_without({"matplotlib"}, [["evaluate", "--out", str(tmp_path / "out")]], cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "install the optional extra `evaluate` (no package index serves pwevent[evaluate])" in done.stderr
    assert f"-m pip install -e {shlex.quote(f'{REPO}[evaluate]')}" in done.stderr
    assert "-m pip install 'matplotlib>=3.8'" in done.stderr
    assert "pip install 'pwevent[evaluate]'" not in done.stderr  # what no index serves
    assert not (tmp_path / "out").exists()

