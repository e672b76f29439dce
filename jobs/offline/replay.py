"""`pwevent replay`: run a mechanism over input files (JSON lines; framed-records, Avro container or
whole-records files: docs/formats.md), without Flink or Kafka.

The same classes as the streaming job (ledgers, policies, release step) driven one slot at a time
over ledger classes, so history replays exactly and fast. Bad records go to the rejects file with
their reason; nothing stops the run.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from enum import Enum
from typing import IO, Any

import numpy as np

from pwevent.jobs.common.avro_format import CONTAINER_MAGIC, container_values, decoder, framed_line, unframed_line
from pwevent.jobs.common.config import Config, InputFormat, Statistic
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.kafka_record import KafkaRecord, kept_value, line_limit
from pwevent.jobs.common.progress import Progress
from pwevent.jobs.common.reasons import BEFORE_ORIGIN_DETAIL, SUPERSEDED_BEFORE_ORIGIN_DETAIL, Reason, Rejected
from pwevent.jobs.common.records import (
    ORIGINAL_HEAD_BYTES,
    Original,
    RequirementUpdate,
    parse_requirement_update,
    reject_record,
    unknown_user,
)
from pwevent.jobs.common.release import release_record
from pwevent.jobs.common.requirement_rules import Action
from pwevent.jobs.common.shared_budget import SharedBudget
from pwevent.jobs.common.statistic_cells import Observed, observe
from pwevent.operators.noise import Randomness, make_randomness


@dataclass
class ReplaySummary:
    slots: int = 0
    users: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    rejects: Counter[str] = field(default_factory=Counter)
    noise: str = ""
    beyond: int = 0  # valid records of slots after the horizon: not replayed (not rejected either)
    records: Counter[str] = field(default_factory=Counter)  # per input: the records read
    usable: Counter[str] = field(default_factory=Counter)  # per input: events counted in a slot, requirements applied

    @property
    def unusable(self) -> list[str]:
        """The inputs that held records none of which was usable (`pwevent replay` exits 6)."""
        return [source for source in ("events", "requirements") if self.records[source] and not self.usable[source]]

    def render(self) -> str:
        lines = [
            f"slots {self.slots}, registered users {self.users}, noise {self.noise}",
            "decisions: " + ", ".join(f"{k} {v}" for k, v in sorted(self.kinds.items())),
            "rejects: " + (", ".join(f"{k} {v}" for k, v in sorted(self.rejects.items())) or "none"),
        ]
        lines.append("usable: " + ", ".join(f"{source} {self.usable[source]} of {self.records[source]} records"
                                            for source in ("events", "requirements")))
        if self.beyond:
            lines.append(f"{self.beyond} valid records of slots after slot {self.slots} were not replayed")
        for source in self.unusable:
            lines.append(f"NO USABLE RECORD: none of the {self.records[source]} {source} records counted in a slot "
                         "(see the rejects)")
        return "\n".join(lines)


_MB = 1 << 20


def _lines(path: str, max_bytes: int) -> Iterator[tuple[int, int, bytes | Original]]:
    """The non-blank lines of a file as (number from 1, byte offset, bytes); a line longer than
    `max_bytes` is never held whole: it comes as its Original (head, length, digest), read in
    bounded pieces."""
    with open(path, "rb") as handle:
        number, offset = 0, 0
        while piece := handle.readline(max_bytes + 1):
            number += 1
            start, offset = offset, offset + len(piece)
            if len(piece) <= max_bytes or piece.endswith(b"\n"):
                line = piece.rstrip(b"\n")
                if line.strip():
                    yield number, start, line
                continue
            head, length, digest = b"", 0, hashlib.sha256()
            while piece:
                body = piece.removesuffix(b"\n")  # the newline ends the line; it is not part of the record
                head += body[:ORIGINAL_HEAD_BYTES - len(head)]
                length += len(body)
                digest.update(body)
                piece = b"" if len(body) < len(piece) else handle.readline(1 << 20)
                offset += len(piece)
            yield number, start, Original(head, length, digest.hexdigest())


@dataclass(frozen=True)
class SlotEvents:
    """The valid events of a file in columns, sorted by (time, line number), without their text (a
    reject re-reads its line at `offsets`): ~40 bytes per event instead of the parsed objects and
    lines (900k events took 570 MB that way)."""

    path: str
    slots: np.ndarray
    users: np.ndarray  # index into `names`
    cells: np.ndarray  # one row per statistic (Config.statistics)
    numbers: np.ndarray
    offsets: np.ndarray
    names: list[str]

    @property
    def last_slot(self) -> int:
        return int(self.slots[-1]) if len(self.slots) else 0

    def rows(self, slot: int) -> range:
        """The rows of `slot`'s events, in (time, line number) order."""
        return range(int(np.searchsorted(self.slots, slot)), int(np.searchsorted(self.slots, slot, side="right")))


