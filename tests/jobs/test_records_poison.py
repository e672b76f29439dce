"""No byte sequence crashes the parsers or the replay (issue 9): the poison corpus and fuzzing."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.files import DEMO_ORIGIN, write_synthetic
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import MAX_TIME_MS, MIN_TIME_MS, parse_event, parse_requirement_update, reject_record
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.offline.replay import run_replay

SCHEMA = jsonschema.Draft202012Validator(
    json.loads((Path(__file__).parents[2] / "docs" / "schemas" / "dead-letter.schema.json").read_text()))
CONFIGS = [
    parse_config({"mechanism": "PBD", "slot": "60s", "origin": DEMO_ORIGIN, "domain": domain})
    for domain in ({"type": "binary"}, {"type": "cells", "d": 10}, {"type": "categories", "values": ["a", "b"]},
                   {"type": "grid", "rows": 3, "cols": 4,
                    "bbox": {"min_lat": -1.0, "max_lat": 1.0, "min_lon": -2.0, "max_lon": 2.0}})
]


def outcome(parse, data):
    """The parser's result or its Rejected; any other exception fails the test."""
    try:
        return parse(data)
    except Rejected as err:
        assert isinstance(err.reason, Reason) and err.detail
        return err


def parsers(config, max_bytes=None):
    limit = config.max_record_bytes if max_bytes is None else max_bytes
    return (lambda data: parse_event(data, config.events, config.domain, max_bytes=limit),
            lambda data: parse_requirement_update(data, config.requirements, config.caps, limit))


def check_reject(err: Rejected, data: bytes, position="f:1") -> None:
    """A reject of `data` is schema-valid, bounded, and names the original by length and digest."""
    record = reject_record("events", position, err.reason, err.detail, data)
    line = dumps(record)
    SCHEMA.validate(json.loads(line))
    assert len(line.encode()) < 4096
    assert record["original_bytes"] == len(data)
    assert record["original_sha256"] == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("max_bytes", [None, 32 << 20])
def test_every_poison_record_is_rejected_by_both_parsers_whatever_the_domain(poison, max_bytes):
    for config in CONFIGS:
        for parse in parsers(config, max_bytes):
            for name, data in poison:
                result = outcome(parse, data)
                assert isinstance(result, Rejected), f"{name} accepted: {result}"
                check_reject(result, data)


def test_the_issue_9_records_get_their_typed_reasons(poison):
    by_name = dict(poison)
    event, requirement = parsers(CONFIGS[1])
    expected = {"brackets-100k": Reason.TOO_LARGE, "brackets-60k": Reason.TOO_DEEP,
                "number-5000-digits": Reason.INVALID_NUMBER, "lone-surrogate-user": Reason.INVALID_USER,
                "ff-1mib": Reason.TOO_LARGE, "user-700k": Reason.TOO_LARGE, "duplicate-keys": Reason.DUPLICATE_KEY,
                "nan-literal": Reason.INVALID_NUMBER, "bom-utf8": Reason.UNPARSABLE}
    for name, reason in expected.items():
        assert outcome(event, by_name[name]).reason is reason, name
    assert outcome(requirement, by_name["lone-surrogate-requirement"]).reason is Reason.INVALID_USER


def test_clean_ids_pass_unchanged_and_integers_are_their_digits():
    event, _ = parsers(CONFIGS[1])
    for user, expected in (('"Zoë"', "Zoë"), ('"名前"', "名前"), ("17", "17"), ('"a.b@c:d-e_f"', "a.b@c:d-e_f")):
        parsed = event(f'{{"user":{user},"time":1704067200000,"value":3}}'.encode())
        assert parsed.user == expected


def test_the_writer_refuses_nan_infinity_and_lone_surrogates():
    for bad in ({"x": math.nan}, {"x": [math.inf]}, {"x": "\ud800"}):
        with pytest.raises(ValueError):
            dumps(bad)
    assert dumps({"a": [1, 2.5, None, "é"]}) == '{"a":[1,2.5,null,"é"]}'


HOSTILE_FLOATS = st.one_of(st.floats(), st.sampled_from([1e-300, 5e-324, -0.0, 1.7976931348623157e308, 1e308 * 10]))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=-(10**80), max_value=10**80),
                    HOSTILE_FLOATS, st.text(), st.text(alphabet=st.characters(codec="utf-8"), max_size=3))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=12)
FIELDS = st.fixed_dictionaries(
    {}, optional={"user": VALUES, "time": st.one_of(VALUES, st.integers(1_600_000_000_000, 1_800_000_000_000)),
                  "value": st.one_of(VALUES, st.integers(-1, 12)), "w": VALUES, "epsilon": VALUES,
                  "backward": VALUES, "forward": VALUES, "lat": HOSTILE_FLOATS, "extra": VALUES})


