"""The refusal to start twice, and where a job without state resumes (docs/streaming.md, "Starting twice").

A job whose Population starts without restored state must not decide slots that earlier releases
already decided: a fresh population would spend every user's budget a second time. The Population
operator (jobs/streaming/hosts.py, `PopulationHost`) reads the release and audit topics itself when
it finds no state, whatever started it (`pwevent run`, `flink run`, the Kubernetes operator with or
without high availability), and calls `fresh_start`: no release, a fresh job; releases, a refusal
(`AlreadyReleasedError`) unless the configuration says `kafka.resume_after_last_release: true`.

The resume point is the last release the audit topic confirms: the Population writes a slot's spend
lines and its utilisation record to the audit topic in the transaction of its release, so a release
of a slot past the last of them is not one of this job's decisions (a forged record keyed 99999
moves nothing). A slot without registered users has no spend line, only its utilisation record.
Reading the topics lives in `read_guard_inputs`; everything else here is pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# At the top, not in the function: a Python worker in thread mode keeps its interpreter across a
# failover, but the folder its package was imported from can be gone by then (measured: a 90 s
# broker outage restarted the job, and the restored Population's first lazy import of this module
# failed with ModuleNotFoundError); what the hosts need is imported when they are loaded.
from pwevent.jobs.streaming.kafka_io import read_topic
from pwevent.jobs.streaming.release_format import NotARelease, ReleaseDecoder, release_decoder
from pwevent.jobs.streaming.settings import KafkaSettings, ReleaseSettings
from pwevent.state.spend_log import last_logged_slot

#: How the refusal names the configuration key and its command-line shorthand.
RESUME_KEY = "kafka.resume_after_last_release"
RESUME_FLAG = "--resume-after-last-release"


class AlreadyReleasedError(RuntimeError):
    """The release topic holds releases and the job starts without their state (no resume allowed)."""


@dataclass(frozen=True)
class ResumePoint:
    """Where a job without state continues (docs/streaming.md, "Starting twice"): after `slot`, with
    `counts` (the release of `slot`) as the last release and `publication` as the last publication."""

    slot: int
    counts: tuple[int, ...]
    publication: int | None


@dataclass(frozen=True)
class GuardInputs:
    """What the guard reads: the job's own release records (`job_release`), and the last slot the audit
    topic confirms (`audited_slot`; 0 if none)."""

    releases: tuple[dict[str, Any], ...]
    audited: int

    @property
    def last_release(self) -> int:
        return max((r["slot"] for r in self.releases), default=0)

    def resume_point(self) -> ResumePoint | None:
        """The last release at or before the last audited slot, with the last publication up to it;
        None when the audit topic confirms no release."""
        confirmed = [r for r in self.releases if r["slot"] <= self.audited]
        if not confirmed:
            return None
        last = max(confirmed, key=lambda r: r["slot"])
        published = [r["slot"] for r in confirmed if r.get("kind") == "publish"]
        return ResumePoint(last["slot"], tuple(last["counts"]), max(published) if published else None)


def job_release(key: bytes | None, value: bytes, decoder: ReleaseDecoder | None = None) -> dict[str, Any] | None:
    """A release record of this job in any release format (keyed by its integer slot, with integer
    counts), else None: the topic's ACLs keep other writers out (docs/operations.md, "Security"); a
    foreign record is ignored. An Avro release that cannot be read (no registry, or none answers)
    raises RegistryUnavailable: a start that cannot see the releases must not take the topic for empty."""
    try:
        record: Any = (decoder or ReleaseDecoder()).decode(value)
    except (NotARelease, RecursionError):
        return None
    if not isinstance(record, dict) or type(record.get("slot")) is not int or record["slot"] < 1:
        return None
    counts = record.get("counts")
    if key != str(record["slot"]).encode() or not isinstance(counts, list) \
            or not all(type(c) is int for c in counts):
        return None
    return record


def audited_slot(values: Iterable[bytes]) -> int:
    """The last slot the audit topic's records confirm (`state.spend_log.last_logged_slot`: a spend line
    or, for a slot without registered users, its utilisation record); 0 if none."""
    return last_logged_slot(_json(value) for value in values)


def _json(value: bytes) -> Any:
    """A record's JSON, or None for any bytes that are not (invalid UTF-8, nesting too deep to parse)."""
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def fresh_start(inputs: GuardInputs, resume: bool, releases_topic: str) -> ResumePoint | None:
    """For a Population without restored state: None (start at slot 1) when the release topic holds
    no release of this job; the resume point when `resume` and the audit topic confirms one; else
    AlreadyReleasedError saying why and how to go on."""
    if not inputs.releases:
        return None
    point = inputs.resume_point()
    found = f"topic {releases_topic} already holds releases up to slot {inputs.last_release}"
    if point is None or point.slot != inputs.last_release:
        found += f" (the audit topic confirms {f'up to slot {point.slot}' if point else 'none of them'})"
    if point is None:
        raise AlreadyReleasedError(
            f"refusing to start: {found}, so there is no slot to resume after, and this job starts without "
            "their state. Restore the job's state, or start a new job on new topics (docs/streaming.md, "
            "'Starting twice')")
    if resume:
        return point
    raise AlreadyReleasedError(
        f"refusing to start: {found}, and this job starts without their state: a fresh population would spend "
        "every user's budget a second time. Restore the job's state (pwevent run --restore latest or a "
        "checkpoint/savepoint path; on Kubernetes the HA metadata or a savepoint), or set "
        f"{RESUME_KEY}: true ({RESUME_FLAG} on the command line) to continue after slot {point.slot} with "
        "fresh ledgers (docs/streaming.md, 'Starting twice', states what that costs)")


