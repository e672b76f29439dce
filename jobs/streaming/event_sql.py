"""The SQL fast path for events: split raw Kafka events into the ones SQL can take itself and the rest.

SQL does not decide validity: `parse_event` (jobs/common/records.py) is the one definition of a valid
event. SQL only recognises records it is *certain* `parse_event` accepts with exactly the (user,
time_ms, cell) it extracts, so those never cross into Python (the fast path); every other record
(invalid, unusual or merely unfamiliar) goes to `parse_event` with its raw bytes and Kafka position,
which accepts it or rejects it with the reason (the slow path). Whenever in doubt: slow path.

One call of the Java table function `RecordGroups` per record looks at it once (the JSON_VALUE
calls it replaced were repeated by the planner for every reference). The fast-path predicate
(`EventSql.fast`), all of it required:
- the record is at most `max_record_bytes` bytes, every one printable ASCII (0x20-0x7E), so its text
  is the same whatever the decoding (no lenient decoding of invalid bytes can pass);
- the whole text matches one regular expression (`record_regex`, anchored `^`...`\\z`, never Java's
  `$`, which accepts a trailing line terminator such as U+2028), pure printable ASCII: a flat JSON
  object of exactly the configured members in the canonical order (user, time, value; or user,
  time, lat, lon), at most one space after `:` and `,` (as `json.dumps` and jobs/common/files.py
  write), so no key is repeated, missing or extra; values in canonical form: user a string of
  `[A-Za-z0-9_.:@-]{1,256}` or an integer without sign or leading zero (at most 18 digits); time
  epoch milliseconds as such an integer (at most 14 digits, so before year 9999; with
  Kafka-timestamp event time the time member is optional and ignored); the value as the domain
  needs it (binary `0`/`1`/`true`/`false`; cells an integer; categories a string of printable
  ASCII without `"` or `\\`, and under `case: fold` without the capitals A-Z, which folding would
  change; ranges a decimal as for grid coordinates; grid `{"lat": x, "lon": y}` or `[x, y]` or the two fields, x and y
  decimals without exponent, at most 6 integer and 20 fraction digits); no escapes, no floats where
  Python wants integers;
- the values, taken from the regex's capturing groups (a string without escapes is its text, a
  number its digits), then pass what `parse_event` and the job check:
  time >= origin (slot >= 1), value in the domain (cells in [0, d), categories by exact name or
  alias as `CategoryMapping.spellings` lists them, any other string in the `other` cell if there is
  one; ranges by the same DOUBLE comparisons as `RangeMapping.cell`, numbers outside the edges in
  `other` if there is one; grid inside the bounding box, the cell computed with the same DOUBLE
  operations in the same order as `GridDomain.cell`, constants as 17-digit literals).
Configured field names outside `[A-Za-z0-9_]{1,64}` disable the fast path (every record goes slow), and
so does a mapping that names a part of the Kafka record (`$key`, `$timestamp`, `$headers.<name>`: the
source then renders each record as a whole-records line, jobs/common/kafka_record.py, which the
reference parser reads).

Avro events (`avro-confluent`, `avro`) reach the same regex through the Java function `AvroFields`
(jobs/streaming/jvm/pwevent/flink/avro/AvroFields.java): it decodes the datum in the JVM and renders the
values at the configured field paths as the JSON object text the regex reads, and only when it is
certain that this is the projection of the object jobs/common/avro_format.py decodes; otherwise
NULL, which no regex matches (slow path). A registry's credentials and TLS settings travel in the
registered `AvroFields` instance, never in the SQL text (`register_record_groups`). Protobuf events
(`protobuf-confluent`, `protobuf`) all take the slow path: the JVM does not decode Protobuf.

The input is a table with the Kafka raw value as BYTES and the columns `partition`, `offset`, `ts_ms`
(and whatever else the caller passes through). docs/streaming.md, "Parsing: fast path and reference parser".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pwevent.jobs.common.config import Config, InputFormat
from pwevent.jobs.common.field_paths import field_path
from pwevent.jobs.common.protobuf_format import PROTOBUF_FORMATS
from pwevent.jobs.common.records import MAX_DEPTH, MAX_USER_CHARS
from pwevent.jobs.streaming import jvm_contract
from pwevent.operators.domain import BinaryDomain, CategoriesDomain, CellsDomain, GridDomain, RangesDomain
from pwevent.operators.value_mapping import CaseRule

_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
_WS = " ?"  # at most one space: the canonical writers put none, or one after , and :
UINT = "(?:0|[1-9][0-9]{0,%d})"
_USER_TEXT = f"[A-Za-z0-9_.:@-]{{1,{MAX_USER_CHARS}}}"
TIME = UINT % 13  # at most 14 digits: below MAX_TIME_MS, so only the origin is checked in SQL
_DECIMAL = r"-?(?:0|[1-9][0-9]{0,5})(?:\.[0-9]{1,20})?"
_SAFE_TEXT = r"[ !#-\[\]-~]{0,256}"
#: Safe text without the capitals A-Z: ASCII that `str.casefold` leaves as it is (`case: fold`).
_FOLDED_TEXT = r"[ !#-@\[\]-~]{0,256}"
_SAFE_STRING = f'"{_SAFE_TEXT}"'
_SAFE_CATEGORY = re.compile(_SAFE_TEXT)


def sql_literal(text: str) -> str:
    """`text` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def double_literal(value: float) -> str:
    """A DOUBLE literal that is exactly `value` (17 significant digits round-trip)."""
    return f"{float(value):.17E}"


