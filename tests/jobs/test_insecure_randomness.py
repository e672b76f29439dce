"""Test randomness cannot reach production (docs/streaming.md, "Test randomness"): `pwevent run`
refuses `--seed` and `noise: numpy-fast` without its test switch, `--print-submit` refuses them even
with it, and the cluster entry point takes them only with it; every refusal is exit 2, before Flink
starts. Releases and spend lines name their randomness, and the full audit fails test randomness
under `noise: opendp`."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.offline.audit import audit_file
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming import job
from pwevent.jobs.streaming.job import TEST_RANDOMNESS_SWITCH, refuse_insecure_randomness, submit_command
from pwevent.operators.noise import NumpyRandomness, SecureRandomness

ROOT = Path(__file__).parents[2]
BASE = {"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"}}


def config_file(tmp_path: Path, noise: str) -> str:
    path = tmp_path / f"{noise}.yaml"
    path.write_text(json.dumps({**BASE, "noise": noise}))  # JSON is YAML; no kafka: the refusal comes first
    return str(path)


def test_the_switch_says_what_it_is() -> None:
    assert TEST_RANDOMNESS_SWITCH == "--insecure-test-randomness"


@pytest.mark.parametrize(("noise", "seed", "allowed", "submission", "refused"), [
    ("opendp", None, False, False, False),  # production
    ("opendp", None, False, True, False),
    ("opendp", 3, False, False, True),
    ("opendp", 3, True, False, False),  # a test run
    ("numpy-fast", None, False, False, True),
    ("numpy-fast", None, True, False, False),
    ("opendp", 3, True, True, True),  # a printed submission: never, switch or not
    ("numpy-fast", None, True, True, True),
])
def test_which_runs_are_refused(noise: str, seed: int | None, allowed: bool, submission: bool, refused: bool) -> None:
    if refused:
        with pytest.raises(ConfigError, match=TEST_RANDOMNESS_SWITCH):
            refuse_insecure_randomness(noise, seed, allowed, submission)
    else:
        refuse_insecure_randomness(noise, seed, allowed, submission)


@pytest.mark.parametrize(("noise", "args", "named"), [
    ("opendp", ["--seed", "1"], "--seed"),
    ("numpy-fast", [], "noise: numpy-fast"),
    ("numpy-fast", ["--seed", "1"], "--seed"),
])
def test_run_refuses_test_randomness_without_the_switch(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        noise: str, args: list[str], named: str) -> None:
    assert main(["run", "--config", config_file(tmp_path, noise), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pwevent: configuration error: {named} ") and TEST_RANDOMNESS_SWITCH in err, err
    assert "tests only" in err and "Traceback" not in err


@pytest.mark.parametrize(("noise", "args", "named"), [
    ("opendp", ["--seed", "1"], "--seed"),
    ("numpy-fast", [], "noise: numpy-fast"),
])
@pytest.mark.parametrize("switch", [[], [TEST_RANDOMNESS_SWITCH]])
def test_print_submit_refuses_test_randomness_even_with_the_switch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], noise: str, args: list[str], named: str,
        switch: list[str]) -> None:
    assert main(["run", "--config", config_file(tmp_path, noise), "--print-submit", *args, *switch]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"pwevent: configuration error: {named} ")
    assert f"--print-submit never prints a cluster submission with test randomness, not even with " \
           f"{TEST_RANDOMNESS_SWITCH}" in captured.err


def test_print_submit_of_production_noise_carries_neither_seed_nor_switch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    jar = tmp_path / "connector.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("PWEVENT_KAFKA_CONNECTOR_JAR", str(jar))
    assert main(["run", "--config", config_file(tmp_path, "opendp"), "--print-submit"]) == 0
    words = shlex.split(capsys.readouterr().out)
    assert "-py" in words and "--seed" not in words and TEST_RANDOMNESS_SWITCH not in words


def test_the_tests_submissions_carry_the_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`submit_command`, which the tests use for a local standalone cluster, adds the switch that the
    entry point needs for a seed or numpy-fast noise, and only then."""
    jar = tmp_path / "connector.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("PWEVENT_KAFKA_CONNECTOR_JAR", str(jar))
    fast = shlex.split(submit_command(config_file(tmp_path, "numpy-fast")))
    assert fast[-1] == TEST_RANDOMNESS_SWITCH and "--seed" not in fast
    seeded = shlex.split(submit_command(config_file(tmp_path, "opendp"), seed=5))
    assert seeded[-3:] == [TEST_RANDOMNESS_SWITCH, "--seed", "5"]
    assert TEST_RANDOMNESS_SWITCH not in shlex.split(submit_command(config_file(tmp_path, "opendp")))


