"""Requirement provenance: HMAC-SHA256 signatures on requirement records (jobs/common/provenance.py)."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
from pyflink.common import Row

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.config import ConfigError, RequirementFields, parse_config
from pwevent.jobs.common.files import DEMO_ORIGIN, write_synthetic
from pwevent.jobs.common.provenance import (
    RequirementSignature,
    UnauthenticatedError,
    canonical,
    sign,
    verify,
)
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import parse_requirement_update
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.hosts import ParseRequirements
from pwevent.jobs.streaming.jvm_contract import TimePath
from pwevent.jobs.streaming.produce import _signed
from pwevent.jobs.streaming.requirement_payload import RequirementPayload
from pwevent.jobs.streaming.rows import DEAD_LETTERS
from pwevent.state.requirements import Requirement, RequirementCaps

KEY_ENV = "PWEVENT_TEST_REQUIREMENT_KEY"
SIGNATURE = RequirementSignature(KEY_ENV, "sig")
RECORD = {"user": "u1", "time": "2024-01-01T00:00:00Z", "w": 4, "epsilon": 0.6}


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "s3cret")


def test_canonical_encoding_is_sorted_compact_and_ignores_the_signature_field():
    record = {"w": 4, "user": "ü", "sig": "x", "epsilon": 0.6, "time": 0}
    assert canonical(record, "sig") == '{"epsilon":0.6,"time":0,"user":"ü","w":4}'.encode()
    expected = hmac.new(b"s3cret", canonical(record, "sig"), hashlib.sha256).hexdigest()
    assert sign(record, SIGNATURE)["sig"] == expected


def test_sign_then_verify_survives_a_json_round_trip():
    signed = sign(RECORD, SIGNATURE)
    verify(json.loads(json.dumps(signed, indent=2)), SIGNATURE)
    verify(RECORD, None)  # nothing configured: nothing checked


@pytest.mark.parametrize(
    "change",
    [
        {"epsilon": 6.0},  # a weaker protection
        {"w": 1},
        {"user": "u2"},  # somebody else's record
        {"time": "2024-01-02T00:00:00Z"},
        {"extra": 1},  # a field added after signing
    ],
)
def test_a_tampered_record_does_not_verify(change):
    with pytest.raises(UnauthenticatedError, match="does not match"):
        verify({**sign(RECORD, SIGNATURE), **change}, SIGNATURE)


def test_unsigned_and_wrong_key_and_mistyped_signatures_are_refused(monkeypatch):
    with pytest.raises(UnauthenticatedError, match="missing"):
        verify(RECORD, SIGNATURE)
    with pytest.raises(UnauthenticatedError, match="missing"):
        verify({**RECORD, "sig": 12}, SIGNATURE)
    signed = sign(RECORD, SIGNATURE)
    monkeypatch.setenv(KEY_ENV, "another key")
    with pytest.raises(UnauthenticatedError, match="does not match"):
        verify(signed, SIGNATURE)


def test_records_without_a_canonical_encoding_are_refused():
    with pytest.raises(UnauthenticatedError, match="canonical"):
        sign({**RECORD, "epsilon": float("nan")}, SIGNATURE)
    with pytest.raises(UnauthenticatedError, match="canonical"):
        verify({**RECORD, "big": 2**70, "sig": "00"}, SIGNATURE)


def test_parse_requirement_update_rejects_before_any_rule():
    fields = RequirementFields(signature=SIGNATURE)
    caps = RequirementCaps()
    update = parse_requirement_update(json.dumps(sign(RECORD, SIGNATURE)), fields, caps)
    assert update.requirement == Requirement(4, 0.6)
    for text in (json.dumps(RECORD), json.dumps({**sign(RECORD, SIGNATURE), "epsilon": 60.0})):
        with pytest.raises(Rejected) as err:
            parse_requirement_update(text, fields, caps)
        assert err.value.reason is Reason.UNAUTHENTICATED_REQUIREMENT


def config_with_signature(**signature):
    return {"mechanism": "PBD", "slot": "60s", "origin": DEMO_ORIGIN, "domain": {"type": "binary"},
            "requirements": {"signature": signature}}


def test_configuration_names_the_field(monkeypatch):
    config = parse_config(config_with_signature(key_env=KEY_ENV))
    assert config.requirements.signature == SIGNATURE
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError, match=f"requirements.signature.key_env.*{KEY_ENV}"):
        parse_config(config_with_signature(key_env=KEY_ENV))
    with pytest.raises(ConfigError, match="missing key requirements.signature.key_env"):
        parse_config(config_with_signature(field="sig"))
    with pytest.raises(ConfigError, match="unknown key requirements.signature.algorithm"):
        parse_config(config_with_signature(key_env=KEY_ENV, algorithm="md5"))


def test_replay_rejects_unsigned_requirements_and_takes_signed_ones(tmp_path):
    config = parse_config(config_with_signature(key_env=KEY_ENV))
    signed_dir, plain_dir = tmp_path / "signed", tmp_path / "plain"
    stream = SyntheticStream("Sin", 6, 5, seed=1)
    write_synthetic(stream, str(signed_dir), 0.6, 40, 60_000, signature=SIGNATURE)
    write_synthetic(stream, str(plain_dir), 0.6, 40, 60_000)
    lines = (plain_dir / "requirements.jsonl").read_text().splitlines()
    mixed = (signed_dir / "requirements.jsonl").read_text().splitlines()[1:] + lines[:1]  # u0 unsigned
    (tmp_path / "req.jsonl").write_text("\n".join(mixed) + "\n")
    rejects = tmp_path / "rejects.jsonl"
    summary = run_replay(config, str(signed_dir / "events.jsonl"), str(tmp_path / "req.jsonl"),
                         str(tmp_path / "rel.jsonl"), str(tmp_path / "spend.jsonl"), None, str(rejects), seed=1)
    reasons = [json.loads(line)["reason"] for line in rejects.read_text().splitlines()]
    assert summary.users == 5
    assert reasons.count("unauthenticated_requirement") == 1 and reasons.count("unknown_user") == 5


def test_generate_signs_with_the_configured_key(tmp_path):
    (tmp_path / "c.yaml").write_text(json.dumps(config_with_signature(key_env=KEY_ENV)))
    assert main(["generate", "--users", "3", "--slots", "2", "--out", str(tmp_path / "g"),
                 "--config", str(tmp_path / "c.yaml")]) == 0
    for line in (tmp_path / "g" / "requirements.jsonl").read_text().splitlines():
        verify(json.loads(line), SIGNATURE)


def test_produce_signs_requirement_lines_and_passes_other_lines_on():
    signed = _signed(json.dumps(RECORD).encode(), SIGNATURE)
    verify(json.loads(signed), SIGNATURE)
    for line in (b'{"user": "u1", "time": 0,', b"[1, 2]"):
        assert _signed(line, SIGNATURE) == line


class _Context:
    """The one thing the parser asks of Flink's context: the record's (guarded) event time."""

    def timestamp(self) -> int:
        return 0


class _Counter:
    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        self.count += n


class _MetricGroup:
    """What the hosts ask of Flink's metric group (counters by path), recorded."""

    def __init__(self, counters: dict[str, _Counter], path: str = "") -> None:
        self.counters, self.path = counters, path

    def add_group(self, name: str, extra: str | None = None) -> _MetricGroup:
        return _MetricGroup(self.counters, f"{self.path}{name}{'=' + extra if extra else ''}/")

    def counter(self, name: str) -> _Counter:
        return self.counters.setdefault(self.path + name, _Counter())