def member_regex(name: str, value_regex: str) -> str:
    return f'"{name}"{_WS}:{_WS}(?:{value_regex})'


def _path(name: str, *inner: str) -> str:
    return "$" + "".join(f"['{part}']" if not part.startswith("[") else part for part in (name, *inner))


#: The Java table function (jobs/streaming/jvm/pwevent/flink/parsing/RecordGroups.java) and its columns.
RECORD_GROUPS = "pwevent_record_groups"
RECORD_GROUPS_CLASS = "pwevent.flink.parsing.RecordGroups"
_GROUP_COLUMNS = jvm_contract.RECORD_GROUPS.names
_GROUP_NAME = re.compile(r"\(\?<([a-z]+)>")


#: The Java scalar function that renders an Avro datum's field paths as JSON text (AvroFields.java).
AVRO_FIELDS = "pwevent_avro_fields"


def register_record_groups(t_env, events: InputFormat | None = None) -> None:  # type: ignore[no-untyped-def]
    """Make `RecordGroups` (and for Avro `events` `AvroFields`, which needs jars.avro_jar() as well)
    callable from the SQL of `t_env` (the job's jar must be in `pipeline.jars`). `AvroFields` is
    registered as an instance holding the registry's client (URL, credentials, TLS), so that no
    credential is ever in the SQL text (pyflink_internals.avro_fields)."""
    from pwevent.jobs.streaming import pyflink_internals as internals

    t_env.create_java_temporary_system_function(RECORD_GROUPS, RECORD_GROUPS_CLASS)
    if events is not None and events.format != "json":
        internals.register_java_function(t_env, AVRO_FIELDS, internals.avro_fields(events.schema_registry))


@dataclass(frozen=True)
class EventSql:
    """The fast path for one configuration: `regex` (None: fast path off) and SQL expressions over the
    columns of `RecordGroups` (`matched`, g1..g10: the regex's groups) and `ts_ms` (the Kafka timestamp
    in epoch ms). `user`, `time_ms` and `cell` mean something only where `matched` holds, which
    `fast` (never NULL) requires."""

    regex: str | None
    user: str
    time_ms: str
    cell: str
    origin_ms: int
    max_bytes: int
    text: str = "`value`"  # SQL BYTES: the text the regex reads (JSON: the raw value; Avro: `avro_text`)

    @property
    def fast(self) -> str:
        """Over the columns `matched`, `user`, `time_ms` and `cell`."""
        if self.regex is None:
            return "FALSE"
        return (f"COALESCE(matched AND `user` IS NOT NULL AND `cell` IS NOT NULL"
                f" AND `time_ms` >= {self.origin_ms}, FALSE)")

    def groups_join(self, table: str) -> str:
        """`table` with the `RecordGroups` columns of its `value` (one row per row of `table`)."""
        return groups_join(table, self.regex, self.max_bytes, self.text)


def groups_join(table: str, regex: str | None, max_bytes: int, text: str = "`value`") -> str:
    """`table` with the `RecordGroups` columns (`matched`, g1..g10) of `text` (SQL BYTES) under
    `regex` (None: matches nothing), one row per row of `table`."""
    regex = regex if regex is not None else "(?!)"
    return (f"`{table}`, LATERAL TABLE({RECORD_GROUPS}({text}, {sql_literal(regex)}, {max_bytes}))"
            f" AS g({', '.join(_GROUP_COLUMNS)})")


