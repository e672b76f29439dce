"""Input records (events, requirement updates), their parsing, and rejects with reasons.

Shared by the replay and the streaming job: a record that cannot be used becomes a reject (the
replay's rejects file, the job's dead-letter topic) carrying the original text, the reason and
where it came from. Formats: docs/formats.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pwevent.jobs.common import provenance
from pwevent.jobs.common.config import EventFields, RequirementFields
from pwevent.jobs.common.slots import parse_time_ms
from pwevent.operators.domain import Domain, OutOfDomainError
from pwevent.state.errors import InvalidRequirementError
from pwevent.state.requirements import DynamicRequirement, Requirement, RequirementCaps, parse_requirement


class Reason(StrEnum):
    UNPARSABLE = "unparsable"
    MISSING_FIELD = "missing_field"
    MISTYPED_FIELD = "mistyped_field"
    UNKNOWN_USER = "unknown_user"
    OUT_OF_DOMAIN = "out_of_domain"
    BEFORE_ORIGIN = "before_origin"
    LATE = "late"
    TOO_FAR_AHEAD = "too_far_ahead"
    INVALID_REQUIREMENT = "invalid_requirement"
    REQUIREMENT_CHANGE_UNDER_FIXED = "requirement_change_under_fixed_mechanism"
    INFEASIBLE_BACKWARD = "infeasible_backward_requirement_projected"
    UNAUTHENTICATED_REQUIREMENT = "unauthenticated_requirement"


class Rejected(ValueError):
    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Event:
    user: str
    time_ms: int
    cell: int


@dataclass(frozen=True)
class RequirementUpdate:
    user: str
    time_ms: int
    requirement: Requirement | DynamicRequirement


def _object(text: str | bytes) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise Rejected(Reason.UNPARSABLE, f"not JSON: {err}") from None
    if not isinstance(obj, dict):
        raise Rejected(Reason.UNPARSABLE, "not a JSON object")
    return obj


def _field(obj: dict[str, Any], name: str) -> Any:
    if name not in obj or obj[name] is None:
        raise Rejected(Reason.MISSING_FIELD, f"field {name!r} is missing")
    return obj[name]


def _user(obj: dict[str, Any], name: str) -> str:
    user = _field(obj, name)
    if isinstance(user, bool) or not isinstance(user, (str, int)) or user == "":
        raise Rejected(Reason.MISTYPED_FIELD, f"field {name!r} must be a non-empty string or an integer")
    return str(user)


def _time(obj: dict[str, Any], name: str, fallback_ms: int | None) -> int:
    if name not in obj and fallback_ms is not None:
        return fallback_ms
    try:
        return parse_time_ms(_field(obj, name), name)
    except ValueError as err:
        if isinstance(err, Rejected):
            raise
        raise Rejected(Reason.MISTYPED_FIELD, str(err)) from None


def parse_event(text: str | bytes, fields: EventFields, domain: Domain, record_time_ms: int | None = None) -> Event:
    """An event record -> (user, time, cell). `record_time_ms`: the Kafka timestamp, used when the
    configured time field is absent."""
    obj = _object(text)
    user = _user(obj, fields.user)
    time_ms = _time(obj, fields.time, record_time_ms)
    if fields.lat and fields.lon:
        value: Any = (_field(obj, fields.lat), _field(obj, fields.lon))
    else:
        value = _field(obj, fields.value)
    try:
        return Event(user, time_ms, domain.cell(value))
    except OutOfDomainError as err:
        raise Rejected(Reason.OUT_OF_DOMAIN, str(err)) from None


def parse_requirement_update(text: str | bytes, fields: RequirementFields, caps: RequirementCaps) -> RequirementUpdate:
    """A requirement record: {user, time, w, epsilon} or {user, time, backward: {..}, forward: {..}}."""
    obj = _object(text)
    try:
        provenance.verify(obj, fields.signature)
    except provenance.UnauthenticatedError as err:
        raise Rejected(Reason.UNAUTHENTICATED_REQUIREMENT, str(err)) from None
    user = _user(obj, fields.user)
    time_ms = _time(obj, fields.time, None)
    try:
        requirement = parse_requirement(obj)
        caps.check(requirement)
    except InvalidRequirementError as err:
        raise Rejected(Reason.INVALID_REQUIREMENT, str(err)) from None
    return RequirementUpdate(user, time_ms, requirement)


def reject_record(source: str, position: Any, reason: Reason, detail: str, original: str | bytes) -> dict[str, Any]:
    """The dead-letter / rejects line: where it came from, why, and the original bytes as text."""
    text = original.decode("utf-8", errors="replace") if isinstance(original, bytes) else original
    return {"source": source, "position": position, "reason": reason.value, "detail": detail, "original": text}


def unknown_user(user: str, slot: int) -> str:
    """The detail of an `unknown_user` reject: one per user and slot, for the user's latest event there
    (its earlier events in the slot collapse into that one before the user is looked up)."""
    return (f"user {user!r} has no requirement in force at slot {slot} (its latest event in the slot; "
            "earlier ones collapse into it)")
