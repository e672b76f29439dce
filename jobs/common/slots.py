"""Event time and slots: times are ISO-8601 or epoch milliseconds; slot `FIRST_SLOT` starts at the origin.

`SlotClock` is the slot rule of every Python host (the replay, the evaluator's datasets, the demo
files, Membership, the streaming job's Population); the JVM's `pwevent.flink.time.SlotRules` is its
twin, with `FIRST_SLOT` from the generated contract (jobs/streaming/jvm_contract)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    import numpy as np

DAY_MS = 86_400_000
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": DAY_MS}


def parse_duration_ms(text: Any, field: str = "slot") -> int:
    """'60s', '15m', '100m', '1h', '1d', '500ms' -> milliseconds."""
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|h|d)\s*", str(text)) if isinstance(text, str) else None
    if not match or int(match.group(1)) == 0:
        raise ValueError(f"{field} must be a positive duration such as 60s, 15m, 1h or 1d, got {text!r}")
    return int(match.group(1)) * _UNITS_MS[match.group(2)]


def duration_arg(text: str) -> int:
    """A command-line duration in milliseconds: `parse_duration_ms`'s forms, or a bare positive number
    of seconds (`30`, `2.5`); a bad value becomes a usage error, not a traceback."""
    import argparse

    if re.fullmatch(r"\s*\d+(\.\d+)?\s*", text) and math.isfinite(seconds := float(text)):
        ms = round(seconds * 1000)
        if ms > 0:
            return ms
    try:
        return parse_duration_ms(text, "the value")
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err} (or a number of seconds)") from None


def pace_arg(text: str) -> int:
    """`duration_arg`, or zero (`0`, `0s`, `0ms`...): no wait at all."""
    if re.fullmatch(r"\s*0+(\.0+)?\s*(ms|s|m|h|d)?\s*", text):
        return 0
    return duration_arg(text)


#: The whitespace a time string may have around it: JSON's (space, tab, line feed, carriage return).
TIME_SPACE = " \t\n\r"
#: Epoch milliseconds as text: ASCII digits, an optional minus.
_EPOCH_MS = re.compile(r"-?[0-9]+")
#: The ISO-8601 times taken: a date, or a date and a time (T, t or a space between), with optional
#: seconds, a fraction of 1 to 9 digits after them, and an optional offset (Z, z or +-HH:MM). ASCII only.
_ISO_TIME = re.compile(r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})"
                       r"(?:[Tt ](?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})"
                       r"(?::(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]{1,9}))?)?"
                       r"(?P<offset>[Zz]|(?P<sign>[+-])(?P<offhour>[0-9]{2}):(?P<offminute>[0-9]{2}))?)?")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _iso_ms(text: str) -> int | None:
    """The epoch milliseconds of an ISO-8601 time of `_ISO_TIME`'s form that exists (no February 30, no
    hour 24, no second 60, an offset under 24 hours), the fraction's digits beyond the millisecond
    dropped (toward the past); None otherwise."""
    match = _ISO_TIME.fullmatch(text)
    if match is None:
        return None
    part = {name: int(value) for name, value in match.groupdict().items()
            if value is not None and name not in ("offset", "sign", "fraction")}
    if part.get("offminute", 0) > 59 or part.get("offhour", 0) > 23:
        return None
    try:
        moment = datetime(part["year"], part["month"], part["day"], part.get("hour", 0), part.get("minute", 0),
                          part.get("second", 0), tzinfo=UTC)
    except ValueError:
        return None
    offset_ms = (part.get("offhour", 0) * 60 + part.get("offminute", 0)) * 60_000
    fraction_ms = int((match["fraction"] or "").ljust(3, "0")[:3])
    return (moment - _EPOCH) // _MS + fraction_ms - (offset_ms if match["sign"] == "+" else -offset_ms)


def parse_time_ms(value: Any, field: str = "time") -> int:
    """ISO-8601 (`_ISO_TIME`: a time without an offset is UTC; a date alone is its midnight UTC) or
    epoch milliseconds (a number, a fraction dropped toward the past; or a string of ASCII digits)
    -> epoch milliseconds. A string may have JSON whitespace (TIME_SPACE) around it, nothing else:
    no other digits, no other spaces (docs/formats.md, "Times")."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be ISO-8601 or epoch milliseconds, got {value!r}")
    if isinstance(value, datetime):  # YAML reads an unquoted ISO-8601 time as a datetime
        return ((value if value.tzinfo else value.replace(tzinfo=UTC)) - _EPOCH) // _MS
    if isinstance(value, date):  # ... and an unquoted date as a date: its midnight, UTC
        return (datetime(value.year, value.month, value.day, tzinfo=UTC) - _EPOCH) // _MS
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"{field} must be finite, got {value!r}")
        return math.floor(value)
    if isinstance(value, str):
        text = value.strip(TIME_SPACE)
        if _EPOCH_MS.fullmatch(text):
            return int(text)
        ms = _iso_ms(text)
        if ms is not None:
            return ms
    raise ValueError(f"{field} must be ISO-8601 or epoch milliseconds, got {value!r}")


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC (`parse_time_ms` reads it back exactly)."""
    return (_EPOCH + ms * _MS).isoformat().replace("+00:00", "Z")


def slots_per_day(length_ms: int) -> int:
    """`SlotClock.day` for a slot of `length_ms`: 86,400,000 / length_ms when whole, else 1."""
    return DAY_MS // length_ms if DAY_MS % length_ms == 0 else 1


#: The number of the slot that starts at the origin; a time before it is in an earlier one.
FIRST_SLOT = 1


@dataclass(frozen=True)
class SlotClock:
    """Slot t covers [origin + (t - FIRST_SLOT) length, origin + (t - FIRST_SLOT + 1) length)."""

    origin_ms: int
    length_ms: int

    @overload
    def slot_of(self, time_ms: int) -> int: ...

    @overload
    def slot_of(self, time_ms: np.ndarray) -> np.ndarray: ...

    def slot_of(self, time_ms: int | np.ndarray) -> int | np.ndarray:
        """The slot holding `time_ms` (an array: each time's); below `FIRST_SLOT` means before the origin."""
        return (time_ms - self.origin_ms) // self.length_ms + FIRST_SLOT

    def before_origin(self, time_ms: int) -> bool:
        """Whether `time_ms` is in no slot: before the origin (an event's `before_origin` reject)."""
        return self.slot_of(time_ms) < FIRST_SLOT

    def in_force_from(self, time_ms: int) -> int:
        """The slot a requirement record of `time_ms` is in force from: its own slot, and the first
        slot for one from before the origin (a preference declared before the job began counts from
        its start; docs/formats.md, Requirement)."""
        return max(FIRST_SLOT, self.slot_of(time_ms))

    @property
    def day(self) -> int:
        """The slots in a day: a day's length over the slot's when the slot divides a day, else 1 (a
        slot of a day or longer, or one that does not divide it). Adaptive's bursts read it
        (docs/mechanisms.md section 14, "A quarter of a day")."""
        return slots_per_day(self.length_ms)

    def start_ms(self, slot: int) -> int:
        return self.origin_ms + (slot - FIRST_SLOT) * self.length_ms

    def end_ms(self, slot: int) -> int:
        return self.start_ms(slot + 1)

    def last_ms(self, slot: int) -> int:
        """The last millisecond of `slot`: its timers' time, and where a watermark closes it."""
        return self.end_ms(slot) - 1

    def closed(self, slot: int, watermark_ms: int) -> bool:
        """Whether a watermark of `watermark_ms` has closed `slot` (a record of it is late)."""
        return self.last_ms(slot) <= watermark_ms

    def closed_by(self, watermark_ms: int) -> int:
        """The last slot a watermark of `watermark_ms` has closed: every instant of it is at or before
        the watermark (its end minus 1 ms is, as for the slot timers; docs/streaming.md, "Time")."""
        return self.slot_of(watermark_ms + 1) - 1
