"""What a newcomer sees from the CLI (docs/streaming.md and README.md, "Exit codes"): a version, the
packaged examples, clear messages and distinct exit codes instead of tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.config import load_config, parse_config
from pwevent.jobs.streaming.settings import stream_settings

PWEVENT = [sys.executable, "-m", "pwevent.jobs.cli.main"]
CONFIG = "mechanism: PBD\nslot: 60s\norigin: 2024-01-01\ndomain: {type: binary}\n"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"pwevent {version('pwevent')}"


def test_examples_are_copied_valid_and_never_overwritten(tmp_path: Path) -> None:
    assert main(["examples", "--out", str(tmp_path)]) == 0
    configs = sorted((tmp_path / "examples").glob("*.yaml"))
    assert {p.name for p in configs} >= {"replay-pbd.yaml", "stream-pbd.yaml"}
    for path in configs:
        stream_settings(load_config(str(path)), str(path.parent))  # every section valid
    for path in (tmp_path / "schemas").glob("*.json"):
        assert json.loads(path.read_text())["$schema"].startswith("https://json-schema.org/")
    (tmp_path / "examples" / "stream-pbd.yaml").write_text("mine")
    assert main(["examples", "--out", str(tmp_path)]) == 2
    assert (tmp_path / "examples" / "stream-pbd.yaml").read_text() == "mine"


def spend_log(tmp_path: Path, slot: int) -> Path:
    path = tmp_path / "spend.jsonl"
    lines = [{"record": "ledger", "ledger": "a", "parent": None, "since": 1, "requirement": {"w": 2, "epsilon": 1.0}},
             {"record": "spend", "ledger": "a", "slot": 1, "calculation": 0.1, "publication": 0.0},
             {"record": "spend", "ledger": "a", "slot": slot, "calculation": 0.1, "publication": 0.0}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("slot", [2**70, 2**52])
def test_a_corrupt_spend_log_is_exit_2_with_a_message_not_a_traceback(tmp_path: Path, slot: int) -> None:
    done = subprocess.run([*PWEVENT, "audit", "--spend-log", str(spend_log(tmp_path, slot))], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "cannot audit" in done.stderr and "Traceback" not in done.stderr


def test_an_unreachable_broker_is_a_message_and_exit_4_within_the_timeout(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG + "kafka: {bootstrap: '127.0.0.1:1'}\n")  # port 1 on loopback: refused
    done = subprocess.run([*PWEVENT, "tail", "--config", str(config), "--timeout", "1"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 4, done.stderr
    assert "no Kafka broker answered at 127.0.0.1:1 within 1 s" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""  # no table header for a table that will never come


def test_produce_to_an_unreachable_broker_gives_up_within_its_timeout(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG + "kafka: {bootstrap: '127.0.0.1:1'}\n")
    events, requirements = tmp_path / "e.jsonl", tmp_path / "r.jsonl"
    events.write_text('{"user": "u1", "time": "2024-01-01T00:00:00Z", "value": 1}\n')
    requirements.write_text('{"user": "u1", "time": "2024-01-01T00:00:00Z", "w": 5, "epsilon": 1.0}\n')
    done = subprocess.run([*PWEVENT, "produce", "--config", str(config), "--events", str(events), "--requirements",
                           str(requirements), "--timeout", "2s"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 4, done.stderr
    # the connection waited --timeout, not kafka-python's 30 s
    assert "no Kafka broker answered at 127.0.0.1:1 within 2 s" in done.stderr and "Traceback" not in done.stderr


def test_replay_reports_progress_while_reading(tmp_path: Path) -> None:
    from pwevent.jobs.common.files import write_synthetic
    from pwevent.jobs.common.synthetic import SyntheticStream
    from pwevent.jobs.offline.replay import run_replay

    events, requirements = write_synthetic(SyntheticStream("Sin", 20, 5, 1), str(tmp_path), 0.6, 40, 60_000)
    seen: list[tuple[int, int, str]] = []
    config = parse_config({"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z",
                           "domain": {"type": "binary"}})
    run_replay(config, str(events), str(requirements), str(tmp_path / "r.jsonl"), str(tmp_path / "s.jsonl"),
               seed=1, progress=lambda done, total, what: seen.append((done, total, what)))
    whats = [what for _, _, what in seen]
    assert whats.index("reading requirements (MB)") < whats.index("reading events (MB)") < whats.index("slot")
    assert seen[-1] == (5, 5, "slot")


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A valid configuration's replay: its input and output files, for commands that read them."""
    from pwevent.jobs.common.files import write_synthetic
    from pwevent.jobs.common.synthetic import SyntheticStream

    folder = tmp_path_factory.mktemp("replayed")
    events, requirements = write_synthetic(SyntheticStream("Sin", 10, 3, 1), str(folder), 0.6, 40, 60_000)
    files = {"events": Path(events), "requirements": Path(requirements), "releases": folder / "releases.jsonl",
             "spend": folder / "spend.jsonl", "config": folder / "config.yaml"}
    files["config"].write_text(CONFIG)
    assert main(["replay", "--quiet", "--config", str(files["config"]), "--events", str(events), "--requirements",
                 str(requirements), "--releases-out", str(files["releases"]), "--spend-log", str(files["spend"]),
                 "--seed", "1", "--through", "3"]) == 0
    return files


@pytest.mark.parametrize(("section", "message"), [
    ("kafka: {bogus: 1}", "unknown key kafka.bogus (allowed: bootstrap,"),
    ("flink: {checkpoint_interval: never}", "flink.checkpoint_interval: "),
])
@pytest.mark.parametrize("command", ["replay", "audit", "generate"])
def test_every_command_that_reads_a_config_checks_its_kafka_and_flink_sections(
        command: str, section: str, message: str, replayed: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """README.md, "Configuration": unknown or invalid keys are errors that name the key, in the
    streaming sections too, whichever command reads the file (exit 2, nothing written)."""
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG + section + "\n")
    out = tmp_path / "out"
    argv = {
        "replay": ["--events", str(replayed["events"]), "--requirements", str(replayed["requirements"]),
                   "--releases-out", str(out), "--spend-log", str(tmp_path / "spend.jsonl"), "--quiet",
                   "--through", "3"],
        "audit": ["--spend-log", str(replayed["spend"]), "--requirements", str(replayed["requirements"]),
                  "--releases", str(replayed["releases"])],
        "generate": ["--users", "3", "--slots", "2", "--out", str(out)],
    }[command]
    assert main([command, "--config", str(config), *argv]) == 2
    assert f"pwevent: configuration error: {message}" in capsys.readouterr().err
    assert not out.exists()
