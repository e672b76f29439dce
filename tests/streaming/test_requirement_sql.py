"""The SQL fast path for requirement records against the reference parser and the rules (differential).

The Flink tests (a mini-cluster): for every record of a corpus (canonical valid records in the shapes
the project writes, explicit invalid and boundary records, the poison corpus, tricky records drawn by
hypothesis; plain and Confluent-framed) and every configuration (fixed, dynamic and global-requirement
mechanisms, renamed and nested field paths, the requirement's own fields at configured paths, and the
configurations whose fast path is off): if SQL takes the fast path, `parse_requirement_update` accepts
the record with exactly the user and time SQL extracted (a time before the origin too: in force from
slot 1), the canonical JSON of its requirement is SQL's `requested`, and
`RequirementRules.ledger_requirement` takes it, its canonical JSON being SQL's `ledger`. The canonical
records must all take the fast path. `IsoMillis` agrees with `parse_time_ms` on canonical UTC times,
valid and invalid. The unit tests (no Flink) check the pure Python pieces: the regex's epsilon groups
give the canonical text for every literal the fast path admits, and when the fast path is off.
"""

from __future__ import annotations

import json
import random
import re
from datetime import datetime, timedelta

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pwevent.jobs.common.config import Config, ConfigError, RequirementPart, parse_config
from pwevent.jobs.common.provenance import sign
from pwevent.jobs.common.reasons import Rejected
from pwevent.jobs.common.records import MAX_TIME_MS, MIN_TIME_MS, parse_requirement_update
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.jobs.common.slots import iso, parse_time_ms
from pwevent.jobs.streaming.requirement_payload import canonical
from pwevent.jobs.streaming.requirement_sql import (
    ISO_MILLIS,
    MIN_EPSILON,
    epsilon_regex,
    parsed_requirements_sql,
    requirement_regex,
)
from pwevent.state.errors import InvalidRequirementError
from pwevent.state.requirements import Requirement
from tests.corpus import poison_records
from tests.sql_results import query_rows
from tests.streaming.test_event_sql import (
    NOTHING,
    NUMBER_LITERALS,
    PREFIXES,
    SUFFIXES,
    TIME_LITERALS,
    USER_LITERALS,
    USERS,
    frame,
    mostly,
    nest,
    objects,
    put,
    render,
    run_queries,
)

FLINK = [pytest.mark.flink, pytest.mark.slow]

ORIGIN_MS = 1_704_067_200_000
BASE = {"slot": "60s", "origin": ORIGIN_MS, "domain": {"type": "binary"}}
UNIFORM = {"mechanism": "Uniform", "window": 120, "epsilon": 0.6}
#: (name, configuration); the Avro one (it needs a schema file) is added by the `cases` fixture.
CASES: list[tuple[str, Config]] = [
    ("pbd", parse_config({**BASE, "mechanism": "PBD"})),
    ("pbd-caps", parse_config({**BASE, "mechanism": "PBD",
                               "caps": {"max_w": 300, "max_epsilon": 5.5, "min_slot_epsilon": 0.001}})),
    ("dpbd", parse_config({**BASE, "mechanism": "DPBD"})),
    ("dpbd-caps", parse_config({**BASE, "mechanism": "DPBD", "caps": {"max_w": 200, "max_epsilon": 12.0}})),
    ("uniform", parse_config({**BASE, **UNIFORM})),
    ("renamed", parse_config({**BASE, "mechanism": "PBD", "requirements": {"user": "uid", "time": "ts"}})),
    ("nested-dpbd", parse_config({**BASE, "mechanism": "DPBD",
                                  "requirements": {"user": "p.user_id", "time": "meta.ts"}})),
    ("nested-uniform", parse_config({**BASE, **UNIFORM, "requirements": {"user": "m.u", "time": "m.t.at"}})),
    ("unsafe-signed", parse_config({**BASE, "mechanism": "PBD",
                                    "requirements": {"signature": {"key_env": "HOME", "field": "sig"}}})),
    ("unsafe-name", parse_config({**BASE, "mechanism": "PBD", "requirements": {"user": "user id"}})),
    ("mapped-pbd", parse_config({**BASE, "mechanism": "PBD", "requirements": {
        "user": "s.id", "time": "issued_at", "w": "pref.window", "epsilon": "pref.budget"}})),
    ("mapped-dpbd", parse_config({**BASE, "mechanism": "DPBD", "requirements": {
        "user": "p.u", "backward": {"w": "p.back.w", "epsilon": "p.back.e"},
        "forward": {"w": "fw", "epsilon": "fe"}}})),
    ("mapped-uniform", parse_config({**BASE, **UNIFORM, "requirements": {"w": "a.w", "epsilon": "b.e"}})),
    ("unsafe-shared-path", parse_config({**BASE, "mechanism": "PBD", "requirements": {"user": "w"}})),
]
AVRO_SCHEMA = {"type": "record", "name": "Requirement", "fields": [
    {"name": "user", "type": "string"}, {"name": "time", "type": "long"}, {"name": "w", "type": "int"},
    {"name": "epsilon", "type": "double"}]}


