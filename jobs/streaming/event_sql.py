"""The SQL fast path for events: split raw Kafka events into the ones SQL can take itself and the rest.

SQL does not decide validity: `parse_event` (jobs/common/records.py) is the one definition of a valid
event. SQL only recognises records it is *certain* `parse_event` accepts with exactly the (user,
time_ms, cell) it extracts, so those never cross into Python (the fast path); every other record
(invalid, unusual or merely unfamiliar) goes to `parse_event` with its raw bytes and Kafka position,
which accepts it or rejects it with the reason (the slow path). Whenever in doubt: slow path.

The fast-path predicate (`EventSql.fast`), all of it required:
- the record is at most `max_record_bytes` characters and its bytes are exactly the UTF-8 encoding of
  its decoded text (`ENCODE(s, 'UTF-8') = value`: no lenient decoding of invalid bytes can pass);
- the whole text matches one regular expression (`record_regex`, anchored `^`...`\\z`, never Java's
  `$`, which accepts a trailing line terminator such as U+2028), pure printable ASCII: a flat JSON
  object of exactly the configured members in the canonical order (user, time, value; or user,
  time, lat, lon), at most one space after `:` and `,` (as `json.dumps` and jobs/common/files.py
  write), so no key is repeated, missing or extra; values in canonical form: user a string of
  `[A-Za-z0-9_.:@-]{1,256}` or an integer without sign or leading zero (at most 18 digits); time
  epoch milliseconds as such an integer (at most 14 digits, so before year 9999; with
  Kafka-timestamp event time the time member is optional and ignored); the value as the domain
  needs it (binary `0`/`1`/`true`/`false`; cells an integer; categories a string of printable
  ASCII without `"` or `\\`; grid `{"lat": x, "lon": y}` or `[x, y]` or the two fields, x and y
  decimals without exponent, at most 6 integer and 20 fraction digits); no escapes, no floats where
  Python wants integers;
- the values JSON_VALUE extracts then pass what `parse_event` and the job check:
  time >= origin (slot >= 1), value in the domain (cells in [0, d), categories by exact name,
  grid inside the bounding box, the cell computed with the same DOUBLE operations in the same order
  as `GridDomain.cell`, constants as 17-digit literals).
Configured field names outside `[A-Za-z0-9_]{1,64}` disable the fast path (every record goes slow).

The input is a table with the Kafka raw value as BYTES and the columns `partition`, `offset`, `ts_ms`
(jobs/streaming/job.py `source_ddl`). docs/streaming.md, "Parsing: fast path and reference parser".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pwevent.jobs.common.config import Config
from pwevent.jobs.common.records import MAX_USER_CHARS
from pwevent.operators.domain import BinaryDomain, CategoriesDomain, CellsDomain, GridDomain

_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
_WS = " ?"  # at most one space: the canonical writers put none, or one after , and :
_UINT = "(?:0|[1-9][0-9]{0,%d})"
_USER = f'(?:"[A-Za-z0-9_.:@-]{{1,{MAX_USER_CHARS}}}"|{_UINT % 17})'
_TIME = _UINT % 13  # at most 14 digits: below MAX_TIME_MS, so only the origin is checked in SQL
_DECIMAL = r"-?(?:0|[1-9][0-9]{0,5})(?:\.[0-9]{1,20})?"
_SAFE_STRING = r'"[ !#-\[\]-~]{0,256}"'
_SAFE_CATEGORY = re.compile(r"[ !#-\[\]-~]{0,256}")


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _double(value: float) -> str:
    """A DOUBLE literal that is exactly `value` (17 significant digits round-trip)."""
    return f"{float(value):.17E}"


def _member(name: str, value_regex: str) -> str:
    return f'"{name}"{_WS}:{_WS}(?:{value_regex})'


def _path(name: str, *inner: str) -> str:
    return "$" + "".join(f"['{part}']" if not part.startswith("[") else part for part in (name, *inner))


@dataclass(frozen=True)
class EventSql:
    """SQL boolean and value expressions over `s` (the record as STRING), `value` (its BYTES) and
    `ts_ms` (the Kafka timestamp in epoch ms), for one configuration. `user`, `time_ms` and `cell`
    (JSON_VALUE, NULL on any error) mean something only where `shape` holds, which `fast` (never
    NULL) requires. They are not guarded by `shape` (a CASE would evaluate the shape check once per
    column: the benchmark measured it at several times the cost)."""

    shape: str
    user: str
    time_ms: str
    cell: str
    origin_ms: int

    @property
    def fast(self) -> str:
        """Each column once (the planner inlines them: every reference is another JSON_VALUE call)."""
        return (f"COALESCE(({self.shape}) AND `user` IS NOT NULL AND `cell` IS NOT NULL"
                f" AND `time_ms` >= {self.origin_ms}, FALSE)")


def _grid_pair() -> str:
    """A grid value: {"lat": x, "lon": y} or [x, y] (in this order)."""
    return (f"\\{{{_member('lat', _DECIMAL)},{_WS}{_member('lon', _DECIMAL)}\\}}"
            f"|\\[{_DECIMAL},{_WS}{_DECIMAL}\\]")


def _value_members(config: Config) -> list[str]:
    """The member regexes of the fields that hold the event's value, in the domain's canonical form."""
    fields, domain = config.events, config.domain
    if isinstance(domain, BinaryDomain):
        return [_member(fields.value, "[01]|true|false")]
    if isinstance(domain, CellsDomain):
        return [_member(fields.value, _UINT % 9)]
    if isinstance(domain, CategoriesDomain):
        return [_member(fields.value, _SAFE_STRING)]
    if fields.lat and fields.lon:
        return [_member(fields.lat, _DECIMAL), _member(fields.lon, _DECIMAL)]
    return [_member(fields.value, _grid_pair())]


def _cell_sql(config: Config, json_value: Callable[..., str]) -> str:
    """SQL INT: the cell of a record of the fast-path shape as `config.domain` computes it, or NULL."""
    fields, domain = config.events, config.domain
    if isinstance(domain, BinaryDomain):
        raw = json_value(fields.value)
        return f"CASE {raw} WHEN '0' THEN 0 WHEN 'false' THEN 0 WHEN '1' THEN 1 WHEN 'true' THEN 1 END"
    if isinstance(domain, CellsDomain):
        # the regex admits only unsigned integers; one reference to the value (each is a JSON_VALUE call)
        number = f"TRY_CAST({json_value(fields.value)} AS BIGINT)"
        return f"CAST(NULLIF(LEAST({number}, {domain.d}), {domain.d}) AS INT)"
    if isinstance(domain, CategoriesDomain):
        cases = " ".join(f"WHEN {_sql_str(name)} THEN {index}" for index, name in enumerate(domain.values)
                         if _SAFE_CATEGORY.fullmatch(name))
        return f"CASE {json_value(fields.value)} {cases} END" if cases else "CAST(NULL AS INT)"
    assert isinstance(domain, GridDomain)
    if fields.lat and fields.lon:
        lat, lon = json_value(fields.lat), json_value(fields.lon)
    else:
        lat = f"COALESCE({json_value(fields.value, 'lat')}, {json_value(fields.value, '[0]')})"
        lon = f"COALESCE({json_value(fields.value, 'lon')}, {json_value(fields.value, '[1]')})"
    x, y = f"TRY_CAST({lat} AS DOUBLE)", f"TRY_CAST({lon} AS DOUBLE)"

    def index(coord: str, low: float, high: float, n: int) -> str:
        # GridDomain.cell: min(int((v - low) / (high - low) * n), n - 1), in the same DOUBLE steps
        return (f"LEAST(CAST(FLOOR(({coord} - {_double(low)}) / {_double(high - low)} * {n}) AS INT),"
                f" {n - 1})")

    inside = (f"{x} BETWEEN {_double(domain.min_lat)} AND {_double(domain.max_lat)}"
              f" AND {y} BETWEEN {_double(domain.min_lon)} AND {_double(domain.max_lon)}")
    row = index(x, domain.min_lat, domain.max_lat, domain.rows)
    col = index(y, domain.min_lon, domain.max_lon, domain.cols)
    return f"CASE WHEN {inside} THEN {row} * {domain.cols} + {col} END"


def record_regex(config: Config, kafka_time: bool = False) -> str:
    """The Java regular expression a fast-path record matches whole: a flat object of exactly the
    configured members in the canonical order (user, time, value or lat, lon), each once, values in
    canonical form; with `kafka_time` the time member is optional (and ignored)."""
    fields = config.events
    time = f"(?:,{_WS}{_member(fields.time, f'{_TIME}|{_SAFE_STRING}')})?" if kafka_time \
        else f",{_WS}{_member(fields.time, _TIME)}"
    values = "".join(f",{_WS}{member}" for member in _value_members(config))
    return f"^\\{{{_member(fields.user, _USER)}{time}{values}\\}}\\z"


def event_sql(config: Config, kafka_time: bool = False) -> EventSql:
    """The fast-path expressions for `config`'s events. `kafka_time`: the event time is the Kafka
    record timestamp (`kafka.event_time: kafka`); a time field in the record is then ignored."""
    fields = config.events
    names = [fields.user, fields.time, fields.value, fields.lat or "lat", fields.lon or "lon"]
    if not all(_NAME.fullmatch(name) for name in names):
        return EventSql("FALSE", "CAST(NULL AS STRING)", "CAST(NULL AS BIGINT)", "CAST(NULL AS INT)", config.origin_ms)

    def json_value(name: str, *inner: str) -> str:
        return f"JSON_VALUE(s, {_sql_str(_path(name, *inner))})"

    shape = " AND ".join([
        f"CHAR_LENGTH(s) <= {config.max_record_bytes}",
        "ENCODE(s, 'UTF-8') = `value`",
        f"REGEXP(s, {_sql_str(record_regex(config, kafka_time))})",
    ])
    time_ms = "`ts_ms`" if kafka_time else f"TRY_CAST({json_value(fields.time)} AS BIGINT)"

    return EventSql(shape, json_value(fields.user), time_ms, _cell_sql(config, json_value), config.origin_ms)


def parsed_events_sql(config: Config, table: str, kafka_time: bool = False) -> str:
    """Every row of `table` (`value` BYTES, `partition`, `offset`, `ts_ms`) with the fast-path columns
    `user`, `time_ms`, `cell` and the boolean `fast`."""
    sql = event_sql(config, kafka_time)
    return (
        "SELECT `value`, `partition`, `offset`, `ts_ms`, `user`, `time_ms`, `cell`, " + sql.fast + " AS `fast` FROM ("
        f" SELECT `value`, `partition`, `offset`, `ts_ms`, {sql.user} AS `user`, {sql.time_ms} AS `time_ms`,"
        f" {sql.cell} AS `cell`, s FROM ("
        f"  SELECT `value`, `partition`, `offset`, `ts_ms`, CAST(`value` AS STRING) AS s FROM `{table}`))"
    )


def fast_path_sql(config: Config, table: str, kafka_time: bool = False) -> str:
    """The fast path: (`user`, `time_ms`, `cell`, `partition`, `offset`) of the records `parse_event`
    surely accepts with exactly these values."""
    return ("SELECT `user`, `time_ms`, `cell`, `partition`, `offset` FROM ("
            f"{parsed_events_sql(config, table, kafka_time)}) WHERE `fast`")


def slow_path_sql(config: Config, table: str, kafka_time: bool = False) -> str:
    """The slow path: (`value`, `partition`, `offset`, `ts_ms`) of every other record, for `parse_event`."""
    return ("SELECT `value`, `partition`, `offset`, `ts_ms` FROM ("
            f"{parsed_events_sql(config, table, kafka_time)}) WHERE NOT `fast`")