def group_columns(regex: str) -> Callable[[str], str]:
    """The `RecordGroups` column (g1..g10) of each named group of `regex` (every capturing group of a
    fast-path regex is named, so the names' order is the groups' numbering)."""
    order = _GROUP_NAME.findall(regex)
    assert len(order) == len(set(order)) <= len(_GROUP_COLUMNS) - 1, order

    def column(name: str) -> str:
        return f"g{order.index(name) + 1}"
    return column


def group_regex(name: str, regex: str) -> str:
    """A capturing group; its column is found by the order of the names in the whole regex."""
    return f"(?<{name}>{regex})"


def _grid_pair() -> str:
    """A grid value: {"lat": x, "lon": y} or [x, y] (in this order)."""
    lat, lon = member_regex("lat", group_regex("plat", _DECIMAL)), member_regex("lon", group_regex("plon", _DECIMAL))
    return (f"\\{{{lat},{_WS}{lon}\\}}"
            f"|\\[{group_regex('alat', _DECIMAL)},{_WS}{group_regex('alon', _DECIMAL)}\\]")


def _value_members(config: Config) -> list[tuple[str, str]]:
    """(field path, value regex) of the fields that hold the event's value, in the domain's canonical form."""
    fields, domain = config.events, config.domain
    if isinstance(domain, BinaryDomain):
        return [(fields.value, group_regex("value", "[01]|true|false"))]
    if isinstance(domain, CellsDomain):
        return [(fields.value, group_regex("value", UINT % 9))]
    if isinstance(domain, CategoriesDomain):
        text = _FOLDED_TEXT if domain.mapping.case is CaseRule.FOLD else _SAFE_TEXT
        return [(fields.value, f'"{group_regex("value", text)}"')]
    if isinstance(domain, RangesDomain):
        return [(fields.value, group_regex("value", _DECIMAL))]
    if fields.lat and fields.lon:
        return [(fields.lat, group_regex("lat", _DECIMAL)), (fields.lon, group_regex("lon", _DECIMAL))]
    return [(fields.value, _grid_pair())]


def _cell_sql(config: Config, group: Callable[[str], str]) -> str:
    """SQL INT: the cell of a record of the fast-path shape as `config.domain` computes it, or NULL."""
    fields, domain = config.events, config.domain
    if isinstance(domain, BinaryDomain):
        raw = group("value")
        return f"CASE {raw} WHEN '0' THEN 0 WHEN 'false' THEN 0 WHEN '1' THEN 1 WHEN 'true' THEN 1 END"
    if isinstance(domain, CellsDomain):
        number = f"TRY_CAST({group('value')} AS BIGINT)"  # the regex admits only unsigned integers
        return f"CAST(NULLIF(LEAST({number}, {domain.d}), {domain.d}) AS INT)"
    if isinstance(domain, CategoriesDomain):
        # The regex took a string without escapes (under case: fold, without capitals, so folding
        # leaves it as it is): every spelling it can equal is listed; any other is `other`, if any.
        mapping = domain.mapping
        cases = " ".join(f"WHEN {sql_literal(key)} THEN {index}" for key, index in mapping.spellings().items()
                         if _SAFE_CATEGORY.fullmatch(key))
        other = "" if mapping.other is None else f" ELSE {len(mapping.names)}"
        return f"CASE {group('value')} {cases}{other} END" if cases else "CAST(NULL AS INT)"
    if isinstance(domain, RangesDomain):
        # RangeMapping.cell: edges[j] <= v < edges[j + 1], in DOUBLE (the regex takes at most 6 integer digits,
        # so an integer value is exact, and a decimal is rounded as Python's float() rounds it)
        value, edges = f"TRY_CAST({group('value')} AS DOUBLE)", domain.mapping.edges
        ranges = " ".join(f"WHEN {value} >= {double_literal(low)} AND {value} < {double_literal(high)} THEN {index}"
                          for index, (low, high) in enumerate(zip(edges, edges[1:], strict=False)))
        other = "" if domain.mapping.other is None else f" WHEN {value} IS NOT NULL THEN {len(edges) - 1}"
        return f"CASE {ranges}{other} END"
    assert isinstance(domain, GridDomain)
    if fields.lat and fields.lon:
        lat, lon = group("lat"), group("lon")
    else:
        lat, lon = f"COALESCE({group('plat')}, {group('alat')})", f"COALESCE({group('plon')}, {group('alon')})"
    x, y = f"TRY_CAST({lat} AS DOUBLE)", f"TRY_CAST({lon} AS DOUBLE)"

    def index(coord: str, low: float, high: float, n: int) -> str:
        # GridDomain.cell: min(int((v - low) / (high - low) * n), n - 1), in the same DOUBLE steps
        return (f"LEAST(CAST(FLOOR(({coord} - {double_literal(low)}) / {double_literal(high - low)} * {n}) AS INT),"
                f" {n - 1})")

    inside = (f"{x} BETWEEN {double_literal(domain.min_lat)} AND {double_literal(domain.max_lat)}"
              f" AND {y} BETWEEN {double_literal(domain.min_lon)} AND {double_literal(domain.max_lon)}")
    row = index(x, domain.min_lat, domain.max_lat, domain.rows)
    col = index(y, domain.min_lon, domain.max_lon, domain.cols)
    return f"CASE WHEN {inside} THEN {row} * {domain.cols} + {col} END"