def _serialised(obj, ascii_only: bool) -> bytes:
    return json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", errors="surrogatepass")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=FIELDS, ascii_only=st.booleans())
def test_structured_json_with_hostile_values_never_crashes(obj, ascii_only):
    data = _serialised(obj, ascii_only)
    for config in CONFIGS:
        event, requirement = parsers(config)
        for parse in (event, requirement):
            result = outcome(parse, data)
            if isinstance(result, Rejected):
                check_reject(result, data)
            else:
                assert isinstance(result.user, str) and 1 <= len(result.user) <= 256
                assert MIN_TIME_MS <= result.time_ms <= MAX_TIME_MS
        accepted = outcome(event, data)
        if not isinstance(accepted, Rejected):
            assert accepted.user == str(obj["user"]) and 0 <= accepted.cell < config.domain.d


VALID = b'{"user":"u1","time":1704067200000,"value":1}'


@settings(max_examples=400, deadline=None)
@given(data=st.one_of(st.binary(max_size=300),
                      st.tuples(st.integers(0, len(VALID)), st.binary(min_size=1, max_size=8)).map(
                          lambda cut: VALID[:cut[0]] + cut[1] + VALID[cut[0]:])))
def test_arbitrary_bytes_never_crash(data):
    for config in CONFIGS:
        for parse in parsers(config):
            result = outcome(parse, data)
            if isinstance(result, Rejected):
                check_reject(result, data)


def _with_poison(clean: Path, poison: list[tuple[str, bytes]], out: Path) -> int:
    """`clean`'s lines with a poison record after every few; returns how many non-blank lines the
    poison records make (a record holding newlines makes several)."""
    lines = clean.read_bytes().splitlines(keepends=True)
    records = [data for _, data in poison]
    count = 0
    with out.open("wb") as handle:
        for i, line in enumerate(lines):
            handle.write(line)
            if i % 3 == 0 and i // 3 < len(records):
                handle.write(records[i // 3] + b"\n")
                count += sum(1 for piece in records[i // 3].split(b"\n") if piece.strip())
        for data in records[len(lines) // 3 + 1:]:
            handle.write(data + b"\n")
            count += sum(1 for piece in data.split(b"\n") if piece.strip())
    return count


def test_replay_rejects_every_poison_line_and_releases_what_it_released_without_them(poison, tmp_path):
    config = parse_config({"mechanism": "PBD", "slot": "60s", "origin": DEMO_ORIGIN, "domain": {"type": "binary"}})
    write_synthetic(SyntheticStream("Sin", 20, 12, seed=4), str(tmp_path), 0.6, 10, 60_000)
    runs = {}
    for name, events, requirements, expected in (
        ("clean", tmp_path / "events.jsonl", tmp_path / "requirements.jsonl", 0),
        ("poisoned", tmp_path / "ev-poison.jsonl", tmp_path / "req-poison.jsonl", None),
    ):
        if expected is None:
            expected = _with_poison(tmp_path / "events.jsonl", poison, events)
            expected += _with_poison(tmp_path / "requirements.jsonl", poison, requirements)
        outs = {k: tmp_path / f"{name}-{k}.jsonl" for k in ("releases", "spend", "truth", "rejects")}
        summary = run_replay(config, str(events), str(requirements), str(outs["releases"]), str(outs["spend"]),
                             str(outs["truth"]), str(outs["rejects"]), seed=8)
        rejects = outs["rejects"].read_bytes().splitlines()
        assert sum(summary.rejects.values()) == len(rejects) == expected
        for line in rejects:
            assert len(line) < 4096
            SCHEMA.validate(json.loads(line))
        runs[name] = [outs[k].read_text() for k in ("releases", "spend", "truth")]
    assert runs["poisoned"] == runs["clean"]
    assert expected > len(poison)


def test_replay_keeps_digest_and_length_of_a_line_over_the_limit_without_reading_it_whole(tmp_path):
    config = parse_config({"mechanism": "PBD", "slot": "60s", "origin": 0, "domain": {"type": "binary"},
                           "max_record_bytes": 100})
    big = b'{"user":"' + b"x" * 5000 + b'","time":0,"value":1}'
    (tmp_path / "ev.jsonl").write_bytes(big + b"\n" + big)
    (tmp_path / "req.jsonl").write_bytes(b"")
    run_replay(config, str(tmp_path / "ev.jsonl"), str(tmp_path / "req.jsonl"), str(tmp_path / "r.jsonl"),
               str(tmp_path / "s.jsonl"), rejects_out=str(tmp_path / "x.jsonl"))
    rejects = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert [r["position"].rsplit(":", 1)[1] for r in rejects] == ["1", "2"]
    for record in rejects:
        assert record["reason"] == "too_large" and record["original_bytes"] == len(big)
        assert record["original_sha256"] == hashlib.sha256(big).hexdigest()
        assert record["original"].encode() == big[:1024]