def avro_case(folder) -> tuple[str, Config]:  # type: ignore[no-untyped-def]
    schema = folder / "requirement.avsc"
    schema.write_text(json.dumps(AVRO_SCHEMA))
    return "unsafe-avro", parse_config({**BASE, "mechanism": "PBD",
                                        "requirements": {"format": "avro", "schema_file": str(schema)}})


def off(name: str) -> bool:
    """The cases whose fast path is off (no record can take it)."""
    return name.startswith("unsafe")


def rules(config: Config) -> RequirementRules:
    return RequirementRules(config.mechanism_spec(), config.caps.max_w)


def ledger(config: Config, requirement) -> str | None:  # type: ignore[no-untyped-def]
    """The canonical ledger requirement of `requirement`, None when the rules refuse it."""
    try:
        return canonical(rules(config).ledger_requirement(requirement))
    except InvalidRequirementError:
        return None


def accepted(config: Config, raw: bytes) -> bool:
    """Whether the reference takes `raw` whole: parsed and a ledger requirement (a time before the
    origin is in force from slot 1)."""
    try:
        update = parse_requirement_update(raw, config.requirements, config.caps, config.max_record_bytes)
    except Rejected:
        return False
    return ledger(config, update.requirement) is not None


# ------------------------------------------------------------------------------------------------
# The corpus


def iso_ms(ms: int) -> str:
    """A canonical UTC time with exactly 3 fraction digits (or none for whole seconds)."""
    moment = datetime(1970, 1, 1) + timedelta(milliseconds=ms)
    text = moment.replace(microsecond=0).isoformat()
    return f"{text}Z" if ms % 1000 == 0 else f"{text}.{ms % 1000:03d}Z"


def epsilon_value(rng: random.Random) -> float:
    """An epsilon as the project's writers and users give them: a few decimals, at most 8."""
    digits = rng.choice([0, 1, 1, 2, 2, 3, 4, 6, 8])
    return max(round(rng.uniform(0.0, rng.choice([1.0, 2.0, 10.0, 100.0])), digits), 10.0 ** -max(digits, 1))


def requirement(config: Config, rng: random.Random) -> dict:
    """A requirement valid under `config` (caps and rules), or nearly: the caller keeps the valid ones."""
    caps, spec = config.caps, config.mechanism_spec()

    def part() -> Requirement:
        w = rng.choice([1, 2, 10, 40, 80, 120, rng.randrange(1, caps.max_w + 1), caps.max_w])
        return Requirement(w, min(epsilon_value(rng), caps.max_epsilon))
    if spec.dynamic:
        backward = Requirement(1, 10.0) if rng.random() < 0.5 else part()
        return {"backward": backward.to_json(), "forward": part().to_json()}
    if spec.global_requirement is not None:
        g = spec.global_requirement
        return Requirement(rng.randrange(1, g.w + 1), rng.choice([g.epsilon, 1.0, 2.5, round(
            rng.uniform(g.epsilon, caps.max_epsilon), rng.randrange(1, 9))])).to_json()
    return part().to_json()


