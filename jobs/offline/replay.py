"""`pwevent replay`: run a mechanism over JSON-lines files, without Flink or Kafka.

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
from typing import IO, Any

import numpy as np

from pwevent.jobs.common.avro_format import CONTAINER_MAGIC, container_values, decoder, framed_line, unframed_line
from pwevent.jobs.common.config import Config, InputFormat
from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.progress import Progress
from pwevent.jobs.common.reasons import BEFORE_ORIGIN_DETAIL, SUPERSEDED_BEFORE_ORIGIN_DETAIL, Reason, Rejected
from pwevent.jobs.common.records import (
    ORIGINAL_HEAD_BYTES,
    Event,
    Original,
    RequirementUpdate,
    parse_event,
    parse_requirement_update,
    reject_record,
    unknown_user,
)
from pwevent.jobs.common.release import release_record
from pwevent.jobs.common.requirement_rules import Action
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
    cells: np.ndarray
    numbers: np.ndarray
    offsets: np.ndarray
    names: list[str]

    @property
    def last_slot(self) -> int:
        return int(self.slots[-1]) if len(self.slots) else 0

    def rows(self, slot: int) -> range:
        """The rows of `slot`'s events, in (time, line number) order."""
        return range(int(np.searchsorted(self.slots, slot)), int(np.searchsorted(self.slots, slot, side="right")))


def _read_line(handle: IO[bytes], offset: int, framed: bool) -> bytes:
    """The record at `offset` of an input file: its line, or for a framed-records file (the Avro
    formats) the Kafka value its line holds."""
    handle.seek(offset)
    line = handle.readline().rstrip(b"\n")
    return unframed_line(line) if framed else line


def _line_limit(max_bytes: int, framed: bool) -> int:
    """Longest line of an input file: a record of `max_bytes`, in base64 for a framed-records file."""
    return (max_bytes + 2) // 3 * 4 if framed else max_bytes


