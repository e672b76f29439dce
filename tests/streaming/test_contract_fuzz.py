"""The cross-language fuzz of the rules Python and the JVM share: hypothesis draws inputs, the job's
Java answers them (jobs/streaming/jvm-test/pwevent/flink/parsing/EventTimeProbe.java, compiled and run
by `deploy/local/test-jvm.sh --main`), the Python reference is asked the same, and they must agree:

- the time of an event record (`EventTime`, the source's watermark time): wherever `parse_event`
  accepts, the time it takes; wherever it refuses the time, none or one outside years 1 to 9999.
  Times drawn as ISO-8601 strings (0 to 10 fraction digits, offsets, leap days, dates that do not
  exist), epoch seconds and milliseconds as JSON numbers and strings, Unicode digits and spaces
  around and inside, under nested field paths with keys that hold dots and backslashes;
- `IsoMillis` (the requirements' SQL fast path): a time it converts is `parse_time_ms`'s;
- the events' and the requirements' fast-path regular expressions run by Java's engine
  (`RecordGroups`): a record they match `parse_event` / `parse_requirement_update` accepts, with the
  user and the time the groups hold. User ids are drawn from every Unicode category;
- `Pseudonyms` (the fast paths' user ids under `pseudonymise`): for any key of at least
  MIN_KEY_BYTES bytes and any user id the parsers accept, jobs/common/pseudonyms.py's pseudonym.

A case the two sides disagreed on becomes a row of tests/streaming/data/event-time.tsv
(tests/streaming/vectors/event_time.py, RULE_TIMES)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwevent.jobs.common.config import Config, parse_config
from pwevent.jobs.common.field_paths import path_text
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.pseudonyms import MIN_KEY_BYTES, Pseudonyms
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import MAX_TIME_MS, MIN_TIME_MS, parse_event, parse_requirement_update
from pwevent.jobs.common.secrets import Secret
from pwevent.jobs.common.slots import parse_time_ms
from pwevent.jobs.streaming.event_sql import group_columns, record_regex
from pwevent.jobs.streaming.requirement_sql import requirement_regex
from tests.streaming.vectors.event_time import nest

REPO = Path(__file__).parents[2]
pytestmark = pytest.mark.slow  # about 30 s: the Java compiled and 1,600 examples
EXAMPLES = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


class Probe:
    """The Java side: one EventTimeProbe process, asked one question a line."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            ["bash", str(REPO / "deploy/local/test-jvm.sh"), "--main", "pwevent.flink.parsing.EventTimeProbe"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)

    def ask(self, *fields: str | bytes) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        args = [f if isinstance(f, str) else f.hex() for f in fields]
        self.process.stdin.write("\t".join(args) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, f"EventTimeProbe ended (exit {self.process.poll()})"
        return answer.rstrip("\n")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0


@pytest.fixture(scope="module")
def probe() -> Iterator[Probe]:
    java = Probe()
    yield java
    java.close()


DIGITS = st.sampled_from("0123456789" * 8 + "\u0661\u06f3\u0966\uff15\U0001d7ce")
SPACES = st.sampled_from(["", "", " ", "\t", "\n", "\r", "\u00a0", "\u2003", "\u3000", "\x0b", "\x0c", "\x85",
                          "\x1c", "\u200b", "\ufeff"])


def digits(n: int) -> st.SearchStrategy[str]:
    return st.lists(DIGITS, min_size=n, max_size=n).map("".join)


@st.composite
def iso_times(draw: st.DrawFn) -> str:
    """ISO-8601-like text: mostly real dates and times, with every part now and then off."""
    year = draw(st.one_of(st.integers(1, 9999).map(lambda y: f"{y:04d}"), digits(4), st.just("+2024")))
    month = draw(st.one_of(st.integers(1, 12).map(lambda m: f"{m:02d}"), digits(2)))
    day = draw(st.one_of(st.integers(1, 31).map(lambda d: f"{d:02d}"), st.sampled_from(["29", "30", "00"])))
    text = f"{year}-{month}-{day}"
    if draw(st.booleans()):
        text += draw(st.sampled_from(["T", "T", "t", " ", "_", "\u00a0"]))
        text += draw(st.one_of(st.integers(0, 24).map(lambda h: f"{h:02d}"), digits(2)))
        for _ in range(draw(st.integers(0, 2))):
            text += ":" + draw(st.one_of(st.integers(0, 60).map(lambda m: f"{m:02d}"), digits(2)))
        if draw(st.booleans()):
            text += "." + draw(st.integers(0, 10).flatmap(digits))
        text += draw(st.one_of(st.just(""), st.sampled_from(["Z", "z", "+00:00"]), st.builds(
            "{}{:02d}{}{:02d}".format, st.sampled_from("+-"), st.integers(0, 25), st.sampled_from([":", ":", ""]),
            st.integers(0, 60))))
    return text


NUMBERS = st.one_of(st.integers(-10**15, 10**15), st.integers(0, 2 * 10**9), st.floats(allow_nan=False,
                    allow_infinity=False, min_value=-1e15, max_value=1e15), st.integers(-2**70, 2**70))
TIMES: st.SearchStrategy[Any] = st.one_of(
    NUMBERS,
    st.builds("{}{}{}".format, SPACES, st.one_of(iso_times(), NUMBERS.map(str), st.integers(0, 30).flatmap(digits)),
              SPACES))
KEYS = st.lists(st.sampled_from(["time", "meta", "a.b", "c\\d", "ts", "é", "x y"]), min_size=1, max_size=3)


def config(time_path: tuple[str, ...] = ("time",), user_path: tuple[str, ...] = ("user",)) -> Config:
    return parse_config({"mechanism": "PBD", "slot": "60s", "origin": 0, "domain": {"type": "cells", "d": 10},
                         "events": {"time": path_text(time_path), "user": path_text(user_path)},
                         "requirements": {"time": path_text(time_path), "user": path_text(user_path)}})


def reference_time(value: Any) -> int | None:
    try:
        ms = parse_time_ms(value)
    except ValueError:
        return None
    return ms if MIN_TIME_MS <= ms <= MAX_TIME_MS else None


@given(time=TIMES, keys=KEYS, siblings=st.booleans())
@EXAMPLES
def test_event_time_reads_the_time_the_reference_parser_takes(probe: Probe, time: Any, keys: list[str],
                                                              siblings: bool) -> None:
    path = tuple(keys)
    if "user" in path[:1] or "value" in path[:1]:
        return
    record = dumps({"user": "u", "value": 1, **nest(path, time, siblings)}).encode()
    java = probe.ask("time", ",".join(key.encode().hex() for key in path), record)
    try:
        python: int | None = parse_event(record, config(path).events, config(path).domain).time_ms
    except Rejected:
        python = None
    assert python == reference_time(time), "the record is valid but for its time"
    if python is not None:
        assert java == str(python), (time, path)
    else:
        assert java == "-" or not MIN_TIME_MS <= int(java) <= MAX_TIME_MS, (time, path, java)


@given(text=st.one_of(iso_times(), TIMES.map(str)))
@EXAMPLES
def test_iso_millis_converts_only_as_parse_time_ms(probe: Probe, text: str) -> None:
    java = probe.ask("iso", text.encode())
    if java != "-":
        assert int(java) == reference_time(text), text


USERS = st.one_of(st.text(min_size=0, max_size=6), st.from_regex(r"[A-Za-z0-9_.:@-]{1,8}", fullmatch=True),
                  st.integers(-5, 10**19), st.sampled_from(["0", "01", "a b", "é", "e\u0301", "\u00a0u"]))


def groups(probe: Probe, regex: str, record: bytes) -> dict[str, str | None] | None:
    """The named groups of `regex` Java's engine finds in `record`, None when it does not match."""
    answer = probe.ask("groups", regex.encode(), record)
    if answer == "-":
        return None
    values = [None if g == "." else bytes.fromhex(g).decode() for g in answer.split("\t")]
    column = group_columns(regex)
    names = [name for name in ("userstr", "usernum", "time", "tiso") if f"(?<{name}>" in regex]
    return {name: values[int(column(name)[1:]) - 1] for name in names}


@given(user=USERS, time=st.one_of(TIMES, st.integers(0, 10**13)), nested=st.booleans())
@EXAMPLES
def test_the_event_fast_path_regex_matches_only_what_parse_event_accepts(probe: Probe, user: Any, time: Any,
                                                                          nested: bool) -> None:
    user_path = ("p", "user") if nested else ("user",)
    cfg = config(user_path=user_path)
    regex = record_regex(cfg)
    assert regex is not None
    for record in (dumps({**nest(user_path, user), "time": time, "value": 3}).encode(),
                   dumps({**nest(user_path, user), "time": time, "value": 3}).replace(",", ", ").encode()):
        found = groups(probe, regex, record)
        if found is not None:
            event = parse_event(record, cfg.events, cfg.domain)
            assert event.user == (found["userstr"] or found["usernum"]), record
            assert event.time_ms == int(found["time"] or ""), record


@given(user=USERS, time=st.one_of(TIMES, st.integers(0, 10**13)), w=st.one_of(st.integers(1, 20), TIMES),
       epsilon=st.one_of(st.sampled_from([0.5, 1, 2.25, 1e-5, 0]), st.floats(-1, 1e3)))
@EXAMPLES
def test_the_requirement_fast_path_regex_matches_only_what_the_reference_accepts(
        probe: Probe, user: Any, time: Any, w: Any, epsilon: Any) -> None:
    cfg = config()
    regex = requirement_regex(cfg)
    assert regex is not None
    record = dumps({"user": user, "time": time, "w": w, "epsilon": epsilon}).encode()
    found = groups(probe, regex, record)
    if found is not None:
        try:
            update = parse_requirement_update(record, cfg.requirements, cfg.caps)
        except Rejected as err:  # the requirement itself: the fast path's rules after the match decide
            assert err.reason is Reason.INVALID_REQUIREMENT, (record, err)
            return
        assert update.user == (found["userstr"] or found["usernum"]), record
        java_time = int(found["time"]) if found["time"] else probe.ask("iso", (found["tiso"] or "").encode())
        assert str(update.time_ms) == str(java_time), record


@given(key=st.text(min_size=MIN_KEY_BYTES, max_size=80).filter(lambda k: len(k.encode()) >= MIN_KEY_BYTES),
       user=USERS)
@EXAMPLES
def test_the_java_pseudonym_is_the_python_one(probe: Probe, key: str, user: Any) -> None:
    record = dumps({"user": user, "time": 60_000, "value": 3}).encode()
    cfg = config()
    try:
        valid = parse_event(record, cfg.events, cfg.domain).user
    except Rejected:
        return
    assert probe.ask("pseudonym", key.encode(), valid.encode()) == Pseudonyms(Secret(key)).of(valid), (key, valid)