def canonical_records(config: Config, count: int, seed: int, valid_only: bool = True) -> list[bytes]:
    """Valid requirement records in the shapes the project writes (files.py through jsonl.dumps,
    bench_stream.py's f-strings, json.dumps with its default spaces), nested as the field paths say;
    times ISO-8601 (`slots.iso`, 3 fraction digits) or epoch ms; every third one Confluent-framed;
    signed when the configuration wants signatures. `valid_only`: only those the reference accepts (off
    for the configurations whose fast path is off: some, such as Avro ones, accept none of them)."""
    rng = random.Random(seed)
    fields = config.requirements
    out: list[bytes] = []
    while len(out) < count:
        i = len(out)
        ms = ORIGIN_MS + rng.choice([0, rng.randrange(10**9), rng.randrange(10**12), rng.randrange(10**5) * 60_000])
        record: dict = {}
        put(record, fields.user, f"u{rng.randrange(10**6)}" if i % 5 else rng.randrange(10**9))
        put(record, fields.time, [iso(ms), iso_ms(ms), ms][i % 3])
        for path, value in leaf_values(config, requirement(config, rng)):
            put(record, path, value)
        if fields.signature is not None:
            record = sign(record, fields.signature)
        text = [json.dumps(record, separators=(",", ":")), json.dumps(record), orjson.dumps(record).decode()][i % 3 - 1]
        raw = text.encode()
        raw = frame(raw, rng.choice([0, 1, 2**32 - 1, rng.randrange(2**32)])) if i % 3 == 0 else raw
        if not valid_only or accepted(config, raw):
            out.append(raw)
    return out


def part_paths(config: Config, n: int) -> list[RequirementPart]:
    """The paths of a requirement of `n` parts (1: fixed, 2: backward and forward)."""
    fields = config.requirements
    return [fields.fixed] if n == 1 else [fields.backward, fields.forward]


def leaf_values(config: Config, requirement: dict) -> list[tuple[str, object]]:
    """(field path, value) of a requirement in its default JSON shape, at the configured paths."""
    if "w" in requirement:
        return [(config.requirements.w, requirement["w"]), (config.requirements.epsilon, requirement["epsilon"])]
    return [(getattr(config.requirements, side).w, requirement[side]["w"]) for side in ("backward", "forward")] + \
        [(getattr(config.requirements, side).epsilon, requirement[side]["epsilon"]) for side in ("backward", "forward")]


def members(config: Config, user: str, time: str, parts: list[tuple[str, str]]) -> list[tuple[str, object]]:
    """The members (as `render` takes them) of a record of these literals: one (w, epsilon) per part."""
    fields = config.requirements
    leaves = [(fields.user, user), (fields.time, time)]
    for paths, (w, epsilon) in zip(part_paths(config, len(parts)), parts, strict=True):
        leaves += [(paths.w, w), (paths.epsilon, epsilon)]
    try:
        return nest(leaves)
    except TypeError:  # a field path through a requirement key (a case whose fast path is off): flat
        return list(leaves)


def text(tree: list[tuple[str, object]], space: str = "") -> str:
    """The JSON text of `tree` (members in their order, literals as they are)."""
    return "{" + f",{space}".join(f"{json.dumps(key)}:{space}{text(value, space) if isinstance(value, list) else value}"
                                  for key, value in tree) + "}"


#: Times: the valid ones (`must` be fast) and the ones Python rejects or are before the origin.
VALID_TIMES = ['"2024-01-01T00:00:00Z"', '"2024-02-29T12:00:00Z"', '"2024-01-01T00:00:00.001Z"',
               '"2024-12-31T23:59:59.999Z"', '"2024-06-01T00:00:00.500000Z"', '"9999-12-31T23:59:59.999Z"',
               "1704067200000", "99999999999999",
               # before the origin: in force from slot 1
               '"2023-12-31T23:59:59.999Z"', '"0001-01-01T00:00:00Z"', "1704067199999", "0"]