class _RuntimeContext:
    def __init__(self) -> None:
        self.counters: dict[str, _Counter] = {}

    def get_metrics_group(self) -> _MetricGroup:
        return _MetricGroup(self.counters)


def test_the_streaming_job_dead_letters_an_unsigned_requirement():
    """The reference parser of the requirements (every signed record goes there: the fast path is off
    with a signature): an unsigned record is a dead letter and a refusal in its place (for
    RequirementOrder, which writes the registrations), a signed one its payload."""
    config = parse_config({**config_with_signature(key_env=KEY_ENV), "origin": 0})
    host = ParseRequirements(config, "pwevent.requirements")
    runtime = _RuntimeContext()
    host.open(runtime)
    record = {"user": "a", "time": 0, "w": 4, "epsilon": 0.6}
    (tag, text), refused = host.process_element(Row(json.dumps(record).encode(), 0, 3, None), _Context())
    assert tag is DEAD_LETTERS and json.loads(text)["reason"] == "unauthenticated_requirement"
    assert refused == Row(None, None, None, 0, 3, None, int(TimePath.SLOW_REJECTED))  # its offset, for ValidTime
    counted = {path: c.count for path, c in runtime.counters.items() if c.count}
    assert counted == {"pwevent/reason=unauthenticated_requirement/dead_letters": 1}  # docs/operations.md, Metrics
    signed = json.dumps(sign(record, SIGNATURE)).encode()
    (parsed,) = host.process_element(Row(signed, 0, 4, None), _Context())
    assert list(parsed[:5]) == ["a", 0, None, 0, 4] and parsed[6] == int(TimePath.SLOW_ACCEPTED)
    assert RequirementPayload.decode(parsed[5]) == RequirementPayload(
        '{"epsilon":0.6,"w":4}', '{"epsilon":0.6,"w":4}', None, signed)
