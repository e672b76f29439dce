"""The SQL fast path for requirement records, in the spirit of the events' (jobs/streaming/event_sql.py).

SQL does not decide validity: `parse_requirement_update` (jobs/common/records.py) is the one
definition of a valid requirement record, and `RequirementRules.ledger_requirement`
(jobs/common/requirement_rules.py) the one rule for the requirement a ledger runs at. SQL only
recognises records it is *certain* both accept with exactly the (user, time_ms, requested, ledger)
it extracts (`requested` and `ledger` as `requirement_payload.canonical` writes them); every other
record goes to the reference parser (the slow path). Whenever in doubt: slow path.

One call of `RecordGroups` per record, as for events. The fast-path predicate (`fast`, never NULL),
all of it required:
- the record is at most `max_record_bytes` bytes (a Confluent frame, if any, taken off as the
  parser does), every byte of its text printable ASCII (0x20-0x7E);
- the whole text matches one regular expression (`requirement_regex`, anchored `^`...`\\z`): a JSON
  object of exactly these members in this order, at most one space after `:` and `,`: the user, the
  time and the requirement at their configured field paths (nested objects as the paths say): `w`,
  `epsilon` for fixed mechanisms, or `backward.w`, `backward.epsilon`, `forward.w`,
  `forward.epsilon` for dynamic ones (`spec.dynamic`; the other shape is refused by the mechanism,
  so it goes slow). The configuration keeps every other path away from where a record shows a
  backward or forward part (`RequirementPart.marks`), so such a record reads as fixed or dynamic in
  the reference parser just as the regex assumes. Values in canonical form: the user as
  for events (`event_sql.user_regex`); the time an integer of epoch ms without sign or leading zero
  (at most 14 digits) or a string `"YYYY-MM-DDTHH:MM:SS[.mmm]Z"` (UTC, a fraction of exactly 3
  digits, or 6 whose last 3 are `000` as `slots.iso` writes whole milliseconds), converted by the
  Java function `IsoMillis` (jobs/streaming/jvm/pwevent/flink/parsing/IsoMillis.java), which parses exactly
  that form strictly (a date or time that does not exist, or year 0000, is NULL); `w` an integer
  `[1-9][0-9]{0,8}`; `epsilon` a decimal without sign or exponent, at most 6 integer digits (no
  leading zero) and at most 8 fraction digits (an integer such as `1` too). Such an epsilon has at
  most 14 significant digits, so the double it parses to prints (orjson, shortest round trip) as the
  literal without trailing zeros, `1.50` -> `1.5`, `1` -> `1.0`; the regex captures the integer part
  and the fraction without its trailing zeros, and the canonical text is built from them;
- the values then pass what the reference parser, the caps and the rules check, in the same DOUBLE
  operations (configuration constants as exact literals): for each part (the requirement, or
  backward and forward) w <= caps.max_w, epsilon >= MIN_EPSILON (1e-4: orjson writes smaller
  doubles with an exponent, which the canonical text built here would not match; epsilon > 0
  follows), epsilon <= caps.max_epsilon, epsilon / (2 w) >= caps.min_slot_epsilon; dynamic
  mechanisms also max(backward w, forward w) <= caps.max_w (the rules' horizon); a mechanism with a
  global requirement (the baselines) only where the global covers the requested one (global w >= w
  and global epsilon <= epsilon, exactly). A time before the origin is taken as it is: such a record
  is in force from slot 1 (Membership, `SlotRules.inForceFrom`).
`requested` is the canonical JSON of the requirement as declared, `ledger` the one its ledger runs
at: the requested one, or a baseline's global requirement (a constant). Both mean something only
where `fast` holds.

The fast path is off (every record slow) for requirement inputs that are not JSON (`format`
avro-confluent or avro), signed requirement records (`requirements.signature`: the signature is
checked in Python), requirement inputs read as whole Kafka records (a mapping names `$key`,
`$timestamp` or a header; the window and budget paths never do), configured keys outside
`[A-Za-z0-9_]{1,64}`, two fields at one path, or a record deeper than the parser allows.

The input is a table with the Kafka raw value as BYTES and the passthrough columns (`partition`,
`offset`, `ts_ms` by default). `register_record_groups` (event_sql.py) and `register_iso_millis`
make the Java functions callable (jobs/streaming/graph.py, `parse_requirements`).
"""