#: A member of a fast-path object: its key, and either its value's regex (a leaf) or its own members;
#: `optional` for the time under Kafka-timestamp event time (present or not, ignored) and for an
#: object that holds only optional members.
@dataclass(frozen=True)
class Member:
    key: str
    value: str | tuple[Member, ...]
    optional: bool = False


def field_tree(leaves: list[tuple[tuple[str, ...], str, bool]]) -> tuple[Member, ...] | None:
    """The members of the objects the leaves' paths (keys, value regex, optional) make, each object's
    members in the order of their first leaf; None when two leaves share a path (a record would need
    the key twice)."""
    root: dict[str, Any] = {}
    for keys, regex, optional in leaves:
        node = root
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                return None
            node = child
        if keys[-1] in node:
            return None
        node[keys[-1]] = (regex, optional)

    def members(node: dict[str, Any]) -> tuple[Member, ...]:
        out = []
        for key, child in node.items():
            if isinstance(child, dict):
                inner = members(child)
                out.append(Member(key, inner, all(m.optional for m in inner)))
            else:
                out.append(Member(key, child[0], child[1]))
        return tuple(out)

    return members(root)


def object_regex(members: tuple[Member, ...]) -> str:
    """The regex of an object of exactly `members`, in this order, each once; an optional member (at
    most one per object) may be absent, and carries its own comma."""
    body, required = "", False  # required: a required member is already in `body`
    for index, member in enumerate(members):
        value = member.value if isinstance(member.value, str) else object_regex(member.value)
        text = member_regex(member.key, value)
        if not member.optional:
            body += f",{_WS}{text}" if required else text
            required = True
        elif required:
            body += f"(?:,{_WS}{text})?"
        elif index < len(members) - 1:
            body += f"(?:{text},{_WS})?"
        else:
            body += f"(?:{text})?"
    return f"\\{{{body}\\}}"


def user_regex() -> str:
    """A user id in canonical form: a string of `[A-Za-z0-9_.:@-]{1,256}` (group `userstr`) or an
    integer without sign or leading zero, at most 18 digits (group `usernum`)."""
    return f'"{group_regex("userstr", _USER_TEXT)}"|{group_regex("usernum", UINT % 17)}'


def _leaves(config: Config, kafka_time: bool) -> list[tuple[tuple[str, ...], str, bool]]:
    """(path keys, value regex, optional) of every configured field, in the canonical order."""
    fields = config.events
    user = user_regex()
    time = (field_path(fields.time), f"{TIME}|{_SAFE_STRING}", True) if kafka_time \
        else (field_path(fields.time), group_regex("time", TIME), False)
    return [(field_path(fields.user), user, False), time,
            *((field_path(path), regex, False) for path, regex in _value_members(config))]