ODD_TIMES = ['"2023-02-29T00:00:00Z"', '"2100-02-29T00:00:00Z"', '"2024-02-30T00:00:00Z"', '"2024-04-31T00:00:00Z"',
             '"2024-13-01T00:00:00Z"', '"2024-00-10T00:00:00Z"', '"2024-01-00T00:00:00Z"', '"2024-01-01T24:00:00Z"',
             '"2024-01-01T00:60:00Z"', '"2024-01-01T00:00:60Z"', '"0000-01-01T00:00:00Z"', '"2024-01-01T00:00:00"',
             '"2024-01-01T00:00:00+00:00"',
             '"2024-01-01T00:00:00.1Z"', '"2024-01-01T00:00:00.123456Z"', '"2024-01-01T00:00:00.1234Z"',
             '"2024-01-01"', '"2024-01-01 00:00:00Z"', '"2024-01-01T00:00:00z"', '" 2024-01-01T00:00:00Z"',
             '"2024-01-01T00:00:00Z "', '"2024-01-01T00:00:00ZZ"', '"+2024-01-01T00:00:00Z"',
             '"2024-01-01T00:00:00.123Z\\n"', '"\\u0032024-01-01T00:00:00Z"', '"1704067200000"',
             "1704067200000.0", "1.7040672e12", "-1704067200000", "null", "true"]
VALID_WS = ["1", "10", "120"]
ODD_WS = ["0", "-1", "01", "10.0", "1e1", "1E1", '"10"', "true", "null", "1000000000", "1001", "301", "201", "121",
          "[10]", "{}"]
VALID_EPSILONS = ["1.0", "1", "2.0", "1.50", "0.6", "0.60000000", "0.0001", "0.00010000", "5.5", "10.0", "12",
                  "0.12345678", "3.14159265"]
ODD_EPSILONS = ["0", "0.0", "-1.0", "-0.0", "1e-6", "0.000001", "0.00001", "0.00009999", "1e0", "1E0", "1.0e0",
                "100.00000001", "100.0", "101", "5.50000001", "12.00000001", "0.123456789", "1.000000000", "1.",
                ".5", "01.5", '"1.0"', "NaN", "Infinity", "1234567.5", "999999.99999999", "0.59999999", "null",
                "[1.0]", "1" + "0" * 70]