from __future__ import annotations

from pwevent.jobs.common.config import Config, RequirementPart
from pwevent.jobs.common.field_paths import field_path
from pwevent.jobs.streaming.event_sql import (
    TIME,
    anchored_regex,
    double_literal,
    group_columns,
    group_regex,
    groups_join,
    sql_literal,
    user_regex,
)
from pwevent.jobs.streaming.requirement_payload import canonical

#: The Java scalar function of canonical UTC ISO-8601 times (IsoMillis.java).
ISO_MILLIS = "pwevent_iso_millis"
ISO_MILLIS_CLASS = "pwevent.flink.parsing.IsoMillis"

#: A window: an integer without sign or leading zero, at least 1 (at most 9 digits).
W = "[1-9][0-9]{0,8}"
#: A canonical UTC time: seconds, an optional fraction of 3 digits (or 6 ending in 000), Z.
ISO_TIME = "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\\.[0-9]{3}(?:000)?)?Z"
#: The smallest fast-path epsilon: orjson writes doubles below 1e-5 with an exponent.
MIN_EPSILON = 1e-4


def register_iso_millis(t_env) -> None:  # type: ignore[no-untyped-def]
    """Make `IsoMillis` callable from the SQL of `t_env` (the job's jar must be in `pipeline.jars`)."""
    t_env.create_java_temporary_system_function(ISO_MILLIS, ISO_MILLIS_CLASS)


def epsilon_regex(prefix: str) -> str:
    """An epsilon literal of the fast path: groups `{prefix}eint` (the integer part) and
    `{prefix}efrac` (the fraction without trailing zeros; absent when it is all zeros or missing)."""
    fraction = f"\\.(?=[0-9]{{1,8}}(?![0-9])){group_regex(prefix + 'efrac', '[0-9]*[1-9]')}?0*"
    return f"{group_regex(prefix + 'eint', '0|[1-9][0-9]{0,5}')}(?:{fraction})?"


def _parts(config: Config) -> tuple[tuple[RequirementPart, str], ...]:
    """The parts of the mechanism's requirements: (their field paths, the prefix of their groups)."""
    fields = config.requirements
    return ((fields.backward, "b"), (fields.forward, "f")) if config.mechanism_spec().dynamic else ((fields.fixed, ""),)


def requirement_regex(config: Config) -> str | None:
    """The Java regular expression a fast-path requirement record matches whole (module docstring), or
    None when the fast path is off for `config`."""
    fields = config.requirements
    if fields.format != "json" or fields.signature is not None or fields.whole_records:
        return None
    leaves = [(field_path(fields.user), user_regex(), False),
              (field_path(fields.time), f'{group_regex("time", TIME)}|"{group_regex("tiso", ISO_TIME)}"', False)]
    for part, prefix in _parts(config):
        leaves += [(field_path(part.w), group_regex(prefix + "w", W), False),
                   (field_path(part.epsilon), epsilon_regex(prefix), False)]
    return anchored_regex(leaves)


def _requirement_json(parts: list[tuple[str, str]]) -> str:
    """SQL STRING: canonical JSON of a requirement from SQL STRINGs (epsilon text, w text) per part."""
    def pair(epsilon: str, w: str) -> str:
        return f"""'{{"epsilon":' || {epsilon} || ',"w":' || {w} || '}}'"""
    if len(parts) == 1:
        return pair(*parts[0])
    (be, bw), (fe, fw) = parts
    return f"""'{{"backward":' || {pair(be, bw)} || ',"forward":' || {pair(fe, fw)} || '}}'"""