def record_regex(config: Config, kafka_time: bool = False) -> str | None:
    """The Java regular expression a fast-path record matches whole: an object of exactly the configured
    members at their field paths (each nested object of exactly the members inside it), in the
    canonical order (user, time, value or lat, lon; an object where its first member is), each once,
    values in canonical form; with `kafka_time` the time member is optional (and ignored). None when
    no record can be both: keys outside `[A-Za-z0-9_]{1,64}`, two fields at one path, or a record
    deeper than the parser allows, or Protobuf events (the JVM does not decode them: every one goes to
    `parse_event`), or events read as whole Kafka records (a mapping names `$key`, `$timestamp` or a
    header); and with several statistics (each event read once per statistic by the reference
    parser). For Avro events the regex reads the text `AvroFields` renders (`avro_text`)."""
    if (config.events.whole_records or config.events.format in PROTOBUF_FORMATS
            or len(config.statistics) > 1):
        return None
    return anchored_regex(_leaves(config, kafka_time))


def anchored_regex(leaves: list[tuple[tuple[str, ...], str, bool]]) -> str | None:
    """The regex (anchored `^`...`\\z`) of an object of exactly the leaves (path keys, value regex,
    optional) at their paths, in their order (`field_tree`, `object_regex`); None when two leaves
    share a path, a key is outside `[A-Za-z0-9_]{1,64}` or the object is deeper than MAX_DEPTH."""
    depth = max(len(keys) + (1 if regex.startswith("\\{") else 0) for keys, regex, _ in leaves)
    members = field_tree(leaves)
    if members is None or depth > MAX_DEPTH or not all(_NAME.fullmatch(key) for keys, _, _ in leaves for key in keys):
        return None
    return f"^{object_regex(members)}\\z"


def avro_text(events: InputFormat, paths: list[tuple[str, ...]], max_bytes: int) -> str:
    """SQL BYTES: the JSON object text `AvroFields` renders of the `value` of an Avro input (the
    values at `paths`, each a field path's keys), NULL where it is not certain (docs/streaming.md,
    "Parsing: fast path and reference parser"). The registry of `avro-confluent` is the registered
    instance's (`register_record_groups`)."""
    fields = ",".join(".".join(keys) for keys in paths)
    schema = "CAST(NULL AS STRING)"
    if events.format == "avro":
        assert events.schema_file is not None
        with open(events.schema_file, encoding="utf-8") as handle:
            schema = sql_literal(handle.read())
    return f"{AVRO_FIELDS}(`value`, {schema}, {sql_literal(fields)}, {max_bytes})"


def event_sql(config: Config, kafka_time: bool = False) -> EventSql:
    """The fast-path expressions for `config`'s events. `kafka_time`: the event time is the Kafka
    record timestamp (`kafka.event_time: kafka`); a time field in the record is then ignored."""
    regex = record_regex(config, kafka_time)
    if regex is None:
        return EventSql(None, "CAST(NULL AS STRING)", "CAST(NULL AS BIGINT)", "CAST(NULL AS INT)", config.origin_ms,
                        config.max_record_bytes)
    group = group_columns(regex)
    time_ms = "`ts_ms`" if kafka_time else f"TRY_CAST({group('time')} AS BIGINT)"
    text = "`value`"
    if config.events.format != "json":  # the time field is not rendered when it is ignored
        paths = [keys for keys, _, optional in _leaves(config, kafka_time) if not optional]
        text = avro_text(config.events, paths, config.max_record_bytes)
    return EventSql(regex, f"COALESCE({group('userstr')}, {group('usernum')})", time_ms,
                    _cell_sql(config, group), config.origin_ms, config.max_record_bytes, text)


def parsed_events_sql(config: Config, table: str, kafka_time: bool = False,
                      columns: tuple[str, ...] = ("value", "partition", "offset", "ts_ms")) -> str:
    """Every row of `table` (`value` BYTES, `ts_ms` and the other `columns`, which pass through) with
    the fast-path columns `user`, `time_ms`, `cell` and the boolean `fast`."""
    sql = event_sql(config, kafka_time)
    kept = ", ".join(f"`{c}`" for c in columns)
    return (f"SELECT {kept}, `user`, `time_ms`, `cell`, {sql.fast} AS `fast` FROM ("
            f" SELECT {kept}, matched, {sql.user} AS `user`, {sql.time_ms} AS `time_ms`, {sql.cell} AS `cell`"
            f" FROM {sql.groups_join(table)})")


def fast_path_sql(config: Config, table: str, kafka_time: bool = False) -> str:
    """The fast path: (`user`, `time_ms`, `cell`, `partition`, `offset`) of the records `parse_event`
    surely accepts with exactly these values."""
    return ("SELECT `user`, `time_ms`, `cell`, `partition`, `offset` FROM ("
            f"{parsed_events_sql(config, table, kafka_time)}) WHERE `fast`")

