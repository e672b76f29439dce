"""Shared vectors of the JVM's Avro decoding `AvroFields` (tests/streaming/data/avro-fields.tsv):
writer schemas, field paths and datums, each with the projection AvroFields must render: the object
the reference decoding (jobs/common/avro_format.py, `decode_datum`) gives, cut to the paths
(`projection`) and written as compact JSON in the paths' order; or "-" where it must answer null.
It must for every datum the reference refuses; for one the reference accepts, a case says whether
the fast path takes it (`fast`: values AvroFields renders) or leaves it to the reference parser (an
exponent, a quote, non-ASCII text, bytes, a decimal, a time of day, a uuid not in the 8-4-4-4-12
form, a logical type outside the Avro specification, a boolean byte other than 0 and 1).
jobs/streaming/jvm-test/pwevent/flink/avro/AvroFieldsTest.java checks the Java against every line.
"""

from __future__ import annotations

import json
from typing import Any

from pwevent.jobs.common.avro_format import decode_datum
from pwevent.jobs.common.avro_schema import parse_schema_text, writer_schema
from pwevent.jobs.common.reasons import Rejected

NAME = "avro-fields.tsv"
#: (comment, writer schema, field paths, datum (hex), whether the fast path takes it)
CASES: list[tuple[str, Any, str, str, bool]] = [
    ('canonical v1',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'time', 'type': {'type': 'long', 'logicalType': 'timestamp-millis'}},
                 {'name': 'value', 'type': ['null', 'int']}]},
     'user,time,value', '047531c0f996a598630206', True),
    ('evolved v2: the added field is not projected',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'time', 'type': {'type': 'long', 'logicalType': 'timestamp-millis'}},
                 {'name': 'value', 'type': ['null', 'int']},
                 {'name': 'source', 'type': 'string', 'default': 'app'}]},
     'user,time,value', '047531c0f996a59863020606776562', True),
    ("a union's null member is absent",
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'time', 'type': {'type': 'long', 'logicalType': 'timestamp-millis'}},
                 {'name': 'value', 'type': ['null', 'int']}]},
     'user,time,value', '047531c0f996a5986300', True),
    ("the path order, not the schema's",
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'time', 'type': {'type': 'long', 'logicalType': 'timestamp-millis'}},
                 {'name': 'value', 'type': ['null', 'int']}]},
     'value,user', '047531c0f996a598630200', True),
    ('micros floored',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'long'},
                 {'name': 'time', 'type': {'type': 'long', 'logicalType': 'timestamp-micros'}}]},
     'user,time', '0eceaba5bbe2f58606', True),
    ('negative micros floored',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'long'},
                 {'name': 'time', 'type': {'type': 'long', 'logicalType': 'local-timestamp-micros'}}]},
     'time', '0e01', True),
    ('local millis',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'time', 'type': {'type': 'long', 'logicalType': 'local-timestamp-millis'}}]},
     'time', 'c0f996a59863', True),
    ('a timestamp no datetime holds',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'at', 'type': {'type': 'long', 'logicalType': 'timestamp-millis'}}]},
     'user', '04753180808080808080808001', False),
    ('a trailing byte',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'time', 'type': {'type': 'long', 'logicalType': 'timestamp-millis'}},
                 {'name': 'value', 'type': ['null', 'int']}]},
     'user,time,value', '047531c0f996a59863020600', False),
    ('truncated',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'time', 'type': {'type': 'long', 'logicalType': 'timestamp-millis'}},
                 {'name': 'value', 'type': ['null', 'int']}]},
     'user,time,value', '047531c0f996a5986302', False),
    ('an overlong varint (5 for 2 bytes)',
     {'type': 'record', 'name': 'E', 'fields': [{'name': 'value', 'type': 'int'}]},
     'value', '8a00', False),
    ('invalid UTF-8 in a field not projected',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'}, {'name': 'note', 'type': 'string'}]},
     'user', '04753102ff', False),
    ('a uuid: lowercase, as Python writes it',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'id', 'type': {'type': 'string', 'logicalType': 'uuid'}}]},
     'user,id', '0475314841424344454630302d313233342d353637382d394142432d444546303132333435363738', True),
    ('a uuid in braces: Python reads it, the fast path leaves it',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'id', 'type': {'type': 'string', 'logicalType': 'uuid'}}]},
     'user', '047531447b61626364656630303132333435363738396162636465663031323334353637387d', False),
    ('a date: epoch milliseconds',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'day', 'type': {'type': 'int', 'logicalType': 'date'}}]},
     'user,day', '047531f0a802', True),
    ('a date before year 1',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'day', 'type': {'type': 'int', 'logicalType': 'date'}}]},
     'user', '047531f5e457', False),
    ('a time-millis not projected',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 't', 'type': {'type': 'int', 'logicalType': 'time-millis'}}]},
     'user', '047531feefb252', True),
    ('a time-millis projected: a Python time, no JSON value',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 't', 'type': {'type': 'int', 'logicalType': 'time-millis'}}]},
     'user,t', '047531feefb252', False),
    ('a time-millis of 24 hours',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 't', 'type': {'type': 'int', 'logicalType': 'time-millis'}}]},
     'user', '04753180f0b252', False),
    ('a negative time-millis: Python reads it, the fast path leaves it',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 't', 'type': {'type': 'int', 'logicalType': 'time-millis'}}]},
     'user', '04753101', False),
    ('a decimal not projected',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'amount', 'type': {'type': 'bytes', 'logicalType': 'decimal', 'precision': 6, 'scale': 2}}]},
     'user', '047531043039', True),
    ('a decimal projected: a Python Decimal',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'amount', 'type': {'type': 'bytes', 'logicalType': 'decimal', 'precision': 6, 'scale': 2}}]},
     'user,amount', '047531043039', False),
    ('a decimal without a precision',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'amount', 'type': {'type': 'bytes', 'logicalType': 'decimal'}}]},
     'user', '047531043039', False),
    ('a duration not projected',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'd', 'type': {'type': 'fixed', 'name': 'D', 'size': 12, 'logicalType': 'duration'}}]},
     'user', '047531010101010101010101010101', True),
    ('a timestamp-nanos: the number as it is',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'time', 'type': {'type': 'long', 'logicalType': 'timestamp-nanos'}}]},
     'user,time', '0475318080d0e2c6bfce972f', True),
    ('a logical type of no specification',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'id', 'type': {'type': 'string', 'logicalType': 'ulid'}}]},
     'user', '0475310261', False),
    ('nested records',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'payload',
                  'type': {'type': 'record',
                           'name': 'P',
                           'fields': [{'name': 'user_id', 'type': ['null', 'long']},
                                      {'name': 'v', 'type': 'int'}]}},
                 {'name': 'meta',
                  'type': {'type': 'record',
                           'name': 'M',
                           'fields': [{'name': 'ts',
                                       'type': {'type': 'long', 'logicalType': 'timestamp-micros'}}]}}]},
     'payload.user_id,meta.ts,payload.v', '02180a809ca5bbe2f58606', True),
    ('a path through a string',
     {'type': 'record', 'name': 'E', 'fields': [{'name': 'payload', 'type': 'string'}]},
     'payload.user_id', '0278', False),
    ('a path through a null record: absent',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'payload',
                  'type': ['null',
                           {'type': 'record', 'name': 'P', 'fields': [{'name': 'u', 'type': 'string'}]}]},
                 {'name': 'v', 'type': 'int'}]},
     'payload.u,v', '0002', True),
    ('a double',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'lat', 'type': 'double'}, {'name': 'lon', 'type': 'float'}]},
     'lat,lon', '9a99999999594440000094c2', True),
    ('a double with an exponent',
     {'type': 'record', 'name': 'E', 'fields': [{'name': 'lat', 'type': 'double'}]},
     'lat', '48afbc9af2d77a3e', False),
    ('a string with a quote',
     {'type': 'record', 'name': 'E', 'fields': [{'name': 'user', 'type': 'string'}]},
     'user', '06612262', False),
    ('a string with a non-ASCII character',
     {'type': 'record', 'name': 'E', 'fields': [{'name': 'user', 'type': 'string'}]},
     'user', '04c3a9', False),
    ('a record value, null members absent',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'value',
                  'type': {'type': 'record',
                           'name': 'P',
                           'fields': [{'name': 'lat', 'type': 'double'},
                                      {'name': 'x', 'type': ['null', 'int']},
                                      {'name': 'lon', 'type': 'double'}]}}]},
     'value', 'cdcccccccc4c44400066666666668652c0', True),
    ('a map value in its written order',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'value', 'type': {'type': 'map', 'values': 'double'}}]},
     'value', '04066c6f6e66666666668652c0066c6174cdcccccccc4c444000', True),
    ('a path into a map',
     {'type': 'record', 'name': 'E', 'fields': [{'name': 'm', 'type': {'type': 'map', 'values': 'long'}}]},
     'm.user', '0408757365720a02780200', True),
    ('an array of doubles',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'value', 'type': {'type': 'array', 'items': 'double'}}]},
     'value', '04cdcccccccc4c444066666666668652c000', True),
    ('an enum',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'value', 'type': {'type': 'enum', 'name': 'C', 'symbols': ['a', 'b']}}]},
     'value', '02', True),
    ('a boolean',
     {'type': 'record', 'name': 'E', 'fields': [{'name': 'value', 'type': 'boolean'}]},
     'value', '01', True),
    ('bytes',
     {'type': 'record', 'name': 'E', 'fields': [{'name': 'value', 'type': 'bytes'}]},
     'value', '0261', False),
    ('a boolean byte other than 0 and 1',
     {'type': 'record', 'name': 'E', 'fields': [{'name': 'value', 'type': 'boolean'}]},
     'value', '02', False),
    ('a union branch out of range',
     {'type': 'record',
      'name': 'E',
      'fields': [{'name': 'user', 'type': 'string'},
                 {'name': 'time', 'type': {'type': 'long', 'logicalType': 'timestamp-millis'}},
                 {'name': 'value', 'type': ['null', 'int']}]},
     'value', '04753180010406', False),
    ('a top level that is not a record',
     'long',
     'value', '02', False),
]


def projection(obj: dict[str, Any], paths: list[list[str]]) -> dict[str, Any]:
    """The members of `obj` at `paths` (a path whose keys are not all there is left out)."""
    out: dict[str, Any] = {}
    for keys in paths:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            node = out
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = value
    return out


def rendered(comment: str, schema: Any, paths: str, datum: str, fast: bool) -> str:
    """What AvroFields must render of a case: the reference decoding's projection, or "-"."""
    try:
        parsed = writer_schema(parse_schema_text(json.dumps(schema), comment))
        decoded = decode_datum(bytes.fromhex(datum), parsed, comment)
    except (Rejected, ValueError):
        assert not fast, f"{comment}: the reference refuses it, the fast path cannot take it"
        return "-"
    if not fast:
        return "-"
    return json.dumps(projection(decoded, [p.split(".") for p in paths.split(",")]), separators=(",", ":"))


def text() -> str:
    """The file's text."""
    head = ("# comment\twriter schema (hex of its JSON)\tfield paths\tdatum (hex)\t"
            "the projection AvroFields renders (- null)\n")
    return head + "".join(f"{case[0]}\t{json.dumps(case[1]).encode().hex()}\t{case[2]}\t{case[3]}\t{rendered(*case)}\n"
                          for case in CASES)