def job_releases(messages: Iterable[tuple[bytes | None, bytes]], cells: int,
                 decoder: ReleaseDecoder | None = None) -> tuple[dict[str, Any], ...]:
    """The job's releases among (key, value) messages: `job_release` records with one count per cell of
    the configured domain (a record of another length cannot be this job's r_0)."""
    return tuple(r for r in (job_release(key, value, decoder) for key, value in messages)
                 if r is not None and len(r["counts"]) == cells)


def read_guard_inputs(kafka: KafkaSettings, cells: int, release: ReleaseSettings,
                      topic: str | None = None) -> GuardInputs:
    """The release topic's job releases (`job_releases`, `cells` counts each, in any release format:
    `release` names the registry; `topic`: another release topic than `topics.releases`, a
    statistic's) and, when there are any, the audit topic's last spend slot, read_committed, up to
    their ends now."""
    releases = job_releases(((m.key, m.value) for m in
                             read_topic(kafka, topic or kafka.topics["releases"], idle_s=1.0, max_s=600.0)), cells,
                            release_decoder(release))
    if not releases:
        return GuardInputs((), 0)
    audit = read_topic(kafka, kafka.topics["audit"], idle_s=1.0, max_s=600.0)
    return GuardInputs(releases, audited_slot(m.value for m in audit))


@dataclass(frozen=True)
class StartGuard:
    """What the Population checks when it finds no state (docs/streaming.md, "Starting twice"):
    `kafka` (the topics, the clients' security, `resume_after_last_release`), `cells` (the domain's d),
    `release` (the release format's registry, to read the releases), and `late_through`, the slot up
    to which the job judges every event `late` (`SlotJudge`) (the resume point the job was built
    with; 0: none). `statistics`: with several statistics, each one's release topic and cells (one
    writer and topic each): any release on any of them refuses the start, which cannot resume
    (`pwevent run` refuses `kafka.resume_after_last_release` with several statistics)."""

    kafka: KafkaSettings
    cells: int
    release: ReleaseSettings
    late_through: int = 0
    statistics: tuple[tuple[str, int], ...] = ()

    def check(self) -> ResumePoint | None:
        """Where this Population starts (None: at slot 1), from the topics as they are now; raises
        AlreadyReleasedError (a refusal, or topics that changed since the job was built)."""
        for topic, cells in self.statistics:
            fresh_start(read_guard_inputs(self.kafka, cells, self.release, topic), False, topic)
        if self.statistics:
            return None
        point = fresh_start(read_guard_inputs(self.kafka, self.cells, self.release),
                            self.kafka.resume_after_last_release,
                            self.kafka.topics["releases"])
        slot = point.slot if point is not None else 0
        if slot != self.late_through:
            raise AlreadyReleasedError(
                f"refusing to start: the job was built to resume after slot {self.late_through} (its events up to "
                f"that slot are judged late), but the release and audit topics now give slot {slot}: they changed "
                "since the job was submitted; submit it again (docs/streaming.md, 'Starting twice')")
        return point