def explicit_records(config: Config) -> tuple[list[bytes], list[bytes]]:
    """(records the fast path must take, odd records): each leaf (the user, the time, each w and
    epsilon) replaced by the boundary and the odd literals, and structural oddities: keys extra,
    missing, repeated, out of order, escaped or non-ASCII user ids, the other mechanism kind's shape."""
    dynamic = config.mechanism_spec().dynamic
    base_parts = [("1", "10.0"), ("40", "0.6")] if dynamic else [("10", "1.0")]
    user, time = '"u1"', '"2024-01-01T00:00:05Z"'

    def record(user: str = user, time: str = time, parts: list[tuple[str, str]] = base_parts,
               space: str = "") -> bytes:
        return text(members(config, user, time, parts), space).encode("utf-8", errors="surrogatepass")

    def each_part(w: str | None = None, epsilon: str | None = None) -> list[bytes]:
        return [record(parts=[(w or pw, epsilon or pe) if k == n else (pw, pe)
                              for k, (pw, pe) in enumerate(base_parts)]) for n in range(len(base_parts))]
    must = [record(), record(space=" ")]
    must += [record(time=t) for t in VALID_TIMES] + [record(user=u) for u in ['"a.b@c:d-e_f"', "17", "0"]]
    must += [r for w in VALID_WS for r in each_part(w=w)] + [r for e in VALID_EPSILONS for r in each_part(epsilon=e)]
    must = [r for r in must if accepted(config, r)]  # a global requirement, caps: not every boundary is valid
    odd = [record(time=t) for t in ODD_TIMES] + [r for w in ODD_WS for r in each_part(w=w)]
    odd += [r for e in ODD_EPSILONS for r in each_part(epsilon=e)]
    odd += [record(user=u) for u in ['"\\u00751"', '"u\\/1"', '"ü"', '"e\\u0301"', '""', '"a b"', "017", "-1",
                                     '"' + "x" * 257 + '"', "1.0", "null"]]
    odd += [record(parts=[("1", "10.0"), ("40", "0.6")]) if not dynamic else record(parts=[("10", "1.0")])]
    good = record().decode()
    odd += [good.replace('"u1"', '"u1","x":1'), good[:-1] + ',"x":1}', good[:-1] + ',"user":"u2"}',
            good.replace('"w":', '"w":10,"w":'), good.replace('"epsilon":', '"epsilon":1.0,"epsilon":'),
            good.replace(',"w":', ',"W":'), good + "\n", " " + good, good.replace(":", " :", 1),
            good.replace(",", ",  ", 1), good.replace(",", "\t,", 1), good.replace('"u1"', '"u1"\u2028')]
    odd = [r.encode("utf-8", errors="surrogatepass") if isinstance(r, str) else r for r in odd]
    fields = config.requirements
    if fields.user == "user" and fields.time == "time":  # reordered members
        if dynamic:
            odd += [b'{"user":"u1","time":"2024-01-01T00:00:05Z","forward":{"w":40,"epsilon":0.6},'
                    b'"backward":{"w":1,"epsilon":10.0}}',
                    b'{"user":"u1","time":"2024-01-01T00:00:05Z","backward":{"epsilon":10.0,"w":1},'
                    b'"forward":{"w":40,"epsilon":0.6}}',
                    b'{"user":"u1","time":"2024-01-01T00:00:05Z","backward":{"w":1,"epsilon":10.0}}',
                    b'{"user":"u1","time":"2024-01-01T00:00:05Z","backward":{"w":1,"epsilon":10.0},'
                    b'"forward":{"w":40,"epsilon":0.6,"x":1}}']
        else:
            odd += [b'{"user":"u1","time":"2024-01-01T00:00:05Z","epsilon":1.0,"w":10}',
                    b'{"time":"2024-01-01T00:00:05Z","user":"u1","w":10,"epsilon":1.0}',
                    b'{"user":"u1","time":"2024-01-01T00:00:05Z","w":10}',
                    b'{"user":"u1","w":10,"epsilon":1.0}']
    return must, odd


ISO_USUAL = st.integers(ORIGIN_MS, ORIGIN_MS + 10**11).map(lambda ms: json.dumps(iso_ms(ms)))
TIME_ODD = st.one_of(TIME_LITERALS, st.sampled_from(ODD_TIMES))
W_USUAL = st.integers(1, 120).map(str)
W_ODD = st.one_of(st.sampled_from(ODD_WS), NUMBER_LITERALS)
EPSILON_USUAL = st.builds(lambda i, f: f"{i}.{f}" if f else str(i), st.integers(0, 5),
                          st.text("0123456789", max_size=3))
EPSILON_ODD = st.one_of(st.sampled_from(ODD_EPSILONS), NUMBER_LITERALS, st.sampled_from(VALID_EPSILONS),
                        st.builds(lambda i, f: f"{i}.{f}", st.integers(0, 1200), st.text("0123456789", max_size=10)),
                        st.floats(1e-9, 1e3).map(repr), st.floats(1e-9, 1e3).map(lambda v: orjson.dumps(v).decode()))


@st.composite
def tricky(draw, config: Config) -> bytes:
    """A record near the canonical shape: odd literals, spacing, order, extra, missing or repeated keys
    (at every level of nesting), objects replaced, odd frames (`render` of test_event_sql.py)."""
    user = draw(mostly(USERS, USER_LITERALS))
    time = draw(mostly(ISO_USUAL, TIME_ODD))
    n = 2 if config.mechanism_spec().dynamic else 1
    parts = [(draw(mostly(W_USUAL, W_ODD)), draw(mostly(EPSILON_USUAL, EPSILON_ODD))) for _ in range(n)]
    if draw(st.integers(0, 19)) == 0:  # the other kind's shape
        parts = parts[:1] if n == 2 else parts * 2
    tree = members(config, user, time, parts)
    body = render(draw, tree, objects(tree))
    raw = (draw(mostly(NOTHING, PREFIXES)) + body + draw(mostly(NOTHING, SUFFIXES))).encode(
        "utf-8", errors="surrogatepass")
    return frame(raw, draw(st.integers(0, 2**32 - 1))) if draw(st.integers(0, 3)) == 0 else raw


