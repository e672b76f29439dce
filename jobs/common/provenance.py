"""Who wrote a requirement record: an optional HMAC-SHA256 signature (docs/formats.md, "Requirement
provenance").

A user's first requirement record pins that user's protection (for ever under a fixed mechanism), so
whoever can write the requirements topic decides how much privacy every user gets. Besides locking the
topic down with ACLs, the configuration may require every requirement record to carry a signature:

    requirements: {signature: {key_env: PWEVENT_REQUIREMENT_KEY, field: sig}}

The signature is the lowercase hex HMAC-SHA256, keyed with the UTF-8 bytes of the environment
variable `key_env`, over the canonical encoding of the record without the `field` member: the parsed
JSON object written by orjson with its keys sorted (`OPT_SORT_KEYS`, compact, UTF-8, floats in their
shortest round-trip form). Non-finite numbers and integers beyond 64 bits have no canonical encoding;
such a record cannot be signed and does not verify. The key is read from the environment whenever it
is needed and never stored in the configuration, so it never travels inside a job graph.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
from dataclasses import dataclass
from typing import Any

import orjson


class UnauthenticatedError(ValueError):
    """A requirement record whose signature is missing or does not verify."""


class MissingKeyError(ValueError):
    """Signing is configured but its key is not in the environment; the message names the field."""


@dataclass(frozen=True)
class RequirementSignature:
    """Where the key comes from (`key_env`) and which record field carries the signature."""

    key_env: str
    field: str = "sig"

    def __post_init__(self) -> None:
        for name in ("key_env", "field"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"requirements.signature.{name} must be a non-empty string, got {value!r}")

    def key(self) -> bytes:
        value = os.environ.get(self.key_env)
        if not value:
            raise MissingKeyError(
                f"requirements.signature.key_env: the environment variable {self.key_env} is not set"
            )
        return value.encode("utf-8")


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def canonical(record: dict[str, Any], field: str) -> bytes:
    """The signed bytes: the record without `field`, orjson with sorted keys."""
    unsigned = {k: v for k, v in record.items() if k != field}
    if not _finite(unsigned):
        raise UnauthenticatedError("a record with a non-finite number has no canonical encoding")
    try:
        return orjson.dumps(unsigned, option=orjson.OPT_SORT_KEYS)
    except TypeError as err:  # orjson.JSONEncodeError, e.g. an integer beyond 64 bits
        raise UnauthenticatedError(f"the record has no canonical encoding: {err}") from None


def _mac(record: dict[str, Any], signature: RequirementSignature) -> str:
    return hmac.new(signature.key(), canonical(record, signature.field), hashlib.sha256).hexdigest()


def sign(record: dict[str, Any], signature: RequirementSignature) -> dict[str, Any]:
    """The record with its signature field set (any old value is replaced)."""
    return {**record, signature.field: _mac(record, signature)}


def verify(record: dict[str, Any], signature: RequirementSignature | None) -> None:
    """Raise UnauthenticatedError unless the record carries a valid signature (no-op when unconfigured)."""
    if signature is None:
        return
    given = record.get(signature.field)
    if not isinstance(given, str):
        raise UnauthenticatedError(f"field {signature.field!r} with the record's signature is missing")
    if not hmac.compare_digest(given.encode("utf-8", errors="replace"), _mac(record, signature).encode("ascii")):
        raise UnauthenticatedError(f"the signature in field {signature.field!r} does not match the record")
