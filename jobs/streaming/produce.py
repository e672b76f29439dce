"""`pwevent produce`: replay a dataset into the events and requirements topics, slot by slot.

Input: any events and requirements files in the configured formats (docs/formats.md: JSON lines;
for Avro, framed-records files or Avro object container files), or a synthetic stream
generated on the fly (`jobs.synthetic`, written by `jobs.files.write_synthetic`); for an input read as
whole Kafka records, a whole-records file, whose records are sent with their own key, timestamp and
headers (docs/formats.md, "Whole Kafka records"). Only the slots
that hold records are sent (a gap between them costs no time); each one's requirement records go
first, then its events; then the producer waits `--pace` of wall time before the next one (`--pace
0`: none, a backlog at full speed). Lines are sent as they are, bad ones included
(the job routes them to the dead-letter topic), except that with `requirements.signature` configured
every requirement line that is a JSON object is sent signed (jobs.common.provenance). The Kafka
record timestamp is the record's event time when it has one (so `kafka.event_time: kafka` works
too); the key is the user id (a whole record keeps its own key and timestamp).

Every send is checked: a slot's records are flushed and each one's acknowledgement read before the
next slot. A record the broker refuses (for example a timestamp further ahead of the broker's clock
than its `log.message.timestamp.after.max.ms`, an authorization error, a record over the size limit)
stops the run after that slot with the count and the broker's reasons (exit 5); a broker that does
not acknowledge within `--timeout` is exit 4.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from kafka.errors import KafkaError, KafkaTimeoutError

from pwevent.jobs.common.avro_format import input_values
from pwevent.jobs.common.config import Config, EventFields, RequirementFields
from pwevent.jobs.common.files import write_synthetic
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.kafka_record import KafkaRecord
from pwevent.jobs.common.provenance import RequirementSignature, sign
from pwevent.jobs.common.reasons import Rejected
from pwevent.jobs.common.records import field_value, load_object, read_record
from pwevent.jobs.common.slots import duration_arg, pace_arg, parse_time_ms
from pwevent.jobs.common.synthetic import STREAMS, SyntheticStream
from pwevent.jobs.streaming.kafka_io import BrokerUnavailableError, producer
from pwevent.jobs.streaming.settings import KafkaSettings, load_settings

#: A record to send: value, key, timestamp, headers.
Line = tuple[bytes | None, bytes | None, int | None, list[tuple[str, bytes | None]]]
#: How long a slot's records may take to be acknowledged by default (`--timeout`).
DEFAULT_TIMEOUT_S = 60.0
#: Exit code of `pwevent produce` when the broker refused records (README, exit codes).
EXIT_REFUSED = 5


class RecordsRefusedError(RuntimeError):
    """The broker refused records: how many were acknowledged, how many refused, and why (the
    broker's error names with their messages, counted)."""

    def __init__(self, slot: int, acknowledged: int, reasons: Counter[str]) -> None:
        self.slot, self.acknowledged, self.reasons = slot, acknowledged, reasons
        refused = sum(reasons.values())
        listed = "; ".join(f"{count} x {reason}" for reason, count in reasons.most_common(5))
        super().__init__(f"the broker refused {refused} record(s) of slot {slot} ({acknowledged} acknowledged "
                         f"before and in that slot); stopped after slot {slot}. Reasons: {listed}")


def _reason(error: BaseException) -> str:
    """An error as `Name: message`, bounded (a broker message may be long)."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__


def _slots(path: str, fields: EventFields | RequirementFields, config: Config) -> dict[int, list[Line]]:
    """Values grouped by slot; a value without a usable time goes with the one before it. A whole
    record (an input read as whole records) is sent as it is, key, timestamp and headers; a line of
    such a file that is not a whole record is not sent, and counted on stderr."""
    out: dict[int, list[Line]] = defaultdict(list)
    slot, unsent = 1, 0
    for value in input_values(path, fields):
        if fields.whole_records and not isinstance(value, KafkaRecord):
            unsent += 1
            continue
        key = stamp = None
        try:
            # raises only Rejected; a bad value is sent all the same
            view = read_record(value, fields, value.size if isinstance(value, KafkaRecord) else len(value))
            user = field_value(view, fields.user)
            if isinstance(user, (str, int)) and not isinstance(user, bool):
                key = str(user).encode()
            stamp = parse_time_ms(field_value(view, fields.time), fields.time)
            slot = max(1, config.clock.slot_of(stamp))
        except (ValueError, KeyError, TypeError):
            pass
        if isinstance(value, KafkaRecord):
            out[slot].append((value.value, value.key, value.timestamp_ms, list(value.headers)))
        else:
            out[slot].append((value, key, stamp if stamp is not None and stamp >= 0 else None, []))
    if unsent:
        print(f"pwevent produce: {unsent} line(s) of {path} are not whole records (docs/formats.md, \"Whole Kafka "
              "records\"): not sent", file=sys.stderr)
    return out


def occupied_slots(*slots: dict[int, list[Line]], first: int = 1, last: int | None = None) -> list[int]:
    """The slots from `first` to `last` (default: the last one) that hold a record, in order."""
    held = {slot for grouped in slots for slot, lines in grouped.items() if lines}
    return sorted(slot for slot in held if slot >= first and (last is None or slot <= last))


def _signed(line: bytes, signature: RequirementSignature) -> bytes:
    """A requirement line with its signature; a line that is not a JSON object goes as it is."""
    try:
        obj = load_object(line)
    except Rejected:
        return line
    return dumps(sign(obj, signature)).encode()


def produce_files(
    kafka: KafkaSettings, config: Config, events_path: str, requirements_path: str, pace_s: float,
    on_slot: Callable[[int, float], None] | None = None, first_slot: int = 1, last_slot: int | None = None,
    before_slot: Callable[[int, float], None] | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
) -> int:
    """Send the files slot by slot, only the slots from `first_slot` to `last_slot` that hold records,
    `pace_s` apart; returns the number of messages the broker acknowledged. `before_slot(slot, time)`
    runs before a slot's first message, `on_slot(slot, time)` once all of them are acknowledged.
    Raises RecordsRefusedError after a slot in which the broker refused any record,
    BrokerUnavailableError when no broker answers the first connection or a slot is not acknowledged
    within `timeout_s`."""
    requirements = _slots(requirements_path, config.requirements, config)
    signature = config.requirements.signature
    if signature is not None:
        requirements = {slot: [(_signed(value, signature) if value is not None else None, key, stamp, headers)
                               for value, key, stamp, headers in lines]
                        for slot, lines in requirements.items()}
    events = _slots(events_path, config.events, config)
    client = producer(kafka, connect_timeout_s=timeout_s)
    sent = 0
    next_at = time.monotonic()
    try:
        for slot in occupied_slots(requirements, events, first=first_slot, last=last_slot):
            if before_slot:
                before_slot(slot, time.time())
            futures, reasons = [], Counter[str]()
            for topic, lines in ((kafka.topics["requirements"], requirements.get(slot, [])),
                                 (kafka.topics["events"], events.get(slot, []))):
                for value, key, stamp, headers in lines:
                    try:
                        futures.append(client.send(topic, value=value, key=key, timestamp_ms=stamp,
                                                   headers=headers or None))
                    except KafkaError as err:  # refused before it left (too large, no metadata in time)
                        reasons[_reason(err)] += 1
            try:
                client.flush(timeout=timeout_s)
            except KafkaTimeoutError:
                raise BrokerUnavailableError(f"slot {slot}: the broker did not acknowledge its records within "
                                             f"{timeout_s:g} s (--timeout)") from None
            for future in futures:
                if future.failed():
                    reasons[_reason(future.exception)] += 1
                else:
                    sent += 1
            if reasons:
                raise RecordsRefusedError(slot, sent, reasons)
            if on_slot:
                on_slot(slot, time.time())
            next_at += pace_s
            time.sleep(max(0.0, next_at - time.monotonic()))
    finally:
        client.close()
    return sent


def cmd_produce(args: argparse.Namespace) -> int:
    config, settings = load_settings(args.config)
    if args.events:
        if not args.requirements:
            print("pwevent produce: --events needs --requirements", file=sys.stderr)
            return 2
        events, requirements = args.events, args.requirements
    else:
        folder = args.out or tempfile.mkdtemp(prefix="pwevent-produce-")
        stream = SyntheticStream(args.stream, args.users, args.slots, args.seed)
        ev, rq = write_synthetic(stream, folder, args.epsilon, args.window, config.slot_ms, args.dynamic,
                                 args.types, args.change_every, config.requirements.signature, config.origin_ms)
        events, requirements = str(ev), str(rq)
        print(f"pwevent produce: generated {args.stream} ({args.users} users, {args.slots} slots) in {folder}",
              file=sys.stderr)
    pace = args.pace / 1000

    def show(slot: int, _: float) -> None:
        if not args.quiet:
            print(f"\rproduce: slot {slot} sent", end="", file=sys.stderr, flush=True)

    try:
        sent = produce_files(settings.kafka, config, events, requirements, pace, show, timeout_s=args.timeout / 1000)
    except RecordsRefusedError as err:
        print(f"\npwevent produce: {err}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"\npwevent produce: {sent} messages sent and acknowledged", file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "produce", help="replay a dataset into the Kafka topics, paced slot by slot",
        description="Send an events file and a requirements file (or a generated synthetic stream) to the "
        "configured events and requirements topics, one slot that holds records per --pace of wall time (empty "
        "slots are skipped). Every record's "
        f"acknowledgement is checked: a refused record stops the run after its slot (exit {EXIT_REFUSED}, with "
        "the count and the broker's reasons); no acknowledgement within --timeout is exit 4.",
    )
    p.add_argument("--config", required=True, help="YAML configuration (kafka: section for topics/bootstrap)")
    p.add_argument("--events", help="events file in events.format: JSON lines, or for Avro and Protobuf a "
                   "framed-records file (one base64 Kafka value a line), for plain Avro also an Avro object container "
                   "file; when a mapping names a part of the Kafka record ($key, $timestamp, $headers.<name>), a "
                   "whole-records file, whose records are sent with their own key, timestamp and headers (default: "
                   "generate a synthetic stream)")
    p.add_argument("--requirements", help="requirements file in requirements.format (as --events)")
    p.add_argument("--pace", default="1s", type=pace_arg, help="wall time between two slots that hold records, "
                   "e.g. 500ms, 2s (default 1s); 0: a backlog at full speed")
    p.add_argument("--timeout", default=f"{DEFAULT_TIMEOUT_S:g}s", type=duration_arg,
                   help="how long the broker may take to answer the first connection, and to acknowledge one "
                   f"slot's records, before the run fails with exit code 4 (default {DEFAULT_TIMEOUT_S:g}s); a "
                   f"refused record stops it with exit code {EXIT_REFUSED}")
    p.add_argument("--stream", choices=STREAMS, default="Sin", help="synthetic stream to generate")
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--slots", type=int, default=120)
    p.add_argument("--epsilon", type=float, default=0.6, help="lowest personalized budget E")
    p.add_argument("--window", type=int, default=40, help="largest personalized window w")
    p.add_argument("--dynamic", action="store_true", help="dynamic backward/forward requirements")
    p.add_argument("--types", type=int, default=10)
    p.add_argument("--change-every", type=int, default=50)
    p.add_argument("--seed", type=int, default=0, help="seed of the generated data (not of the noise)")
    p.add_argument("--out", help="folder for the generated files")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_produce)
