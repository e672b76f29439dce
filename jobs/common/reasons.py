"""Why a record is rejected: the reasons of the dead-letter topic and of the replay's rejects file
(docs/formats.md, "Reject / dead letter"), and the exception the parsers raise with one. A module of its own
so that the rules that decide a reason (jobs/common/requirement_rules.py) need not import the parsers
(jobs/common/records.py), which import the configuration, which uses those rules."""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    UNPARSABLE = "unparsable"
    UNDECODABLE = "undecodable"
    UNKNOWN_SCHEMA = "unknown_schema"
    TOO_LARGE = "too_large"
    TOO_DEEP = "too_deep"
    INVALID_NUMBER = "invalid_number"
    DUPLICATE_KEY = "duplicate_key"
    MISSING_FIELD = "missing_field"
    MISTYPED_FIELD = "mistyped_field"
    INVALID_USER = "invalid_user"
    PARSER_ERROR = "parser_error"
    UNKNOWN_USER = "unknown_user"
    OUT_OF_DOMAIN = "out_of_domain"
    BEFORE_ORIGIN = "before_origin"
    LATE = "late"
    TOO_FAR_AHEAD = "too_far_ahead"
    INVALID_REQUIREMENT = "invalid_requirement"
    REQUIREMENT_CHANGE_UNDER_FIXED = "requirement_change_under_fixed_mechanism"
    INFEASIBLE_BACKWARD = "infeasible_backward_requirement_projected"
    UNAUTHENTICATED_REQUIREMENT = "unauthenticated_requirement"
    SUPERSEDED_BEFORE_ORIGIN = "superseded_before_origin"


#: The detail of a `too_far_ahead` dead letter.
TOO_FAR_AHEAD_DETAIL = "time is more than flink.max_lead ahead of its partition's event time"
#: The detail of a `before_origin` reject.
BEFORE_ORIGIN_DETAIL = "time is before the configured origin"
#: The detail of a `superseded_before_origin` requirement record.
SUPERSEDED_BEFORE_ORIGIN_DETAIL = ("a later requirement record of this user from before the origin is the one in "
                                   "force from slot 1")
#: The detail of a `late` requirement record (`str.format` with its `slot`).
LATE_REQUIREMENT_DETAIL = "slot {slot} had closed when the requirement arrived"


class Rejected(ValueError):
    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail
