"""Pseudonymous user ids (`pseudonymise:`, jobs/common/pseudonyms.py): the rule, its configuration,
the parsers that apply it (after a requirement's signature is verified), and the erasure procedure of
docs/operations.md ("Retention and erasure"): a replay with pseudonyms, one user's requirement
records deleted, and the audit that still passes for the others and names the erased user
unverifiable."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.common.provenance import RequirementSignature, sign
from pwevent.jobs.common.pseudonyms import MIN_KEY_BYTES, PSEUDONYM_HEX_CHARS, Pseudonyms
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import parse_event, parse_requirement_update
from pwevent.jobs.common.secrets import Secret
from pwevent.jobs.offline.audit import audit_file
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.event_sql import user_regex

KEY = "0123456789abcdef" * 4
BASE: dict[str, Any] = {"mechanism": "PBD", "slot": "60s", "origin": 0, "domain": {"type": "binary"}}


def configured(**extra: Any) -> Any:
    return parse_config({**BASE, "pseudonymise": {"key": KEY}, **extra})


def test_a_pseudonym_is_hmac_sha256_of_the_id_cut_to_128_bits() -> None:
    pseudonyms = Pseudonyms(Secret(KEY))
    expected = hmac.new(KEY.encode(), b"alice", hashlib.sha256).hexdigest()[:PSEUDONYM_HEX_CHARS]
    assert pseudonyms.of("alice") == expected and len(expected) == 32
    assert pseudonyms.of("alice") != Pseudonyms(Secret(KEY[::-1])).of("alice")
    assert pseudonyms.of("é") == hmac.new(KEY.encode(), "é".encode(), hashlib.sha256).hexdigest()[:32]


def test_a_pseudonym_is_itself_a_user_id_of_the_fast_paths_canonical_form() -> None:
    """The auditor and the fast paths read pseudonyms as they read ids."""
    python_regex = user_regex().replace("(?<", "(?P<")
    assert re.fullmatch(f"(?:{python_regex})", json.dumps(Pseudonyms(Secret(KEY)).of("u1")))


@pytest.mark.parametrize(("section", "error"), [
    ({}, "missing key pseudonymise.key"),
    ({"key": None}, "pseudonymise.key: missing"),
    ({"key": "short"}, f"pseudonymise.key: the key has 5 bytes; at least {MIN_KEY_BYTES}"),
    ({"key": 12345}, "pseudonymise.key: must be a string"),
    ({"key": KEY, "salt": "x"}, "unknown key pseudonymise.salt (allowed: key)"),
    ("on", "pseudonymise must be a mapping"),
])
def test_configuration_errors_name_the_field_and_never_show_the_key(section: Any, error: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({**BASE, "pseudonymise": section})
    assert str(err.value).startswith(error)
    assert "short" not in str(err.value) and "12345" not in str(err.value)


def test_the_key_comes_from_the_environment_or_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PSEUDONYM_KEY", KEY)
    from_env = parse_config({**BASE, "pseudonymise": {"key": "${PSEUDONYM_KEY}"}}).pseudonyms
    (tmp_path / "key").write_text(KEY + "\n")
    from_file = parse_config({**BASE, "pseudonymise": {"key": {"file": str(tmp_path / "key")}}}).pseudonyms
    assert from_env is not None and from_file is not None and from_env.of("u1") == from_file.of("u1")
    assert KEY not in repr(from_env)


def test_both_parsers_name_users_by_their_pseudonym() -> None:
    config = configured()
    assert config.pseudonyms is not None
    event = parse_event(b'{"user": 42, "time": 60000, "value": 1}', config.events, config.domain,
                        pseudonyms=config.pseudonyms)
    assert event.user == config.pseudonyms.of("42")
    update = parse_requirement_update(b'{"user": "42", "time": 60000, "w": 3, "epsilon": 1}', config.requirements,
                                      config.caps, pseudonyms=config.pseudonyms)
    assert update.user == event.user


def test_the_signature_is_verified_on_the_raw_record_then_the_user_is_hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REQ_KEY", "s3cret")
    signature = RequirementSignature("REQ_KEY", "sig")
    config = configured(requirements={"signature": {"key_env": "REQ_KEY"}})
    assert config.pseudonyms is not None
    record = sign({"user": "alice", "time": 60_000, "w": 3, "epsilon": 1.0}, signature)
    update = parse_requirement_update(json.dumps(record), config.requirements, config.caps,
                                      pseudonyms=config.pseudonyms)
    assert update.user == config.pseudonyms.of("alice")
    with pytest.raises(Rejected) as err:
        parse_requirement_update(json.dumps({**record, "user": "mallory"}), config.requirements, config.caps,
                                 pseudonyms=config.pseudonyms)
    assert err.value.reason is Reason.UNAUTHENTICATED_REQUIREMENT


USERS = ["alice", "bob", "carol", "dave"]


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    events = tmp_path / "events.jsonl"
    requirements = tmp_path / "requirements.jsonl"
    events.write_text("".join(json.dumps({"user": user, "time": slot * 60_000 + n, "value": (slot + n) % 2}) + "\n"
                              for slot in range(1, 13) for n, user in enumerate(USERS)))
    requirements.write_text("".join(json.dumps({"user": user, "time": 60_000, "w": 3 + n, "epsilon": 1.0 + n})
                                    + "\n" for n, user in enumerate(USERS)))
    return events, requirements


@pytest.mark.parametrize("default", [None, {"w": 2, "epsilon": 0.5}])
def test_erasure_keeps_the_audit_provable_for_the_others(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         default: dict[str, Any] | None) -> None:
    """docs/operations.md, "Retention and erasure": with pseudonyms, erasing a user deletes their
    requirement (and event) records; their member lines stay, naming a pseudonym only. The full audit
    then passes for the others with the erased user listed (--erased), reports it UNVERIFIABLE, and
    without the list flags it (unregistered_member; with a default requirement, which would register
    the user, violations against the default): never silent."""
    extra = {} if default is None else {"default_requirement": default}
    config = configured(**extra)
    assert config.pseudonyms is not None
    events, requirements = _inputs(tmp_path)
    out = {name: str(tmp_path / f"{name}.jsonl") for name in ("releases", "spend", "rejects")}
    run_replay(config, str(events), str(requirements), out["releases"], out["spend"], rejects_out=out["rejects"],
               through=12)
    logged = Path(out["spend"]).read_text()
    assert not any(user in logged for user in USERS), "a raw id in the spend log"
    assert all(config.pseudonyms.of(user) in logged for user in USERS)
    assert audit_file(out["spend"], str(requirements), out["releases"], config).ok

    erased = config.pseudonyms.of("bob")
    remaining = [line for line in requirements.read_text().splitlines() if json.loads(line)["user"] != "bob"]
    requirements.write_text("\n".join(remaining) + "\n")
    blind = audit_file(out["spend"], str(requirements), out["releases"], config)
    assert not blind.ok and {v.user for v in blind.violations} == {erased}
    report = audit_file(out["spend"], str(requirements), out["releases"], config, erased=frozenset({erased}))
    assert report.ok and report.unverifiable == (erased,) and report.users == len(USERS)
    assert "UNVERIFIABLE: 1 erased users" in report.render()

    config_file = tmp_path / "job.yaml"
    config_file.write_text(json.dumps({**BASE, "pseudonymise": {"key": KEY}, **extra}))
    register = tmp_path / "erased.txt"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO("bob\n"))
        assert main(["pseudonym", "--config", str(config_file)]) == 0
    register.write_text(capsys.readouterr().out)
    assert register.read_text().split() == [erased]
    assert main(["audit", "--spend-log", out["spend"], "--requirements", str(requirements), "--releases",
                 out["releases"], "--config", str(config_file), "--erased", str(register)]) == 0
    assert "UNVERIFIABLE" in capsys.readouterr().out
