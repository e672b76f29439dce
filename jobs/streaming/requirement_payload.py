"""What a parsed requirement record carries to the streaming job's Membership (the `original`
field of the requirement rows into `pwevent.flink.time.ValidTime`; `pwevent.flink.parsing.RequirementPayload`
reads and writes the same bytes in Java): the requirement as declared and the one its ledger would
run at, both as canonical JSON, or instead of the latter why no ledger can, and the record's bytes.

Bytes: version 1, then four fields (requested, ledger, detail: UTF-8; original), each a big-endian
int32 length (-1: null) and that many bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import orjson

from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.state.errors import InvalidRequirementError
from pwevent.state.population import UserRequirement

VERSION = 1
_LENGTH = struct.Struct(">i")


def canonical(requirement: UserRequirement) -> str:
    """The requirement as canonical JSON: its `to_json`, keys sorted, no spaces (the text class ids
    are hashed from, `state.population.class_id`)."""
    return orjson.dumps(requirement.to_json(), option=orjson.OPT_SORT_KEYS).decode()


@dataclass(frozen=True)
class RequirementPayload:
    """`requested` and `ledger` canonical JSON (`ledger` None when the rules refuse the requirement,
    `detail` then says why), `original` the record's bytes."""

    requested: str
    ledger: str | None
    detail: str | None
    original: bytes

    def __post_init__(self) -> None:
        if (self.ledger is None) == (self.detail is None):
            raise ValueError("a payload has a ledger requirement or a detail, not both")

    @classmethod
    def of(cls, requested: UserRequirement, rules: RequirementRules, original: bytes) -> RequirementPayload:
        """The payload of a record declaring `requested`, under `rules`."""
        try:
            return cls(canonical(requested), canonical(rules.ledger_requirement(requested)), None, original)
        except InvalidRequirementError as err:
            return cls(canonical(requested), None, str(err), original)

    def encode(self) -> bytes:
        parts = [bytes([VERSION])]
        for field in (_utf8(self.requested), _utf8(self.ledger), _utf8(self.detail), self.original):
            if field is None:
                parts.append(_LENGTH.pack(-1))
            else:
                parts += [_LENGTH.pack(len(field)), field]
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> RequirementPayload:
        if data[:1] != bytes([VERSION]):
            raise ValueError(f"requirement payload of version {data[:1]!r}; this release reads {VERSION}")
        fields: list[bytes | None] = []
        at = 1
        for _ in range(4):
            (length,) = _LENGTH.unpack_from(data, at)
            at += 4
            fields.append(None if length < 0 else data[at:at + length])
            at += max(length, 0)
        if at != len(data):
            raise ValueError(f"requirement payload with {len(data) - at} bytes past its end")
        requested, ledger, detail, original = fields
        assert requested is not None and original is not None
        return cls(requested.decode(), _text(ledger), _text(detail), original)


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode()