def draw_tricky(cases: list[tuple[str, Config]], per_case: int) -> list[list[bytes]]:
    """`per_case` tricky records per case, the same on every run (derandomized, as test_event_sql.py)."""
    out: list[list[bytes]] = [[] for _ in cases]

    @settings(max_examples=per_case, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def collect(data):
        for case, (_, config) in enumerate(cases):
            out[case].append(data.draw(tricky(config)))

    collect()
    return out


# ------------------------------------------------------------------------------------------------
# The Flink tests


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> list[tuple[str, Config]]:  # type: ignore[no-untyped-def]
    return [*CASES, avro_case(tmp_path_factory.mktemp("avro"))]


def run_fast_path(t_env, cases: list[tuple[str, Config]], records_by_case: list[list[bytes]]) -> list[list[tuple]]:
    """Rows (offset, user, time_ms, requested, ledger, fast) per case, by offset."""
    def query(config: Config):  # type: ignore[no-untyped-def]
        return lambda view: ("SELECT `offset`, `user`, `time_ms`, `requested`, `ledger`, `fast` FROM ("
                             f"{parsed_requirements_sql(config, view)})")
    return run_queries(t_env, records_by_case, [query(config) for _, config in cases])


def check_fast_implies_accept(name: str, config: Config, records: list[bytes], rows: list[tuple]) -> list[bool]:
    """Asserts the differential property; returns whether each record took the fast path."""
    assert [row[0] for row in rows] == list(range(len(records)))
    for offset, user, time_ms, requested, ledger_text, is_fast in rows:
        if not is_fast:
            continue
        raw = records[offset]
        try:
            update = parse_requirement_update(raw, config.requirements, config.caps, config.max_record_bytes)
        except Rejected as err:
            pytest.fail(f"{name}: SQL fast path took {raw[:200]!r}, parse_requirement_update rejects it: {err}")
        assert (update.user, update.time_ms) == (user, time_ms), (name, raw[:200])
        assert canonical(update.requirement) == requested, (name, raw[:200])
        try:
            ledger_requirement = rules(config).ledger_requirement(update.requirement)
        except InvalidRequirementError as err:
            pytest.fail(f"{name}: SQL fast path took {raw[:200]!r}, the rules refuse it: {err}")
        assert canonical(ledger_requirement) == ledger_text, (name, raw[:200])
    return [row[5] for row in rows]


@pytest.mark.flink
@pytest.mark.slow
def test_fast_path_only_takes_what_the_reference_accepts_identically_and_all_canonical_records(t_env, cases):
    canon = [canonical_records(config, 300, seed, not off(name)) for seed, (name, config) in enumerate(cases)]
    explicit = [explicit_records(config) for _, config in cases]
    # the big poison records (megabytes) once, in the pbd case; the small ones framed too
    poison = [[data for _, data in poison_records(big=name == "pbd")]
              + [frame(data, 1) for _, data in poison_records(big=False)] for name, _ in cases]
    records = [c + must + odd + p for c, (must, odd), p in zip(canon, explicit, poison, strict=True)]
    rows = run_fast_path(t_env, cases, records)
    shares = {}
    for case, (name, config) in enumerate(cases):
        fast = check_fast_implies_accept(name, config, records[case], rows[case])
        must, odd = explicit[case]
        n, m = len(canon[case]), len(must)
        shares[name] = sum(fast[:n]) / n
        if not off(name):
            missed = [records[case][k] for k in range(n, n + m) if not fast[k]]
            assert not missed, f"{name}: valid boundary records off the fast path: {missed[:5]}"
        taken = [records[case][k] for k in range(n + m, len(records[case])) if fast[k]]
        assert not set(taken) & set(poison[case]), f"{name}: poison on the fast path"
        print(f"{name}: {len(odd)} odd records, {len(taken)} of them on the fast path")
    print("fast-path share of canonical records:", shares)
    assert all(share == 0 for name, share in shares.items() if off(name)), shares
    assert all(share == 1.0 for name, share in shares.items() if not off(name)), shares


@pytest.mark.flink
@pytest.mark.slow
def test_fast_path_on_tricky_records(t_env, cases):
    records = draw_tricky(cases, 400)
    rows = run_fast_path(t_env, cases, records)
    fast = {name: sum(check_fast_implies_accept(name, config, records[case], rows[case]))
            for case, (name, config) in enumerate(cases)}
    print(f"tricky records: {sum(map(len, records))}; on the fast path per case:", fast)
    assert all(fast[name] > 0 for name, _ in cases if not off(name)), fast
    assert all(fast[name] == 0 for name, _ in cases if off(name)), fast


def iso_texts(count: int, seed: int) -> list[str]:
    """Canonical UTC times over years 1 to 9999 (3 or 6 fraction digits, or none), and ones that are
    not (dates and times that do not exist, other forms)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        ms = rng.choice([rng.randrange(MIN_TIME_MS, MAX_TIME_MS + 1), ORIGIN_MS + rng.randrange(10**10),
                         rng.randrange(MIN_TIME_MS, MIN_TIME_MS + 10**10), rng.randrange(MAX_TIME_MS - 10**10,
                                                                                        MAX_TIME_MS + 1)])
        out += [iso_ms(ms), iso(ms)]
    for year in (1, 4, 100, 1900, 2000, 2023, 2024, 2100, 2400, 9999):
        out += [f"{year:04d}-02-28T23:59:59.999Z", f"{year:04d}-02-29T00:00:00Z", f"{year:04d}-02-30T00:00:00Z",
                f"{year:04d}-12-31T23:59:59Z"]
    for bad in ("0000-01-01T00:00:00Z", "0000-12-31T23:59:59.999Z", "2024-13-01T00:00:00Z", "2024-00-01T00:00:00Z",
                "2024-01-32T00:00:00Z", "2024-06-31T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01T23:60:00Z",
                "2024-01-01T23:59:60Z", "2024-01-01T23:59:60.000Z", "2024-01-01T00:00:00.123456Z",
                "2024-01-01T00:00:00.12Z", "2024-01-01T00:00:00", "2024-01-01T00:00:00+01:00"):
        out.append(bad)
    return out


@pytest.mark.flink
@pytest.mark.slow
def test_iso_millis_agrees_with_parse_time_ms(t_env):
    texts = iso_texts(2000, 7)
    from pyflink.table import DataTypes

    table = t_env.from_elements([(k, s) for k, s in enumerate(texts)],
                                DataTypes.ROW([DataTypes.FIELD("k", DataTypes.BIGINT()),
                                               DataTypes.FIELD("s", DataTypes.STRING())]))
    t_env.create_temporary_view("iso_texts", table)
    rows = sorted(query_rows(t_env, f"SELECT k, {ISO_MILLIS}(s) FROM iso_texts"))
    t_env.drop_temporary_view("iso_texts")
    assert [k for k, _ in rows] == list(range(len(texts)))
    nulls = 0
    for (_, java), text_ in zip(rows, texts, strict=True):
        try:
            python = parse_time_ms(text_)
        except ValueError:
            python = None
        canonical_form = re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}(000)?)?Z", text_)
        if java is not None:
            assert java == python, text_
        elif canonical_form:  # NULL for a canonical form only where Python refuses it too
            assert python is None or not MIN_TIME_MS <= python, text_
        nulls += java is None
    print(f"{len(texts)} times, {nulls} NULL")
    assert nulls >= 20


# ------------------------------------------------------------------------------------------------
# Unit tests of the pure Python pieces (no Flink)


def python_regex(java: str) -> re.Pattern[str]:
    """A fast-path regex (Java syntax) in Python's: named groups and the end anchor."""
    return re.compile(java.replace("(?<", "(?P<").replace("\\z", "\\Z"))


def epsilon_literals(count: int, seed: int) -> list[str]:
    """Decimals of the fast path's form (at most 6 integer and 8 fraction digits) and the boundaries."""
    rng = random.Random(seed)
    out = ["0.0001", "0.00010000", "0.00012345", "999999.99999999", "123456.12345678", "100000.0", "100000",
           "1", "1.0", "2.0", "1.50", "0.6", "0.1", "0.3", "0.7", "9.99999999", "0.99999999"]
    for _ in range(count):
        integer = str(rng.choice([0, rng.randrange(10), rng.randrange(10 ** rng.randrange(1, 7))]))
        fraction = "".join(rng.choice("0123456789") for _ in range(rng.randrange(0, 9)))
        out.append(f"{integer}.{fraction}" if fraction else integer)
    return out


def canonical_epsilon(integer: str, fraction: str | None) -> str:
    """The canonical text of the epsilon whose groups are `integer` and `fraction` (as SQL builds it)."""
    return f"{integer}.{fraction or '0'}"


def test_epsilon_groups_give_the_canonical_text_of_every_admitted_literal():
    pattern = python_regex(f"^{epsilon_regex('')}\\z")
    admitted = 0
    for literal in epsilon_literals(50_000, 3):
        match = pattern.match(literal)
        assert match is not None, literal
        value = float(literal)
        if value < MIN_EPSILON:
            continue
        admitted += 1
        expected = canonical(Requirement(1, json.loads(literal)))
        assert canonical_epsilon(match["eint"], match["efrac"]) == orjson.dumps(value).decode(), literal
        assert f'{{"epsilon":{canonical_epsilon(match["eint"], match["efrac"])},"w":1}}' == expected, literal
    assert admitted > 40_000
    assert orjson.dumps(1e-5) == b"0.00001" and orjson.dumps(1e-6) == b"1e-6"  # why MIN_EPSILON


def test_epsilon_regex_refuses_exponents_signs_and_long_literals():
    pattern = python_regex(f"^{epsilon_regex('')}\\z")
    for literal in ["1e-6", "1E0", "-1.0", "+1.0", "01.5", "1.", ".5", "1.123456789", "1234567.0", "1.000000000",
                    "NaN", "1.5 ", "１.5"]:
        assert pattern.match(literal) is None, literal


def test_canonical_iso_times_are_exact_in_parse_time_ms():
    rng = random.Random(11)
    for _ in range(20_000):
        ms = rng.randrange(MIN_TIME_MS, MAX_TIME_MS + 1)
        assert parse_time_ms(iso_ms(ms)) == ms
        assert parse_time_ms(iso(ms)) == ms


def test_fast_path_is_off_for_unsafe_configurations(tmp_path):
    for name, config in [*CASES, avro_case(tmp_path)]:
        assert (requirement_regex(config) is None) == off(name), name
        if off(name):
            assert "FALSE AS `fast`" in parsed_requirements_sql(config, "t")
    for mechanism in ("PBD", "DPBD"):
        for user in ("w", "epsilon"):  # one value for two fields of a fixed mechanism: slow
            config = parse_config({**BASE, "mechanism": mechanism, "requirements": {"user": user}})
            assert (requirement_regex(config) is None) == (mechanism == "PBD"), (user, mechanism)
        for user in ("backward", "forward", "backward.u", "backward.w", "w.x"):  # where the requirement is: refused
            with pytest.raises(ConfigError):
                parse_config({**BASE, "mechanism": mechanism, "requirements": {"user": user}})
    deep = parse_config({**BASE, "mechanism": "PBD", "requirements": {"user": ".".join("abcdefghijklmnopq")}})
    assert requirement_regex(deep) is None
    ok = parse_config({**BASE, "mechanism": "DPBD", "requirements": {"user": ".".join("abcdefghijklmnop")}})
    assert requirement_regex(ok) is not None


def test_canonical_records_match_the_regex_with_their_values():
    for seed, (name, config) in enumerate(CASES):
        if off(name):
            continue
        pattern = python_regex(requirement_regex(config) or "")
        for raw in canonical_records(config, 200, seed):
            body = raw[5:] if raw[:1] == b"\x00" else raw
            match = pattern.match(body.decode())
            assert match is not None, (name, raw)
            update = parse_requirement_update(raw, config.requirements, config.caps)
            assert (match["userstr"] or match["usernum"]) == update.user