def _as_framed_lines(path: str, fields: InputFormat, stack: ExitStack) -> str:
    """The file the replay reads for input `path`: `path` itself (JSON lines, a framed-records file),
    or for format `avro` an Avro object container file written out as a framed-records file (one
    record per line, its Avro datum in base64: what the topic's values hold; docs/formats.md)."""
    if fields.format != "avro":
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

    def _valid(self, path: str, source: str, parse: Callable[[bytes], Any], progress: Progress | None,
               framed: bool = False) -> Iterator[tuple[int, int, Any, bytes]]:
        """(line number, offset, record, record bytes) of every record of `path` that parses and, for
        an event, is timed at or after the origin (a requirement record from before it is in force
        from slot 1, `SlotClock.in_force_from`); the others are rejected with their reason. `framed`: a
        framed-records file (each line a Kafka value in base64)."""
        clock = self.config.clock
        max_bytes = self.config.max_record_bytes
        total_mb = max(1, os.path.getsize(path) // _MB) if progress else 0
        shown = self._shown.get(path, path)
        for number, offset, line in _lines(path, _line_limit(max_bytes, framed)):
            self.summary.records[source] += 1
            if progress and number % 65536 == 0:
                progress(min(offset // _MB, total_mb), total_mb, f"reading {source} (MB)")
            if isinstance(line, Original):
                detail = f"{line.length} bytes, more than the {max_bytes} allowed"
                self._reject(source, f"{shown}:{number}", Reason.TOO_LARGE, detail, line)
                continue
            try:
                line = unframed_line(line) if framed else line
                record = parse(line)
            except Rejected as err:
                self._reject(source, f"{shown}:{number}", err.reason, err.detail, line)
                continue
            if source == "events" and clock.before_origin(record.time_ms):
                self._reject(source, f"{shown}:{number}", Reason.BEFORE_ORIGIN, BEFORE_ORIGIN_DETAIL, line)
                continue
            yield number, offset, record, line
        if progress:
            progress(total_mb, total_mb, f"reading {source} (MB)")

    def _read(self, path: str, source: str, parse: Callable[[bytes], Any],
              progress: Progress | None, framed: bool = False) -> dict[int, list[Any]]:
        clock = self.config.clock
        items = sorted((record.time_ms, number, (record, line))
                       for number, _, record, line in self._valid(path, source, parse, progress, framed))
        by_slot: dict[int, list[Any]] = defaultdict(list)
        for time_ms, number, payload in items:  # in time order, so the latest record before the origin wins
            by_slot[clock.in_force_from(time_ms)].append((number, payload))
        return by_slot

    def _read_events(self, path: str, parse: Callable[[bytes], Event], progress: Progress | None,
                     framed: bool = False) -> SlotEvents:
        index: dict[str, int] = {}
        columns = {name: array("q") for name in ("time", "number", "offset", "user", "cell")}
        for number, offset, event, _ in self._valid(path, "events", parse, progress, framed):
            columns["time"].append(event.time_ms)
            columns["number"].append(number)
            columns["offset"].append(offset)
            columns["user"].append(index.setdefault(event.user, len(index)))
            columns["cell"].append(event.cell)
        data = {name: np.frombuffer(column, dtype=np.int64) if len(column) else np.zeros(0, dtype=np.int64)
                for name, column in columns.items()}
        order = np.lexsort((data["number"], data["time"]))
        slots = self.config.clock.slot_of(data["time"][order])
        return SlotEvents(path, slots, data["user"][order], data["cell"][order], data["number"][order],
                          data["offset"][order], list(index))

    def _apply_requirement(
        self, engine: Engine, slot: int, position: str, update: RequirementUpdate, line: bytes
    ) -> None:
        decision = engine.declare(update.user, slot, update.requirement)
        if decision.action is Action.REJECT:
            assert decision.reason is not None
            self._reject("requirements", position, decision.reason, decision.detail, line)
        else:
            self.summary.usable["requirements"] += 1

    def _superseded(self, engine: Engine, updates: list[RequirementUpdate]) -> set[int]:
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
            d = config.domain.d
            framed_events, framed_requirements = config.events.format != "json", config.requirements.format != "json"
            events_file = _as_framed_lines(events_path, config.events, stack)
            requirements_file = _as_framed_lines(requirements_path, config.requirements, stack)
            self._shown.update({events_file: events_path, requirements_file: requirements_path})
            requirements = self._read(
                requirements_file, "requirements",
                lambda line: parse_requirement_update(line, config.requirements, config.caps, config.max_record_bytes,
                                                     config.pseudonyms),
                progress, framed_requirements,
            )
            events = self._read_events(
                events_file,
                lambda line: parse_event(line, config.events, config.domain, max_bytes=config.max_record_bytes,
                                         pseudonyms=config.pseudonyms),
                progress, framed_events,
            )
            engine = Engine(
                config.mechanism_spec(), d, self.rng, config.caps.max_w, spend_sink, floor=config.caps.min_slot_epsilon,
                default_requirement=config.default_requirement,
            )
            last_slot = max([*requirements, events.last_slot], default=0) if through is None else through
            self.summary.beyond = (sum(len(records) for slot, records in requirements.items() if slot > last_slot)
                                   + int(np.count_nonzero(events.slots > last_slot)))
            smoother = config.smoother()
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
                    present: dict[int, int] = {}
                    for user, row in latest.items():
                        name = events.names[user]
                        index = engine.index_of(name)
                        if index is None:
                            where = f"{events_path}:{events.numbers[row]}"
                            self._reject("events", where, Reason.UNKNOWN_USER, unknown_user(name, slot),
                                         _read_line(originals, int(events.offsets[row]), framed_events))
                            continue
                        present[index] = int(events.cells[row])
                    self.summary.usable["events"] += len(present)
                    users = np.fromiter(present.keys(), dtype=np.int64, count=len(present))
                    values = np.fromiter(present.values(), dtype=np.int64, count=len(present))
                    outcome, projections = engine.step(slot, users, values)
                    for projection in projections:
                        self._count_reject(projection.reject())
                    self.summary.kinds[outcome.kind.value] += 1
                    on_release(release_record(outcome, config, self.rng.label, smoother))
                    if on_truth:
                        truth = np.bincount(values, minlength=d) if len(values) else np.zeros(d, dtype=np.int64)
                        on_truth({"slot": slot, "counts": [int(c) for c in truth], "present": len(values)})
                    if progress:
                        progress(slot, last_slot, "slot")
            self.summary.slots = last_slot
            self.summary.users = engine.users
            return self.summary


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