def _valid_sql(config: Config, prefixes: list[str]) -> tuple[str, str]:
    """(SQL BOOLEAN: the caps and the rules accept the requirement, SQL STRING: its ledger
    requirement), over the inner columns `w_{prefix}` (BIGINT) and `e_{prefix}` (DOUBLE)."""
    caps, spec = config.caps, config.mechanism_spec()
    checks = []
    for prefix in prefixes:
        w, e = f"`w_{prefix}`", f"`e_{prefix}`"
        checks += [f"{w} <= {caps.max_w}", f"{e} >= {double_literal(MIN_EPSILON)}",
                   f"{e} <= {double_literal(caps.max_epsilon)}",
                   f"{e} / CAST(2 * {w} AS DOUBLE) >= {double_literal(caps.min_slot_epsilon)}"]
    requested = "`requested`"
    if spec.dynamic:
        checks.append(f"GREATEST({', '.join(f'`w_{p}`' for p in prefixes)}) <= {caps.max_w}")
        ledger = requested
    elif spec.global_requirement is not None:
        (prefix,) = prefixes
        g = spec.global_requirement
        checks += [f"`w_{prefix}` <= {g.w}", f"`e_{prefix}` >= {double_literal(g.epsilon)}"]
        ledger = sql_literal(canonical(g))
    else:
        ledger = requested
    return " AND ".join(checks), ledger


def parsed_requirements_sql(config: Config, table: str,
                            columns: tuple[str, ...] = ("value", "partition", "offset", "ts_ms")) -> str:
    """Every row of `table` (`value` BYTES and the other `columns`, which pass through) with the
    fast-path columns `user` STRING, `time_ms` BIGINT, `requested` STRING, `ledger` STRING and the
    boolean `fast` (never NULL; the others mean something only where it holds)."""
    kept = ", ".join(f"`{c}`" for c in columns)
    regex = requirement_regex(config)
    if regex is None:
        return (f"SELECT {kept}, CAST(NULL AS STRING) AS `user`, CAST(NULL AS BIGINT) AS `time_ms`,"
                f" CAST(NULL AS STRING) AS `requested`, CAST(NULL AS STRING) AS `ledger`, FALSE AS `fast`"
                f" FROM `{table}`")
    group = group_columns(regex)
    prefixes = [prefix for _, prefix in _parts(config)]
    texts = []  # per part: (epsilon text, w text)
    inner = [f"COALESCE({group('userstr')}, {group('usernum')}) AS `user`",
             f"COALESCE(TRY_CAST({group('time')} AS BIGINT), {ISO_MILLIS}({group('tiso')})) AS `time_ms`"]
    for prefix in prefixes:
        epsilon = f"{group(prefix + 'eint')} || '.' || COALESCE({group(prefix + 'efrac')}, '0')"
        inner += [f"TRY_CAST({group(prefix + 'w')} AS BIGINT) AS `w_{prefix}`",
                  f"TRY_CAST({epsilon} AS DOUBLE) AS `e_{prefix}`", f"{epsilon} AS `et_{prefix}`",
                  f"{group(prefix + 'w')} AS `wt_{prefix}`"]
        texts.append((f"`et_{prefix}`", f"`wt_{prefix}`"))
    valid, ledger = _valid_sql(config, prefixes)
    middle = (f"SELECT {kept}, matched, `user`, `time_ms`, {', '.join(f'`w_{p}`, `e_{p}`' for p in prefixes)},"
              f" {_requirement_json(texts)} AS `requested` FROM ("
              f"SELECT {kept}, matched, {', '.join(inner)} FROM {groups_join(table, regex, config.max_record_bytes)})")
    fast = (f"COALESCE(matched AND `user` IS NOT NULL AND `time_ms` IS NOT NULL"
            f" AND {valid}, FALSE)")
    return f"SELECT {kept}, `user`, `time_ms`, `requested`, {ledger} AS `ledger`, {fast} AS `fast` FROM ({middle})"