class _PastTheCheck(Exception):
    pass


def _past_the_check(*_: Any) -> None:
    raise _PastTheCheck


@pytest.mark.parametrize(("noise", "args"), [("opendp", ["--seed", "1"]), ("numpy-fast", [])])
def test_the_cluster_entry_point_takes_test_randomness_only_with_the_switch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, noise: str,
        args: list[str]) -> None:
    config = config_file(tmp_path, noise)
    with pytest.raises(SystemExit) as done:
        job.main(["--config", config, *args])
    err = capsys.readouterr().err
    assert done.value.code == 2 and TEST_RANDOMNESS_SWITCH in err and "tests only" in err, err
    monkeypatch.setattr(job, "stream_settings", _past_the_check)  # what the entry point does next
    with pytest.raises(_PastTheCheck):
        job.main(["--config", config, *args, TEST_RANDOMNESS_SWITCH])


def _replay(tmp_path: Path, noise: str, seed: int | None) -> dict[str, str]:
    users = [f"u{u}" for u in range(6)]
    requirements = [{"user": u, "time": 5, "w": 4, "epsilon": 1.0} for u in users]
    events = [{"user": u, "time": (slot - 1) * 60_000 + 30_000, "value": (slot + i) % 2}
              for slot in range(1, 11) for i, u in enumerate(users)]
    paths = {name: str(tmp_path / f"{name}-{noise}-{seed}.jsonl") for name in ("ev", "req", "rel", "spend")}
    Path(paths["ev"]).write_text("".join(json.dumps(e) + "\n" for e in events))
    Path(paths["req"]).write_text("".join(json.dumps(r) + "\n" for r in requirements))
    run_replay(parse_config({**BASE, "origin": 0, "noise": noise}), paths["ev"], paths["req"], paths["rel"],
               paths["spend"], seed=seed)
    return paths


def _lines(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_spend_lines_name_their_releases_randomness_and_the_audit_holds_production_to_it(tmp_path: Path) -> None:
    spend_schema = jsonschema.Draft202012Validator(json.loads((ROOT / "docs" / "schemas" / "spend.schema.json")
                                                              .read_text()))
    production = _replay(tmp_path, "opendp", None)
    spends = [r for r in _lines(production["spend"]) if r["record"] == "spend"]
    assert spends and {r["noise"] for r in spends} == {r["noise"] for r in _lines(production["rel"])} \
        == {SecureRandomness.label}
    for record in _lines(production["spend"]):
        spend_schema.validate(record)
    opendp = parse_config({**BASE, "origin": 0, "noise": "opendp"})
    assert audit_file(production["spend"], production["req"], production["rel"], opendp).ok
    seeded = _replay(tmp_path, "opendp", 3)  # a seed under noise: opendp (replay's --seed)
    assert {r["noise"] for r in _lines(seeded["spend"]) if r["record"] == "spend"} == {NumpyRandomness(3).label}
    report = audit_file(seeded["spend"], seeded["req"], seeded["rel"], opendp)
    assert report.rules() == {"noise_label"}, report.render()
    assert {v.ledger is None for v in report.violations} == {True, False}  # the releases and the spend lines
    fast = parse_config({**BASE, "origin": 0, "noise": "numpy-fast"})
    assert audit_file(seeded["spend"], seeded["req"], seeded["rel"], fast).ok