class LineKind(Enum):
    """What a line of an input file holds (docs/formats.md): a JSON-lines record, a framed-records
    line (a Kafka value in base64: the Avro and Protobuf formats) or a whole-records line (an input read as whole
    Kafka records)."""

    JSON = "json"
    FRAMED = "framed"
    WHOLE = "whole"

    @classmethod
    def of(cls, fields: InputFormat) -> LineKind:
        if fields.whole_records:
            return cls.WHOLE
        return cls.JSON if fields.format == "json" else cls.FRAMED

    def limit(self, max_bytes: int) -> int:
        """Longest line read: a record of `max_bytes`, in base64 for a framed-records file, and for a
        whole-records file `kafka_record.line_limit`."""
        if self is LineKind.WHOLE:
            return line_limit(max_bytes)
        return (max_bytes + 2) // 3 * 4 if self is LineKind.FRAMED else max_bytes

    def record(self, line: bytes) -> bytes | KafkaRecord:
        """What the parser reads of a line; Rejected `undecodable` when the line holds none."""
        if self is LineKind.WHOLE:
            return KafkaRecord.of_line(line)
        return unframed_line(line) if self is LineKind.FRAMED else line


def _read_line(handle: IO[bytes], offset: int, kind: LineKind) -> bytes:
    """What a reject keeps of the record at `offset` of an input file (`kept_value`)."""
    handle.seek(offset)
    return kept_value(kind.record(handle.readline().rstrip(b"\n")))


def _as_framed_lines(path: str, fields: InputFormat, stack: ExitStack) -> str:
    """The file the replay reads for input `path`: `path` itself (JSON lines, a framed-records file),
    or for format `avro` an Avro object container file written out as a framed-records file (one
    record per line, its Avro datum in base64: what the topic's values hold; docs/formats.md)."""
    if fields.format != "avro" or fields.whole_records:
        return path
    with open(path, "rb") as handle:
        if handle.read(len(CONTAINER_MAGIC)) != CONTAINER_MAGIC:
            return path
    spool = os.path.join(stack.enter_context(tempfile.TemporaryDirectory(prefix="pwevent-avro-")), "records.b64")
    with open(spool, "wb") as out:
        for value in container_values(path, decoder(fields).schema):
            out.write(framed_line(value) + b"\n")
    return spool


