"""Whole-records files for the tests (docs/formats.md, "Whole Kafka records"): a generated JSON-lines
input rewritten as whole Kafka records, with the user id, the time or both taken out of the value
and put in the key, the timestamp or a header, as a team's topic would carry them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pwevent.jobs.common.kafka_record import KafkaRecord
from pwevent.jobs.common.slots import parse_time_ms

#: Events: the user id in the key (a string), the time as the Kafka timestamp, the value in the value.
EVENTS = {"user": "$key", "time": "$timestamp", "value": "value"}
#: Requirements: the user id in the header `user-id`, the time as the Kafka timestamp.
REQUIREMENTS = {"user": "$headers.user-id", "time": "$timestamp"}
#: Events with a JSON key whose member `id` is the user id.
JSON_KEY_EVENTS = {"user": "$key.id", "time": "$timestamp", "value": "value", "key_format": "json"}


def event_record(flat: dict[str, Any], json_key: bool = False) -> KafkaRecord:
    """A generated event as a whole record: user in the key, time the timestamp, a header beside."""
    user = flat.pop("user")
    key = json.dumps({"id": user}).encode() if json_key else str(user).encode()
    stamp = parse_time_ms(flat.pop("time"), "time")
    return KafkaRecord(json.dumps(flat).encode(), key, stamp, (("source", b"sensor-gateway"),))


def requirement_record(flat: dict[str, Any]) -> KafkaRecord:
    """A generated requirement record as a whole record: user in the header `user-id`, time the
    timestamp, the requirement in the value, no key."""
    user = str(flat.pop("user"))
    stamp = parse_time_ms(flat.pop("time"), "time")
    return KafkaRecord(json.dumps(flat).encode(), None, stamp, (("trace", b"t-1"), ("user-id", user.encode())))


def rewrite(path: str, convert: Callable[[dict[str, Any]], KafkaRecord], out: Path | None = None) -> str:
    """The JSON-lines file `path` as a whole-records file (`out`, default beside it)."""
    target = out or Path(path).with_suffix(".records")
    lines = Path(path).read_text().splitlines()
    target.write_bytes(b"".join(convert(json.loads(line)).line() + b"\n" for line in lines))
    return str(target)