class Replay:
    """One replay run; `run` drives it, the attributes hold what it read and decided."""

    def __init__(self, config: Config, rng: Randomness, reject: Callable[[dict[str, Any]], None]) -> None:
        self.config = config
        self.rng = rng
        self.summary = ReplaySummary(noise=rng.label)
        self._reject_sink = reject
        self._shown: dict[str, str] = {}  # a file read in place of an input -> the input's name

    def _reject(
        self, source: str, position: Any, reason: Reason, detail: str, original: str | bytes | Original
    ) -> None:
        self._count_reject(reject_record(source, position, reason, detail, original))

    def _count_reject(self, record: dict[str, Any]) -> None:
        self.summary.rejects[record["reason"]] += 1
        self._reject_sink(record)

    def _valid(self, path: str, source: str, parse: Callable[[bytes | KafkaRecord], Any], progress: Progress | None,
               kind: LineKind = LineKind.JSON) -> Iterator[tuple[int, int, Any, bytes]]:
        """(line number, offset, record, what a reject keeps of it) of every record of `path` that
        parses and, for an event, is timed at or after the origin (a requirement record from before it
        is in force from slot 1, `SlotClock.in_force_from`); the others are rejected with their reason.
        `kind`: what its lines hold."""
        clock = self.config.clock
        max_bytes = self.config.max_record_bytes
        total_mb = max(1, os.path.getsize(path) // _MB) if progress else 0
        shown = self._shown.get(path, path)
        for number, offset, line in _lines(path, kind.limit(max_bytes)):
            self.summary.records[source] += 1
            if progress and number % 65536 == 0:
                progress(min(offset // _MB, total_mb), total_mb, f"reading {source} (MB)")
            if isinstance(line, Original):
                detail = f"{line.length} bytes, more than the {max_bytes} allowed"
                self._reject(source, f"{shown}:{number}", Reason.TOO_LARGE, detail, line)
                continue
            try:
                read = kind.record(line)
                line = kept_value(read)
                record = parse(read)
            except Rejected as err:
                self._reject(source, f"{shown}:{number}", err.reason, err.detail, line)
                continue
            if source == "events" and clock.before_origin(record.time_ms):
                self._reject(source, f"{shown}:{number}", Reason.BEFORE_ORIGIN, BEFORE_ORIGIN_DETAIL, line)
                continue
            yield number, offset, record, line
        if progress:
            progress(total_mb, total_mb, f"reading {source} (MB)")

    def _read(self, path: str, source: str, parse: Callable[[bytes | KafkaRecord], Any],
              progress: Progress | None, kind: LineKind = LineKind.JSON) -> dict[int, list[Any]]:
        clock = self.config.clock
        items = sorted((record.time_ms, number, (record, line))
                       for number, _, record, line in self._valid(path, source, parse, progress, kind))
        by_slot: dict[int, list[Any]] = defaultdict(list)
        for time_ms, number, payload in items:  # in time order, so the latest record before the origin wins
            by_slot[clock.in_force_from(time_ms)].append((number, payload))
        return by_slot

    def _read_events(self, path: str, parse: Callable[[bytes | KafkaRecord], Observed], progress: Progress | None,
                     kind: LineKind = LineKind.JSON) -> SlotEvents:
        index: dict[str, int] = {}
        k = len(self.config.statistics)
        cell_columns = [f"cell{i}" for i in range(k)]
        columns = {name: array("q") for name in ("time", "number", "offset", "user", *cell_columns)}
        for number, offset, event, _ in self._valid(path, "events", parse, progress, kind):
            columns["time"].append(event.time_ms)
            columns["number"].append(number)
            columns["offset"].append(offset)
            columns["user"].append(index.setdefault(event.user, len(index)))
            for name, cell in zip(cell_columns, event.cells, strict=True):
                columns[name].append(cell)
        data = {name: np.frombuffer(column, dtype=np.int64) if len(column) else np.zeros(0, dtype=np.int64)
                for name, column in columns.items()}
        order = np.lexsort((data["number"], data["time"]))
        slots = self.config.clock.slot_of(data["time"][order])
        cells = np.stack([data[name][order] for name in cell_columns])
        return SlotEvents(path, slots, data["user"][order], cells, data["number"][order],
                          data["offset"][order], list(index))

    def _apply_requirement(
        self, engine: SharedBudget, slot: int, position: str, update: RequirementUpdate, line: bytes
    ) -> None:
        decision = engine.declare(update.user, slot, update.requirement)
        if decision.action is Action.REJECT:
            assert decision.reason is not None
            self._reject("requirements", position, decision.reason, decision.detail, line)
        else:
            self.summary.usable["requirements"] += 1

    def _superseded(self, engine: SharedBudget, updates: list[RequirementUpdate]) -> set[int]:
        """The positions in one slot's requirement records (in the order they apply) of those a later
        record of the same user from before the origin supersedes (`Membership.superseded`)."""
        by_user: dict[str, list[int]] = defaultdict(list)
        for n, update in enumerate(updates):
            by_user[update.user].append(n)
        origin = self.config.clock.origin_ms
        return {positions[k] for positions in by_user.values()
                for k in engine.membership.superseded([(updates[n].time_ms, updates[n].requirement)
                                                       for n in positions], origin)}

    def run(
        self,
        events_path: str,
        requirements_path: str,
        on_release: Callable[[dict[str, Any]], None],
        on_truth: Callable[[dict[str, Any]], None] | None,
        spend_sink: Callable[[dict[str, Any]], None] | None,
        progress: Progress | None = None,
        through: int | None = None,
    ) -> ReplaySummary:
        """Replay slots 1 to `through`, the public horizon: every one of them is released, whether or
        not anything arrived, as the job's schedule releases them (docs/streaming.md, "Time"); valid
        records of later slots are counted in the summary, not replayed. `through` None: to the last
        slot that holds a valid event or requirement record, which depends on the input (a research
        run over a finished dataset; `pwevent replay` always asks for a horizon)."""
        with ExitStack() as stack:
            config = self.config
            event_lines, requirement_lines = LineKind.of(config.events), LineKind.of(config.requirements)
            events_file = _as_framed_lines(events_path, config.events, stack)
            requirements_file = _as_framed_lines(requirements_path, config.requirements, stack)
            self._shown.update({events_file: events_path, requirements_file: requirements_path})
            requirements = self._read(
                requirements_file, "requirements",
                lambda line: parse_requirement_update(line, config.requirements, config.caps, config.max_record_bytes,
                                                     config.pseudonyms),
                progress, requirement_lines,
            )
            events = self._read_events(
                events_file,
                lambda line: observe(line, config, max_bytes=config.max_record_bytes, pseudonyms=config.pseudonyms),
                progress, event_lines,
            )
            engine = SharedBudget(config, self.rng, spend_sink)
            last_slot = max([*requirements, events.last_slot], default=0) if through is None else through
            self.summary.beyond = (sum(len(records) for slot, records in requirements.items() if slot > last_slot)
                                   + int(np.count_nonzero(events.slots > last_slot)))
            smoothers = [config.smoother(statistic) for statistic in config.statistics]
            with open(events_file, "rb") as originals:
                for slot in range(1, last_slot + 1):
                    records = requirements.get(slot, [])
                    superseded = self._superseded(engine, [update for _, (update, _) in records])
                    for n, (number, (update, line)) in enumerate(records):
                        position = f"{requirements_path}:{number}"
                        if n in superseded:
                            self._reject("requirements", position, Reason.SUPERSEDED_BEFORE_ORIGIN,
                                         SUPERSEDED_BEFORE_ORIGIN_DETAIL, line)
                        else:
                            self._apply_requirement(engine, slot, position, update, line)
                    latest: dict[int, int] = {}
                    for row in events.rows(slot):
                        latest[int(events.users[row])] = row  # the last event of a user in a slot wins (section 1)
                    # Users without a class, after the slot's requirement records: the default, if configured,
                    # registers them (in name order, as the job's Population applies a slot's changes).
                    for name in sorted(events.names[u] for u in latest if engine.index_of(events.names[u]) is None):
                        engine.declare_default(name, slot)
                    present: dict[int, int] = {}  # index -> the row of its latest event
                    for user, row in latest.items():
                        name = events.names[user]
                        index = engine.index_of(name)
                        if index is None:
                            where = f"{events_path}:{events.numbers[row]}"
                            self._reject("events", where, Reason.UNKNOWN_USER, unknown_user(name, slot),
                                         _read_line(originals, int(events.offsets[row]), event_lines))
                            continue
                        present[index] = row
                    self.summary.usable["events"] += len(present)
                    users = np.fromiter(present.keys(), dtype=np.int64, count=len(present))
                    rows = np.fromiter(present.values(), dtype=np.int64, count=len(present))
                    decided = engine.step(slot, users, list(events.cells[:, rows]))
                    for k, one in enumerate(decided):
                        for projection in one.projections:
                            self._count_reject(projection.reject())
                        self.summary.kinds[one.outcome.kind.value] += 1
                        on_release(release_record(one.outcome, config, self.rng.label, smoothers[k], one.statistic))
                        if on_truth:
                            on_truth(_truth(slot, one.statistic, events.cells[k, rows]))
                    if progress:
                        progress(slot, last_slot, "slot")
            self.summary.slots = last_slot
            self.summary.users = engine.users
            return self.summary


def _truth(slot: int, statistic: Statistic, values: np.ndarray) -> dict[str, Any]:
    """The true histogram of a slot's present users under `statistic` (`--truth-out`)."""
    d = statistic.domain.d
    truth = np.bincount(values, minlength=d) if len(values) else np.zeros(d, dtype=np.int64)
    named = {"statistic": statistic.name} if statistic.name is not None else {}
    return {"slot": slot, **named, "counts": [int(c) for c in truth], "present": len(values)}


def _writer(stack: ExitStack, path: str | None) -> Callable[[dict[str, Any]], None] | None:
    if path is None:
        return None
    handle: IO[str] = stack.enter_context(open(path, "w", encoding="utf-8"))

    def write(record: dict[str, Any]) -> None:
        handle.write(dumps(record) + "\n")

    return write


def run_replay(
    config: Config,
    events_path: str,
    requirements_path: str,
    releases_out: str,
    spend_log: str,
    truth_out: str | None = None,
    rejects_out: str | None = None,
    seed: int | None = None,
    progress: Progress | None = None,
    through: int | None = None,
) -> ReplaySummary:
    """Run the replay through slot `through` (`Replay.run`) with its outputs in files; returns the
    summary."""
    with ExitStack() as stack:
        on_release = _writer(stack, releases_out)
        spend = _writer(stack, spend_log)
        truth = _writer(stack, truth_out)
        rejects = _writer(stack, rejects_out)
        assert on_release is not None
        count_only: Callable[[dict[str, Any]], None] = lambda record: None  # noqa: E731
        replay = Replay(config, make_randomness(config.noise, seed), rejects or count_only)
        summary = replay.run(events_path, requirements_path, on_release, truth, spend, progress, through)
    if rejects_out is None and summary.rejects:
        print(f"{sum(summary.rejects.values())} records rejected; pass --rejects-out to keep them", file=sys.stderr)
    return summary
