"""Independent auditor: a spend log checked against the inputs and the releases (docs/mechanisms.md,
"What the auditor proves").

It imports nothing from the ledgers, the budget policies or the engine (of the configuration it
reads only the mechanism's name, the slot clock, the caps, the parsing settings of the requirements
(format, field paths, signature, `max_record_bytes`), the global (w, E), the domain, the noise and
the post-processing, which it recomputes with the job's own filter bank: operators/postprocess.py),
and it trusts none of the records it reads: it rebuilds each ledger's spend series from the raw
`spend` lines (stitching forks onto their parents before `since`), follows every user through its
`member` lines, derives each user's declared requirements from the requirements input itself, and
sums every window directly (a convolution per window length), so a bug in a ledger's running sums
cannot hide behind its twin.

Two modes:
- quick (`audit_records(log)`): the ledger-level checks the log alone allows (windows against the
  requirement each line states, line rules, duplicates, forks);
- full (`audit_records(log, AuditInputs.build(requirement_lines, releases, config))`): also every
  user's windows against the requirement the user declared, membership, gaps, member counts, every
  line against its slot's release, and every release field that follows from the log, the
  configuration and the earlier releases (repeats, OBS thresholds, population, labels, one schema
  version per run, `smoothed` and `interval`).

Erased users (docs/operations.md, "Retention and erasure"): with `erased` (`pwevent audit --erased
FILE`), a user named there whose requirement records are gone from the input is reported as
unverifiable instead of `unregistered_member`: its windows against its own declarations, its
registration slot and (with a default requirement) its default registration cannot be checked. Its
`member` lines still place it in ledgers, so every ledger-level check (each ledger's windows against
the ledger's requirement, members, population) still covers it. A user not named there keeps every
rule; a named user whose records are still in the input is audited in full.

Requirement records the streaming job refused as `late` (their slot had been decided when it read
them; docs/streaming.md, "Time"): with `dead_letters` (`pwevent audit --dead-letters FILE`, a dump of
the dead-letter topic), each `late` dead letter of a requirement record takes one record of the input
with the same bytes (the last one: a copy read later) out of the declarations, as the job never
applied it; the audit checks that its slot was decided (it is not after the last release) and lists
the refusals in a note. Without them such a record is a declaration the job did not honour
(`missing_member`). What the auditor cannot check is when the job read the record.

Every finding is a `Violation` with a `rule` name (the `RULES` below). Window sums are compared with
the relative precision of docs/mechanisms.md section 9 (`state.requirements.exceeds`).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias, TypeVar

import numpy as np

from pwevent.jobs.common.avro_format import input_values
from pwevent.jobs.common.config import DEFAULT_MAX_RECORD_BYTES, Config, InputFormat, RequirementFields, Statistic
from pwevent.jobs.common.kafka_record import KafkaRecord, kept_value
from pwevent.jobs.common.pseudonyms import Pseudonyms
from pwevent.jobs.common.reasons import Reason, Rejected
from pwevent.jobs.common.records import as_bytes, parse_requirement_update
from pwevent.jobs.common.slots import SlotClock, iso
from pwevent.operators.postprocess import KalmanSmoother, PublicRelease
from pwevent.state.errors import InvalidRequirementError
from pwevent.state.requirements import (
    DynamicRequirement,
    Requirement,
    RequirementCaps,
    exceeds,
    parse_requirement,
)

KINDS = ("publish", "skip", "nullify")
#: Mechanism families, kept here on purpose (independence); a test checks them against the policies.
DYNAMIC_MECHANISMS = ("DPBD", "DPBA")
BASELINE_MECHANISMS = ("Uniform", "Sample", "BD", "BA")
#: Adaptive's families (a release names the one in force); its even spending and its bursts publish
#: at OBS's threshold for the rescaled error (docs/mechanisms.md section 14). Kept here too; a test
#: compares with operators.family.
ADAPTIVE = "Adaptive"
ADAPTIVE_FAMILIES = ("Uniform", "PBA", "PBD", "Sample")
ADAPTIVE_RESCALED = ("Uniform", "Sample")
#: The noise label each `noise:` setting writes, and the seeded reproduction source's, which `--seed`
#: selects under either (operators/noise.py; a test compares them).
NOISE_LABELS = {"opendp": "opendp-discrete-laplace", "numpy-fast": "numpy-geometric (fast)"}
SEEDED_NOISE_LABEL = "numpy-geometric (seeded, not for production)"
#: The release record's version (docs/formats.md, Release), kept here too; a test compares it.
RELEASE_SCHEMA_VERSION = 4
#: The versions this auditor reads besides 1 (a release without schema_version).
READ_VERSIONS = (2, 3, 4)
#: The one version change a run may make: a job of release 0.2.0 (version 3) restored by a later
#: release goes on in version 4 (docs/mechanisms.md, "What the auditor proves").
UPGRADE = (3, 4)
#: From this version on a rescaled publication's threshold is the mean cell's error (section 14).
MEAN_CELL_SINCE = 4
#: Relative agreement asked of a release's OBS threshold and expected error with the auditor's own
#: arithmetic (another summation order than the job's); a tampered value is off by far more.
DERIVED_RTOL = 1e-6
#: The first release version with each of these fields (docs/formats.md, Release; `interval`, also of
#: version 2, goes with `smoothed` and is checked with it).
FIELD_SINCE = {"domain": 2, "kept_share": 3}
#: Agreement asked of a release's `smoothed` and `interval` with the auditor's recomputation: the
#: record holds them rounded to 3 decimals (jobs/common/release.py), so half that step, plus 1e-9
#: relative (absolute below 1) for another machine's arithmetic.
SMOOTHED_ROUNDING = 0.0005
SMOOTHED_RTOL = 1e-9

#: The budget in view (docs/formats.md, the spend log's `utilisation` record): the window buckets,
#: name -> the smallest w in it, and the records' scale. Kept here on purpose (independence); a test
#: compares them with jobs/common/service_metrics.py.
WINDOW_BUCKETS = {"w1_9": 1, "w10_99": 10, "w100_999": 100, "w1000_up": 1000}
PPM = 1_000_000
#: Spends as integers in units of 2^-1074, the smallest positive float: every finite float is a whole
#: number of them, so the auditor's window sums are exact (then rounded once, as `math.fsum` rounds).
EXACT_UNIT = 1 << 1074

AnyRequirement: TypeAlias = Requirement | DynamicRequirement
#: Slots first..last (inclusive) that hold one requirement.
Run: TypeAlias = tuple[int, int, AnyRequirement]
T = TypeVar("T")

#: Every rule a finding can carry, with what it means (docs/mechanisms.md, "What the auditor proves").
RULES = {
    "bad_spend": "a spend that is not a finite number >= 0",
    "bad_kind": "a spend line whose kind is not publish, skip or nullify",
    "duplicate_line": "two spend lines of one ledger for one slot",
    "duplicate_ledger": "two ledger lines for one ledger id",
    "skip_spent": "publication spend on a skipped slot",
    "nullify_spent": "spend on a nullified slot",
    "missing_parent": "a fork whose parent ledger is not in the log (or whose ancestry loops)",
    "bad_fork": "a fork that starts before its parent",
    "line_before_since": "a spend line of a ledger before its since (that history is the parent's)",
    "ledger_fixed_window": "w consecutive slots of a ledger over the E its lines state",
    "ledger_backward_window": "a ledger's backward window over the EB its line states",
    "ledger_forward_window": "a ledger's forward window over the EF its line stated at tau",
    "unknown_ledger": "a spend or member line for a ledger without a ledger line",
    "member_before_ledger": "a member line joining a ledger before the ledger's since",
    "gap": "a slot where a ledger has members but no spend line",
    "members_mismatch": "a spend line whose members differ from the member lines",
    "unregistered_member": "a member line for a user without a valid requirement in the input",
    "missing_member": "a registered user not in any ledger from its registration slot on",
    "member_before_registration": "a member line before the user's registration slot",
    "requirement_mismatch": "a user's ledger runs at a requirement other than the user's declared one",
    "user_fixed_window": "w consecutive slots of a user over the user's declared E",
    "user_backward_window": "a user's backward window over the user's declared EB",
    "user_forward_window": "a user's forward window over the EF the user declared at tau",
    "user_total_fixed_window": "w consecutive slots of a user, summed over all statistics, over the user's declared E",
    "user_total_backward_window": "a user's backward window, summed over all statistics, over the declared EB",
    "user_total_forward_window": "a user's forward window, summed over all statistics, over the EF declared at tau",
    "late_refusal_of_an_undecided_slot": "a requirement record refused as late whose slot comes after the last "
                                         "release (never decided, so nothing was decided before it came)",
    "late_refusal_unmatched": "a late dead letter of a requirement record that names no valid record of the "
                              "requirements input (its bytes)",
    "unknown_statistic": "a spend line or release of a statistic the configuration does not list (or without the "
                         "name of one when it lists several), or a listed statistic without releases",
    "release_missing": "a slot between 1 and the last release without a release",
    "release_duplicate": "two releases for one slot",
    "release_redrawn": "two different records of one slot on the release topic, read_uncommitted "
                       "(aborted ones included: jobs/offline/release_topic.py)",
    "bad_release": "a release whose kind is not publish, skip or nullify",
    "no_release": "a spend line or utilisation record for a slot without a release",
    "kind_mismatch": "a spend line whose kind differs from its slot's release",
    "calculation_without_dissimilarity": "calculation spend on a slot whose release ran no dissimilarity",
    "repeat_changed": "a skip or nullify release whose counts differ from the previous release's",
    "schema_version_mixed": "a release whose schema_version differs from the run's first release's (absent: 1), "
                            "but for one step from 3 to 4",
    "schema_fields_mismatch": "a release with a field its schema_version does not have, or without one it has",
    "threshold_missing": "a release with a dissimilarity but without the threshold it was compared with, while "
                         "it states a publication epsilon (or a threshold without one)",
    "smoothed_mismatch": "a release whose smoothed is not the post-processing of the releases up to it (or "
                         "present under postprocess: none, absent under kalman)",
    "interval_mismatch": "a release whose interval is not the post-processing's (or absent under kalman from "
                         "version 2 on, present before version 2 or under postprocess: none)",
    "population_mismatch": "a release whose population is not the number of users the member lines place",
    "publication_scale": "a publication whose epsilon_publication is not OBS's choice among the slot's spend2",
    "calculation_scale": "a dissimilarity whose epsilon_calculation is not OBS's choice among the slot's spend1",
    "threshold_mismatch": "a publication whose threshold is not the root of OBS's error at its epsilon",
    "kept_share_mismatch": "a release whose kept_share is not the expected kept share of its rescaled "
                           "publication (null when not rescaled)",
    "decision_mismatch": "a publication whose dissimilarity did not clear its threshold, or a skip whose did",
    "noise_mismatch": "a noise label the configuration does not write, or two labels in one run",
    "noise_label": "a release or spend line whose noise label the configuration does not allow (under noise: opendp "
                   "only the secure source's), or a spend line whose label is not its slot's release's",
    "label_mismatch": "a release whose mechanism, family, start, end, domain or version is not the configuration's",
    "utilisation_mismatch": "a utilisation record whose value for a window bucket is not the one the spend lines and "
                            "the requirements give (or that lacks a bucket, or names one that is none)",
    "utilisation_duplicate": "two utilisation records for one slot",
    "utilisation_missing": "a released slot without a utilisation record, from the log's first one on",
}


#: Largest integer a spend-log field may hold: 2^53, beyond which JSON readers lose exactness (a slot
#: of any clock, even 1 ms slots up to year 9999, is below it).
MAX_FIELD_INT = 2**53
#: A ledger's lines may leave this many slots (more than the lines themselves) empty; a log whose slot
#: numbers are sparser is refused as corrupt rather than given an array of that size.
MAX_EMPTY_SLOTS = 10_000_000


class AuditInputError(ValueError):
    """An input the auditor cannot read (not JSON, a record without its fields): exit code 2."""


@dataclass(frozen=True)
class Violation:
    """One finding: which rule, at which slot, for which ledger and/or user."""

    rule: str
    slot: int
    detail: str
    ledger: str | None = None
    user: str | None = None
    statistic: str | None = None

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"unknown audit rule {self.rule!r}")

    def __str__(self) -> str:
        where = [f"slot {self.slot}"]
        where += [f"statistic {self.statistic}"] if self.statistic is not None else []
        where += [f"ledger {self.ledger}"] if self.ledger is not None else []
        where += [f"user {self.user}"] if self.user is not None else []
        return f"{' '.join(where)}: {self.rule}: {self.detail}"


@dataclass(frozen=True)
class AuditReport:
    """What was audited and every finding; `skipped` names the checks a quick audit left out;
    `unverifiable` the erased users whose own declarations could not be checked."""

    ledgers: int
    users: int
    spend_lines: int
    windows_checked: int
    violations: tuple[Violation, ...]
    skipped: str | None = None
    members: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    unverifiable: tuple[str, ...] = ()
    #: the inputs that held records none of which was usable (`pwevent audit` exits 6 without violations)
    unusable: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.violations

    def rules(self) -> set[str]:
        return {v.rule for v in self.violations}

    def render(self, limit: int = 50) -> str:
        head = (
            f"audited {self.ledgers} ledgers, {self.users} users, {self.spend_lines} spend lines, "
            f"{self.windows_checked} windows: "
        )
        lines = [head + ("no violation" if self.ok else f"{len(self.violations)} VIOLATIONS")]
        for v in self.violations[:limit]:
            users = self.members.get(v.ledger, ()) if v.user is None and v.ledger is not None else ()
            more = " ..." if len(users) > 5 else ""
            lines.append(f"  {v}" + (f" (users {', '.join(users[:5])}{more})" if users else ""))
        if len(self.violations) > limit:
            lines.append(f"  ... and {len(self.violations) - limit} more")
        if self.skipped:
            lines.append(f"NOT CHECKED: {self.skipped}")
        lines += [f"NOTE: {note}" for note in self.notes]
        if self.unverifiable:
            shown = ", ".join(self.unverifiable[:limit]) + (" ..." if len(self.unverifiable) > limit else "")
            lines.append(f"UNVERIFIABLE: {len(self.unverifiable)} erased users (member lines kept, requirement records "
                         f"erased: their windows against their own declarations are not checked, their ledgers'"
                         f" are): {shown}")
        lines += [f"NO USABLE RECORD: {what}" for what in self.unusable]
        return "\n".join(lines)


@dataclass(frozen=True)
class Declared:
    """A user's declared requirement timeline from the input, (slot, requirement in force from
    there on); `updates[0]` is the registration."""

    updates: tuple[tuple[int, AnyRequirement], ...]

    @property
    def registered(self) -> int:
        return self.updates[0][0]

    def runs(self, last: int) -> list[Run]:
        """The declared requirements as runs of slots, from the registration up to slot `last`."""
        ends = [since - 1 for since, _ in self.updates[1:]] + [last]
        return [(since, min(end, last), req) for (since, req), end in zip(self.updates, ends, strict=True)
                if since <= min(end, last)]


@dataclass(frozen=True)
class Release:
    """What the auditor reads of one release line (docs/formats.md, Release): the kind, the counts (None
    when they are not a list of integers), the population and the public quantities of the decision
    (None where null or not a finite number), and the labels as they stand."""

    slot: int
    kind: str
    counts: tuple[int, ...] | None
    population: int | None
    epsilon_calculation: float | None
    epsilon_publication: float | None
    threshold: float | None
    dissimilarity: float | None
    labels: Mapping[str, Any]
    kept_share: float | None = None
    record: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def dissimilarity_ran(self) -> bool:
        return self.dissimilarity is not None

    @classmethod
    def of(cls, slot: int, rec: Mapping[str, Any]) -> Release:
        counts = rec.get("counts")
        whole = isinstance(counts, list) and all(isinstance(c, int) and not isinstance(c, bool) for c in counts)
        population = rec.get("population")
        return cls(slot, str(rec.get("kind")), tuple(counts) if whole and isinstance(counts, list) else None,
                   population if isinstance(population, int) and not isinstance(population, bool) else None,
                   _finite(rec.get("epsilon_calculation")), _finite(rec.get("epsilon_publication")),
                   _finite(rec.get("threshold")), _finite(rec.get("dissimilarity")),
                   {key: rec.get(key) for key in ("mechanism", "family", "start", "end", "noise", "domain",
                                                  "schema_version")},
                   _finite(rec.get("kept_share")), rec)


@dataclass(frozen=True)
class InputRules:
    """What decides whether a requirement record registers its user (docs/formats.md, Requirement):
    the mechanism family, the slot clock, the caps, for a baseline the global requirement, and the
    default requirement of users seen before any record of theirs; the largest record; and the
    configured post-processing (`Config.smoother`, the job's own filter bank, fresh at each call); the
    pseudonyms the run gave user ids (`pseudonymise`), so the input's ids read as the log's."""

    mechanism: str
    clock: SlotClock
    caps: RequirementCaps
    fields: RequirementFields
    global_requirement: Requirement | None
    default: AnyRequirement | None = None
    d: int = 2
    noise: str = "opendp"
    domain: Mapping[str, Any] = field(default_factory=lambda: {"type": "binary"})
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    smoother: Callable[[], KalmanSmoother | None] = lambda: None
    pseudonyms: Pseudonyms | None = None
    share: float = 1.0

    @classmethod
    def from_config(cls, config: Config, statistic: Statistic | None = None) -> InputRules:
        """The rules of one of the configuration's statistics (default: the first): its domain, its
        post-processing and its share of every requirement."""
        statistic = statistic or config.statistics[0]
        global_ = None
        if config.mechanism in BASELINE_MECHANISMS and config.window is not None and config.epsilon is not None:
            global_ = Requirement(config.window, config.epsilon)
        return cls(config.mechanism, config.clock, config.caps, config.requirements, global_,
                   config.default_requirement, statistic.domain.d, config.noise, statistic.domain.describe(),
                   config.max_record_bytes, lambda: config.smoother(statistic), config.pseudonyms, statistic.share)

    @property
    def dynamic(self) -> bool:
        return self.mechanism in DYNAMIC_MECHANISMS

    def valid(self, requirement: AnyRequirement) -> bool:
        """The right family for the mechanism and, under a baseline, covered by the global one."""
        if self.dynamic != isinstance(requirement, DynamicRequirement):
            return False
        if self.global_requirement is not None:
            assert isinstance(requirement, Requirement)
            return self.global_requirement.covers(requirement)
        return True


Updates: TypeAlias = tuple[tuple[int, AnyRequirement], ...]


@dataclass(frozen=True)
class AuditInputs:
    """The full audit's inputs: each user's valid requirement records as (slot, requirement) in the
    order the replay applies them, the releases, and the rules (the mechanism's family, the global
    requirement of a baseline, the default requirement), and the users erased from the input."""

    updates: Mapping[str, Updates]
    releases: tuple[Any, ...]
    rules: InputRules
    erased: frozenset[str] = frozenset()
    statistics: Mapping[str | None, InputRules] = field(default_factory=dict)
    records: int = 0  # requirement records read
    refused_late: tuple[RefusedLate, ...] = ()
    unmatched_late: int = 0  # late dead letters of requirement records without their record in the input

    @property
    def unusable(self) -> tuple[str, ...]:
        """The requirements input, when it held records and none was a valid requirement record."""
        if self.records and not self.updates and not self.refused_late:
            return (f"requirements: none of the {self.records} records is a valid requirement record",)
        return ()

    @classmethod
    def build(
        cls, requirement_lines: Iterable[tuple[str, str | bytes | KafkaRecord]], releases: Iterable[Any],
        config: Config,
        erased: frozenset[str] = frozenset(),
        dead_letters: Iterable[Any] = (),
    ) -> AuditInputs:
        """From the raw requirement records (position, text), the release records, the run's configuration,
        the erased users (as the log names them: pseudonyms under `pseudonymise`) and the run's dead
        letters (only the `late` ones of requirement records are read: module docstring). `statistics`:
        the rules of each statistic by its name (None: the configuration's one unnamed statistic);
        `rules` are the first's."""
        statistics = {statistic.name: InputRules.from_config(config, statistic) for statistic in config.statistics}
        rules = next(iter(statistics.values()))
        late = late_refusals(dead_letters)
        if not late:  # the input read once, as it comes (a requirements topic can hold millions)
            read = [0]

            def counted() -> Iterator[tuple[str, str | bytes | KafkaRecord]]:
                for line in requirement_lines:
                    read[0] += 1
                    yield line
            return cls(valid_updates(counted(), rules), tuple(releases), rules, erased, statistics, read[0])
        lines = list(requirement_lines)
        kept, refused, unmatched = _without_late_refusals(lines, late, rules)
        return cls(valid_updates(kept, rules), tuple(releases), rules, erased, statistics, len(lines), refused,
                   unmatched)

    def of_statistic(self, name: str | None) -> AuditInputs:
        """These inputs for one statistic: its rules, its releases."""
        releases = tuple(rec for rec in self.releases if not isinstance(rec, dict) or rec.get("statistic") == name)
        return replace(self, rules=self.statistics.get(name, self.rules), releases=releases)

    def unverifiable(self, user: str) -> bool:
        """An erased user with no requirement record left: its own declarations cannot be checked."""
        return user in self.erased and user not in self.updates

    @property
    def global_requirement(self) -> Requirement | None:
        return self.rules.global_requirement

    def declared(self, first_member: Mapping[str, int]) -> dict[str, Declared]:
        """Each user's declared timeline. A record registers its user at its slot; with a default
        requirement, a user whose first member line (`first_member`) comes before any record of
        theirs was registered with the default at that slot (the auditor cannot see the events, so
        it takes that slot from the log: protection from then on is what it checks), and a later
        record is a change like any other (docs/streaming.md, "Users without a requirement record"). An
        unverifiable user (erased) has no timeline."""
        out = {}
        defaulted = {user for user in first_member if not self.unverifiable(user)} \
            if self.rules.default is not None else set()
        for user in sorted(set(self.updates) | defaulted):
            updates = self.updates.get(user, ())
            seen = first_member.get(user)
            if self.rules.default is not None and seen is not None and (not updates or updates[0][0] > seen):
                updates = ((seen, self.rules.default), *updates)
            out[user] = Declared(_timeline(updates, self.rules.dynamic))
        return out


def valid_updates(lines: Iterable[tuple[str, str | bytes | KafkaRecord]], rules: InputRules) -> dict[str, Updates]:
    """Each user's valid requirement records (position, text) as (slot, requirement), ordered by time,
    then by input order, as the replay applies them. Minimal on purpose: a record counts if it parses
    (with the replay's parser and the configuration's parsing settings: format, field paths,
    signature, `max_record_bytes`) within the caps and is valid for the mechanism. Of a user's records
    from before the origin only the latest counts, in force from slot 1 (docs/formats.md, Requirement),
    as the replay and the job apply them."""
    parsed = []
    for order, (_, text) in enumerate(lines):
        try:
            update = parse_requirement_update(text, rules.fields, rules.caps, rules.max_record_bytes, rules.pseudonyms)
        except Rejected:
            continue
        if rules.valid(update.requirement):
            parsed.append((update.time_ms, order, rules.clock.in_force_from(update.time_ms), update.user,
                           update.requirement))
    updates: dict[str, list[tuple[int, AnyRequirement]]] = defaultdict(list)
    early: dict[str, int] = {}  # user -> how many records from before the origin it has in `updates`
    for time_ms, _, slot, user, requirement in sorted(parsed, key=lambda item: (item[0], item[1])):
        if time_ms < rules.clock.origin_ms:  # a later one from before the origin supersedes it
            del updates[user][:early.get(user, 0)]
            early[user] = 1
        updates[user].append((slot, requirement))
    return {user: tuple(items) for user, items in updates.items()}


@dataclass(frozen=True)
class RefusedLate:
    """A requirement record the job refused as `late`: where the input holds it, its user and slot."""

    position: str
    user: str
    slot: int


def late_refusals(dead_letters: Iterable[Any]) -> Counter[str]:
    """The SHA-256 of the bytes of every requirement record a dead letter says the job refused as
    `late`, with how many times it did (docs/formats.md, "Reject / dead letter")."""
    return Counter(letter["original_sha256"] for letter in dead_letters
                   if isinstance(letter, dict) and letter.get("source") == "requirements"
                   and letter.get("reason") == Reason.LATE.value and isinstance(letter.get("original_sha256"), str))


def _without_late_refusals(
    lines: list[tuple[str, str | bytes | KafkaRecord]], refused: Counter[str], rules: InputRules,
) -> tuple[list[tuple[str, str | bytes | KafkaRecord]], tuple[RefusedLate, ...], int]:
    """`lines` without the records the job refused as late (for each digest, that many of the valid
    records with those bytes, the last ones), the refused records, and how many refusals name no
    valid record of the input."""
    digests = [hashlib.sha256(kept_value(as_bytes(value) if isinstance(value, str) else value)).hexdigest()
               for _, value in lines]
    valid: dict[int, tuple[str, int]] = {}
    for index, (_, value) in enumerate(lines):
        if digests[index] in refused:
            try:
                update = parse_requirement_update(value, rules.fields, rules.caps, rules.max_record_bytes,
                                                  rules.pseudonyms)
            except Rejected:
                continue
            if rules.valid(update.requirement):
                valid[index] = (update.user, rules.clock.in_force_from(update.time_ms))
    left = Counter(refused)
    dropped: list[int] = []
    for index in sorted(valid, reverse=True):
        if left[digests[index]] > 0:
            left[digests[index]] -= 1
            dropped.append(index)
    out = set(dropped)
    kept = [line for index, line in enumerate(lines) if index not in out]
    refusals = tuple(RefusedLate(lines[index][0], *valid[index]) for index in sorted(dropped))
    return kept, refusals, sum(left.values())


def _late_refusal_checks(inputs: AuditInputs) -> tuple[list[Violation], list[str]]:
    """Each record refused as late against the releases (its slot must be decided: one after the last
    release cannot have been decided before the record came), and the note that lists them."""
    decided = max((rec["slot"] for rec in inputs.releases
                   if isinstance(rec, dict) and isinstance(rec.get("slot"), int)), default=0)
    found = [Violation("late_refusal_of_an_undecided_slot", refusal.slot,
                       f"refused as late ({refusal.position}), but the last release is slot {decided}", None,
                       refusal.user)
             for refusal in inputs.refused_late if refusal.slot > decided]
    if inputs.unmatched_late:
        found.append(Violation("late_refusal_unmatched", 1, f"{inputs.unmatched_late} late dead letters of "
                               "requirement records name no valid record of the requirements input"))
    notes = []
    if inputs.refused_late:
        users = sorted({refusal.user for refusal in inputs.refused_late})
        shown = ", ".join(users[:10]) + (" ..." if len(users) > 10 else "")
        notes.append(f"{len(inputs.refused_late)} requirement records were refused as late by the job (read after "
                     f"their slot was released; dead letters): they declare nothing here; users {shown}")
    return found, notes


def _timeline(updates: Updates, dynamic: bool) -> tuple[tuple[int, AnyRequirement], ...]:
    """The first update registers its user at its slot; a fixed mechanism keeps it for ever; a
    dynamic one takes every later change from its slot on (the last update of a slot wins)."""
    timeline: list[tuple[int, AnyRequirement]] = []
    for slot, requirement in updates:
        if not timeline:
            timeline.append((slot, requirement))
        elif dynamic and requirement != timeline[-1][1]:
            if timeline[-1][0] == slot:
                timeline.pop()
            if not timeline or requirement != timeline[-1][1]:
                timeline.append((slot, requirement))
    return tuple(timeline)


# ----------------------------------------------------------------------------------------- the log


@dataclass(frozen=True)
class _Ledger:
    ledger: str
    parent: str | None
    since: int
    requirement: AnyRequirement


@dataclass(frozen=True)
class _Member:
    user: str
    ledger: str
    since: int


@dataclass(frozen=True)
class _Spend:
    ledger: str
    slot: int
    members: int
    spend1: float
    spend2: float
    kind: str
    requirement: AnyRequirement
    noise: Any = None

    @property
    def total(self) -> float:
        return self.spend1 + self.spend2


@dataclass(frozen=True)
class _Log:
    ledgers: dict[str, _Ledger]
    members: tuple[_Member, ...]
    spends: dict[str, dict[int, _Spend]]
    spend_lines: int


@dataclass(frozen=True)
class _View:
    """A `utilisation` record: its slot and its values by window bucket, as they stand."""

    slot: int
    ppm: Mapping[str, Any]


def _need(rec: dict[str, Any], key: str, where: str, kind: type | tuple[type, ...] = int, minimum: int = 1) -> Any:
    """A field of a record, of the given type(s) and never a boolean, or AuditInputError. An integer
    field is a slot (slots start at 1) unless another `minimum` is given, and at most MAX_FIELD_INT."""
    value = rec.get(key)
    out_of_range = kind is int and isinstance(value, int) and not minimum <= value <= MAX_FIELD_INT
    if isinstance(value, bool) or not isinstance(value, kind) or out_of_range:
        raise AuditInputError(f"{where}: field {key!r} is missing or mistyped ({value!r})")
    return value


def _requirement(rec: dict[str, Any], where: str, seen: dict[str, AnyRequirement]) -> AnyRequirement:
    """A record's requirement; `seen` caches them by their text (a log repeats a handful millions of times)."""
    obj = rec.get("requirement")
    if not isinstance(obj, dict):
        raise AuditInputError(f"{where}: field 'requirement' must be an object")
    key = repr(obj)
    if key not in seen:
        try:
            seen[key] = parse_requirement(obj)
        except InvalidRequirementError as err:
            raise AuditInputError(f"{where}: {err}") from None
    return seen[key]


def _finite(value: Any) -> float | None:
    """A finite number as a float, else None (null, text, NaN, a boolean)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _amount(value: Any) -> float | None:
    """A spend as a float, or None when it is not a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


@dataclass
class _LogParts:
    """One statistic's records while the log is read."""

    ledgers: dict[str, _Ledger] = field(default_factory=dict)
    members: list[_Member] = field(default_factory=list)
    spends: dict[str, dict[int, _Spend]] = field(default_factory=lambda: defaultdict(dict))
    lines: int = 0
    found: list[Violation] = field(default_factory=list)

    def log(self) -> _Log:
        return _Log(self.ledgers, tuple(self.members), dict(self.spends), self.lines)


def _read_logs(records: Iterable[tuple[str, Any]]) -> tuple[dict[str | None, _LogParts], list[_View]]:
    """The log of each statistic, by the name its lines carry (None: no name), in order of appearance,
    with the findings of its lines alone; and the `utilisation` records, which are about every
    statistic."""
    parts: dict[str | None, _LogParts] = {}
    views: list[_View] = []
    seen: dict[str, AnyRequirement] = {}
    for where, rec in records:
        if not isinstance(rec, dict):
            raise AuditInputError(f"{where}: not a JSON object")
        if rec.get("record") == "utilisation":
            views.append(_read_view(where, rec))
            continue
        statistic = rec.get("statistic")
        if statistic is not None and not isinstance(statistic, str):
            raise AuditInputError(f"{where}: field 'statistic' must be a string")
        _read_record(where, rec, parts.setdefault(statistic, _LogParts()), seen)
    return parts, views


def _read_view(where: str, rec: dict[str, Any]) -> _View:
    """A `utilisation` record; its values are judged by `_utilisation_checks`."""
    if "statistic" in rec:
        raise AuditInputError(f"{where}: a utilisation record is about every statistic and names none")
    ppm = rec.get("ppm")
    if not isinstance(ppm, dict):
        raise AuditInputError(f"{where}: field 'ppm' is missing or mistyped ({ppm!r})")
    return _View(_need(rec, "slot", where), ppm)


def _read_record(where: str, rec: dict[str, Any], part: _LogParts, seen: dict[str, AnyRequirement]) -> None:
    """One record of the log into its statistic's `part` (with the findings of the line alone)."""
    ledgers, members, spends, found = part.ledgers, part.members, part.spends, part.found
    kind = rec.get("record", "spend")
    ledger = str(_need(rec, "ledger", where, (str, int)))
    if kind == "ledger":
        parent = rec.get("parent")
        entry = _Ledger(ledger, None if parent is None else str(parent), _need(rec, "since", where),
                        _requirement(rec, where, seen))
        if ledger in ledgers and ledgers[ledger] != entry:
            found.append(Violation("duplicate_ledger", entry.since, "two different ledger lines", ledger))
        ledgers.setdefault(ledger, entry)
    elif kind == "member":
        user = str(_need(rec, "user", where, (str, int)))
        members.append(_Member(user, ledger, _need(rec, "since", where)))
    elif kind == "spend":
        part.lines += 1
        slot = _need(rec, "slot", where)
        line_kind = rec.get("kind")
        if line_kind not in KINDS:
            found.append(Violation("bad_kind", slot, f"kind {line_kind!r}", ledger))
        amounts = [_amount(rec.get(label)) for label in ("spend1", "spend2")]
        for label, amount in zip(("spend1", "spend2"), amounts, strict=True):
            if amount is None:
                found.append(Violation("bad_spend", slot, f"{label}={rec.get(label)!r}", ledger))
        spend = _Spend(ledger, slot, _need(rec, "members", where, int, 0), amounts[0] or 0.0, amounts[1] or 0.0,
                       str(line_kind), _requirement(rec, where, seen), rec.get("noise"))
        if slot in spends[ledger]:
            found.append(Violation("duplicate_line", slot, "two spend lines for one slot", ledger))
        else:
            spends[ledger][slot] = spend
    else:
        raise AuditInputError(f"{where}: unknown record type {kind!r}")


# ------------------------------------------------------------------------------------------ windows


def _window_sums(spend: np.ndarray, w: int) -> np.ndarray:
    """out[i] = spend[i - w + 1] + ... + spend[i] (zeros before the start), summed directly."""
    return np.convolve(spend, np.ones(w))[: len(spend)]


def _runs(items: Iterable[tuple[int, T]]) -> list[tuple[int, int, T]]:
    """(slot, value) pairs, sorted by slot, merged into runs (first, last, value) of consecutive slots
    with one value."""
    runs: list[tuple[int, int, T]] = []
    for slot, value in items:
        if runs and runs[-1][1] == slot - 1 and runs[-1][2] == value:
            runs[-1] = (runs[-1][0], slot, value)
        else:
            runs.append((slot, slot, value))
    return runs


def _window_findings(
    spend: np.ndarray, first: int, runs: Iterable[Run], prefix: str, ledger: str | None, user: str | None,
) -> tuple[int, list[Violation]]:
    """Every window the requirements in `runs` impose on a series (`spend[i]` = slot `first + i`,
    zeros outside), at every slot of every run: the fixed window ending at the slot, the backward
    window ending there (an infeasible EB is projected up to what the window had already spent, so
    the slot itself must spend 0) and the forward window starting there."""
    by_window: dict[tuple[str, int], list[tuple[int, int, float]]] = defaultdict(list)
    for start, end, requirement in runs:
        if isinstance(requirement, Requirement):
            by_window[("fixed", requirement.w)].append((start, end, requirement.epsilon))
        else:
            by_window[("backward", requirement.backward.w)].append((start, end, requirement.backward.epsilon))
            by_window[("forward", requirement.forward.w)].append((start, end, requirement.forward.epsilon))
    if not by_window:
        return 0, []
    padded = np.concatenate([spend, np.zeros(max(w for _, w in by_window))])
    checked, found = 0, []
    for (side, w), items in sorted(by_window.items()):
        sums = _window_sums(padded, w)
        index = np.concatenate([np.arange(start, end + 1) - first for start, end, _ in items])
        bound = np.concatenate([np.full(end - start + 1, epsilon) for start, end, epsilon in items])
        checked += len(index)
        if side == "forward":
            total, limit = sums[index + w - 1], bound
        else:
            total = sums[index]
            limit = bound if side == "fixed" else np.maximum(bound, total - padded[index])
        for i in np.flatnonzero(exceeds(total, limit)):
            slot = int(index[i]) + first
            span = f"{slot}..{slot + w - 1}" if side == "forward" else f"{slot - w + 1}..{slot}"
            found.append(Violation(f"{prefix}_{side}_window", slot,
                                   f"{side} window {span} (w={w}) spent {total[i]:.12g} > {limit[i]:.12g}",
                                   ledger, user))
    return checked, found


# ------------------------------------------------------------------------------------ ledger level


def _stitch(name: str, log: _Log, found: list[Violation]) -> dict[int, _Spend]:
    """A ledger's lines, preceded by its ancestors' lines before each fork's `since`."""
    lines = dict(log.spends.get(name, {}))
    own = log.ledgers.get(name)
    if own is None:
        return lines
    seen, cutoff, parent = {name}, own.since, own.parent
    while parent is not None:
        ancestor = log.ledgers.get(parent)
        if ancestor is None or parent in seen:
            problem = "is not in the log" if ancestor is None else "loops back"
            found.append(Violation("missing_parent", own.since, f"parent {parent} {problem}", name))
            break
        seen.add(parent)
        for slot, line in log.spends.get(parent, {}).items():
            if slot < cutoff:
                lines.setdefault(slot, line)
        cutoff, parent = min(cutoff, ancestor.since), ancestor.parent
    return lines


def _ledger_checks(log: _Log, found: list[Violation]) -> int:
    checked = 0
    for name, entry in log.ledgers.items():
        parent = log.ledgers.get(entry.parent) if entry.parent is not None else None
        if parent is not None and entry.since < parent.since:
            found.append(Violation("bad_fork", entry.since, f"starts before its parent {parent.ledger} "
                                   f"(since {parent.since})", name))
        for slot in sorted(s for s in log.spends.get(name, {}) if s < entry.since):
            found.append(Violation("line_before_since", slot, f"the ledger starts at {entry.since}", name))
    for name in sorted(set(log.ledgers) | set(log.spends)):
        lines = _stitch(name, log, found)
        if not lines:
            continue
        first, last = min(lines), max(lines)
        if last - first + 1 > MAX_EMPTY_SLOTS + 2 * len(lines):
            raise AuditInputError(f"ledger {name}: spend lines from slot {first} to {last}, only {len(lines)} of "
                                  "them: slot numbers this sparse are not a log the job or the replay writes")
        spend = np.zeros(last - first + 1)
        for slot, line in lines.items():
            spend[slot - first] = line.total
        runs = _runs((slot, lines[slot].requirement) for slot in sorted(lines))
        n, more = _window_findings(spend, first, runs, "ledger", name, None)
        checked += n
        found += more
    return checked


def _line_rules(line: _Spend, release: Release | None, found: list[Violation]) -> None:
    """What a slot's decision lets a line spend: the release's kind when known, else the line's own. A
    spend that the decision rules out is settled to exactly 0, so any positive amount is a finding."""
    kind = line.kind if release is None else release.kind
    if kind == "skip" and line.spend2 > 0:
        found.append(Violation("skip_spent", line.slot, f"publication spend {line.spend2} on a skip", line.ledger))
    if kind == "nullify" and line.total > 0:
        found.append(Violation("nullify_spent", line.slot, f"spend {line.total} on a nullified slot", line.ledger))
    if release is not None and not release.dissimilarity_ran and line.spend1 > 0:
        found.append(Violation("calculation_without_dissimilarity", line.slot,
                               f"calculation spend {line.spend1}", line.ledger))


# ------------------------------------------------------------------------------------- full audit


def _releases(records: Iterable[dict[str, Any]], found: list[Violation]) -> dict[int, Release]:
    out: dict[int, Release] = {}
    for number, rec in enumerate(records, 1):
        where = f"release {number}"
        if not isinstance(rec, dict):
            raise AuditInputError(f"{where}: not a JSON object")
        slot = _need(rec, "slot", where)
        kind = rec.get("kind")
        if kind not in KINDS:
            found.append(Violation("bad_release", slot, f"kind {kind!r}"))
        if slot in out:
            found.append(Violation("release_duplicate", slot, "two releases for one slot"))
            continue
        out[slot] = Release.of(slot, rec)
    if max(out, default=0) > MAX_EMPTY_SLOTS + 2 * len(out):
        raise AuditInputError(f"releases up to slot {max(out)}, only {len(out)} of them: slot numbers this sparse are "
                              "not a release topic the job or the replay writes")
    for slot in range(1, max(out, default=0) + 1):
        if slot not in out:
            found.append(Violation("release_missing", slot, "no release for this slot"))
    return out


def _segments(members: list[_Member]) -> tuple[tuple[str, int], ...]:
    """A user's (ledger, since) in order; of several member lines at one slot the last one holds."""
    by_slot: dict[int, str] = {}
    for member in sorted(members, key=lambda m: m.since):  # stable: file order within a slot
        by_slot[member.since] = member.ledger
    return tuple((ledger, since) for since, ledger in sorted(by_slot.items()))


def _membership(
    log: _Log, users: dict[str, tuple[tuple[str, int], ...]], horizon: int, found: list[Violation]
) -> np.ndarray:
    """Member lines against ledgers: known ledger, not before its since; then, per ledger and slot up
    to the last release, a spend line exactly when it has members, with their number. Returns the
    number of users the member lines place at each slot (index = slot, up to horizon + 1)."""
    counts: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(horizon + 2, dtype=np.int64))
    for user, segments in users.items():
        for i, (ledger, since) in enumerate(segments):
            entry = log.ledgers.get(ledger)
            if entry is None:
                found.append(Violation("unknown_ledger", since, "member line for an unknown ledger", ledger, user))
            elif since < entry.since:
                found.append(Violation("member_before_ledger", since, f"the ledger starts at {entry.since}",
                                       ledger, user))
            end = segments[i + 1][1] if i + 1 < len(segments) else horizon + 1
            counts[ledger][min(since, horizon + 1)] += 1
            counts[ledger][min(end, horizon + 1)] -= 1
    population = np.zeros(horizon + 2, dtype=np.int64)
    for ledger in sorted(set(counts) | set(log.spends)):
        live = np.cumsum(counts[ledger])
        population += live
        lines = log.spends.get(ledger, {})
        if ledger not in log.ledgers and lines:
            found.append(Violation("unknown_ledger", min(lines), "spend lines for an unknown ledger", ledger))
        gaps = [int(slot) for slot in np.flatnonzero(live[1: horizon + 1] > 0) + 1 if int(slot) not in lines]
        for first, last in _spans(gaps):
            found.append(Violation("gap", first, f"slots {first}..{last}: members but no spend line", ledger))
        wrong = {slot: (line.members, int(live[slot]) if slot <= horizon else 0) for slot, line in lines.items()}
        for first, last in _spans(sorted(slot for slot, (said, real) in wrong.items() if said != real)):
            said, real = wrong[first]
            found.append(Violation("members_mismatch", first, f"slots {first}..{last}: line says {said} members, "
                                   f"member lines say {real} (at slot {first})", ledger))
    return population


def _discrete_laplace_variance(theta: np.ndarray) -> np.ndarray:
    """Variance of the two-sided geometric at epsilon theta: 2 alpha / (1 - alpha)^2, alpha = e^-theta."""
    return 2.0 * np.exp(-theta) / np.expm1(-theta) ** 2


#: Under Adaptive's even spending no threshold whose kept share is below this is chosen (the rescaled
#: noise must stay within int64; docs/mechanisms.md section 14). Kept here; a test compares with OBS.
MIN_KEPT_SHARE = 2.0**-10


def _budget_levels(budgets: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The slot's distinct budgets and the members at each."""
    levels, inverse = np.unique(budgets, return_inverse=True)
    return levels, np.bincount(inverse, weights=members, minlength=len(levels))


def _kept_share(levels: np.ndarray, weights: np.ndarray, theta: float) -> float:
    """The expected kept share at theta (docs/mechanisms.md section 14): the mean over all users of
    p = (e^eps - 1)/(e^theta - 1) below theta and 1 at or above it."""
    below = levels < theta
    p = np.expm1(levels[below]) / np.expm1(theta)
    return float((weights[~below].sum() + (weights[below] * p).sum()) / weights.sum())


def _obs_errors(budgets: np.ndarray, members: np.ndarray, rescaled: bool = False,
                load: float = 1.0) -> dict[float, float]:
    """OBS's expected error at every distinct positive budget theta of a slot (docs/mechanisms.md
    sections 2-3), straight from the definition: with p = (e^eps - 1)/(e^theta - 1) for the users below
    theta, sum p (1 - p) + (sum (1 - p))^2 + the noise variance at theta. Users at 0 are never kept.
    rescaled (Adaptive's even spending, section 14): with the kept share s = (sum over all users of
    their p, 1 at or above theta) / all users, (load * sum p (1 - p) + the noise variance) / s^2, and
    no candidate with s below MIN_KEPT_SHARE; load is the mean cell's share of the users (1: every
    user in one cell, `_mean_cell_load`). Candidates whose error is not finite are left out, as OBS
    leaves them out."""
    levels, weights = _budget_levels(budgets, members)
    out: dict[float, float] = {}
    with np.errstate(all="ignore"):
        for theta in levels[levels > 0]:
            below = levels < theta
            p = np.expm1(levels[below]) / np.expm1(theta)
            n = weights[below]
            variance = float((n * p * (1 - p)).sum())
            if rescaled:
                share = _kept_share(levels, weights, theta)
                if share < MIN_KEPT_SHARE:
                    continue
                error = (load * variance + float(_discrete_laplace_variance(theta))) / share**2
            else:
                error = variance + float((n * (1 - p)).sum()) ** 2 + float(_discrete_laplace_variance(theta))
            if math.isfinite(error):
                out[float(theta)] = error
    return out


def _mean_cell_load(before: tuple[int, ...], population: float) -> float:
    """The mean cell's share of the registered users behind a rescaled publication of version 4 on
    (section 14, "The mean cell"): the previous release's counts summed over their cells, clipped to
    [1, population], over the population. The sum is clipped as an integer first: a record's counts
    may be integers of any size."""
    cells = len(before)
    total = min(max(sum(before), cells), math.ceil(population) * cells)
    return min(total / cells, population) / population


def _obs_finding(errors: dict[float, float], chosen: float | None) -> str | None:
    """Why `chosen` is not a threshold OBS could pick from `errors` (None when it is): one of the
    candidates whose error is the smallest."""
    if chosen is None or chosen not in errors:
        return f"{chosen!r} is none of the slot's positive budgets {sorted(errors)[:5]}"
    best = min(errors.values())
    if errors[chosen] > best * (1 + DERIVED_RTOL):
        return f"its expected error {errors[chosen]:.9g} is above the smallest, {best:.9g}"
    return None


def _release_checks(
    releases: dict[int, Release], log: _Log, population: np.ndarray, rules: InputRules, found: list[Violation]
) -> None:
    """Every release field that follows from the log, the configuration and the earlier releases
    (docs/mechanisms.md, "What the auditor proves"): a skip or nullify repeats the previous counts
    (zeros before slot 1); the population is what the member lines place; a dissimilarity's and a
    publication's epsilon are OBS's choice over the slot's spend1 and spend2 (weighted by members),
    a publication's threshold the root of OBS's error there, and the decision follows from the
    threshold; the labels are the configuration's, one noise label for the whole run."""
    by_slot: dict[int, list[_Spend]] = defaultdict(list)
    for ledger_lines in log.spends.values():
        for line in ledger_lines.values():
            by_slot[line.slot].append(line)
    allowed_noise = {NOISE_LABELS.get(rules.noise), SEEDED_NOISE_LABEL}
    first_noise = releases[min(releases)].labels["noise"] if releases else None
    for slot, release in sorted(releases.items()):
        labels = release.labels

        def finding(rule: str, detail: str, at: int = slot) -> None:
            found.append(Violation(rule, at, detail))

        if release.counts is None or len(release.counts) != rules.d:
            finding("bad_release", f"counts must be a list of {rules.d} integers")
        if release.population is None:
            finding("bad_release", "population must be an integer")
        elif release.population != int(population[slot]):
            finding("population_mismatch", f"release says {release.population}, member lines {int(population[slot])}")
        previous = releases.get(slot - 1)
        before = (0,) * rules.d if slot == 1 else (previous.counts if previous is not None else None)
        if release.kind in ("skip", "nullify") and before is not None and release.counts != before:
            finding("repeat_changed", f"a {release.kind} with counts {list(release.counts or ())[:8]} after "
                    f"{list(before)[:8]}")
        lines = by_slot.get(slot, [])
        members = np.array([line.members for line in lines], dtype=float)
        if release.dissimilarity_ran:
            why = _obs_finding(_obs_errors(np.array([line.spend1 for line in lines]), members),
                               release.epsilon_calculation)
            if why is not None:
                finding("calculation_scale", f"epsilon_calculation {why}")
        if release.kind == "publish":
            rescaled = rules.mechanism == ADAPTIVE and labels.get("family") in ADAPTIVE_RESCALED
            _publication_checks(release, np.array([line.spend2 for line in lines]), members,
                                before, rescaled, finding)
        elif labels["schema_version"] not in (None, 2) and release.kept_share is not None:
            finding("kept_share_mismatch", f"kept_share {release.kept_share!r} on a {release.kind}: null expected")
        if release.dissimilarity is not None and release.threshold is not None:
            cleared = release.dissimilarity > release.threshold
            if cleared != (release.kind == "publish") and release.kind in ("publish", "skip"):
                finding("decision_mismatch", f"dissimilarity {release.dissimilarity!r}, threshold "
                        f"{release.threshold!r}, kind {release.kind}")
        if not isinstance(labels["noise"], str) or labels["noise"] not in allowed_noise \
                or labels["noise"] != first_noise:
            finding("noise_mismatch", f"noise {labels['noise']!r}: the configuration's noise: {rules.noise} writes "
                    f"{NOISE_LABELS.get(rules.noise)!r} (or {SEEDED_NOISE_LABEL!r} with --seed), one label per run; "
                    f"the first release says {first_noise!r}")
        family = labels.get("family")
        wrong = [f"mechanism {labels['mechanism']!r}"] if labels["mechanism"] != rules.mechanism else []
        if (family is not None or rules.mechanism == ADAPTIVE) and family not in (
                ADAPTIVE_FAMILIES if rules.mechanism == ADAPTIVE else ()):
            wrong.append(f"family {family!r}")
        start, end = iso(rules.clock.start_ms(slot)), iso(rules.clock.end_ms(slot))
        if (labels["start"], labels["end"]) != (start, end):
            wrong.append(f"start/end {labels['start']!r}/{labels['end']!r} (the clock's {start}/{end})")
        if labels["domain"] is not None and labels["domain"] != rules.domain:  # absent before version 2
            wrong.append(f"domain {labels['domain']!r} (the configuration's {dict(rules.domain)!r})")
        if labels["schema_version"] is not None and _version(labels["schema_version"]) is None:
            wrong.append(f"schema_version {labels['schema_version']!r} (this auditor reads 1 to "
                         f"{RELEASE_SCHEMA_VERSION})")
        if wrong:
            finding("label_mismatch", f"{', '.join(wrong)} under mechanism {rules.mechanism}")


def _publication_checks(release: Release, spend2: np.ndarray, members: np.ndarray, before: tuple[int, ...] | None,
                        rescaled: bool, finding: Callable[[str, str], None]) -> None:
    """A publication's epsilon_publication, threshold and kept_share from its slot's spend2 lines
    (weighted by their members): OBS's choice, the root of its error there (under Adaptive's rescaled
    families, from version 4 on, the mean cell's, whose load needs the previous release `before`:
    without it, release_missing or bad_release says why, nothing is derived) and its kept share."""
    version = _version(release.labels["schema_version"])
    load = 1.0
    if rescaled and version is not None and version >= MEAN_CELL_SINCE and members.sum() > 0:
        if not before:
            return  # no previous release to read L from: release_missing or bad_release says why
        load = _mean_cell_load(before, float(members.sum()))
    errors = _obs_errors(spend2, members, rescaled, load)
    chosen = release.epsilon_publication
    why = _obs_finding(errors, chosen)
    if why is not None:
        finding("publication_scale", f"epsilon_publication {why}")
    elif chosen is not None:
        root = math.sqrt(errors[chosen])
        if release.threshold is None or abs(release.threshold - root) > DERIVED_RTOL * root:
            finding("threshold_mismatch", f"threshold {release.threshold!r}, OBS's error gives {root:.9g}")
        share = _kept_share(*_budget_levels(spend2, members), chosen) if rescaled else None
        if release.labels["schema_version"] not in (None, 2) and not _same_share(release.kept_share, share):
            finding("kept_share_mismatch", f"kept_share {release.kept_share!r}, the publication's "
                    f"{'kept share is ' + format(share, '.9g') if share is not None else 'is not rescaled'}")


def _noise_labels(releases: dict[int, Release], log: _Log, noise: str, found: list[Violation]) -> None:
    """Test randomness in a production run: every release and spend line names a source the
    configuration allows (`noise: opendp` only the secure one; the seeded source, which `pwevent run`
    starts only with its test switch, only under `noise: numpy-fast`), a spend line its release's.
    One finding per run of consecutive slots with one label, of the releases and of each ledger."""
    allowed = (NOISE_LABELS[noise], *([SEEDED_NOISE_LABEL] if noise == "numpy-fast" else []))  # a tuple: any JSON
    said = {slot: release.labels["noise"] for slot, release in releases.items()}
    series: dict[str | None, dict[int, Any]] = {None: said, **{
        ledger: _spend_labels(lines, said) for ledger, lines in log.spends.items()}}
    for ledger, labels in series.items():
        wrong = ((slot, label) for slot, label in sorted(labels.items())
                 if label not in allowed or label != said.get(slot, label))
        for first, last, label in _runs(wrong):
            what = "releases" if ledger is None else f"spend lines (their releases say {said.get(first)!r})"
            found.append(Violation("noise_label", first, f"slots {first}..{last}: {what} name noise {label!r}; "
                                   f"noise: {noise} allows {list(allowed)}", ledger))


def _spend_labels(lines: Mapping[int, _Spend], said: Mapping[int, Any]) -> dict[int, Any]:
    """A ledger's spend lines' noise labels by slot. Releases before 2026-12-06 wrote spend lines
    without one: a ledger's lines before its first labelled line (a job upgraded from such a release)
    stand for their release's label; from that line on a missing label is a label of None."""
    labelled = [slot for slot, line in lines.items() if line.noise is not None]
    since = min(labelled, default=None)
    return {slot: said.get(slot) if line.noise is None and (since is None or slot < since) else line.noise
            for slot, line in lines.items()}


def _same_share(said: float | None, derived: float | None) -> bool:
    """A release's kept_share agrees with the auditor's (both null, or within DERIVED_RTOL)."""
    if said is None or derived is None:
        return said is None and derived is None
    return abs(said - derived) <= DERIVED_RTOL * derived


# ------------------------------------------------------ versions, skipped thresholds, post-processing


def _release_field_checks(releases: dict[int, Release], rules: InputRules, found: list[Violation]) -> tuple[str, ...]:
    """The release fields `_release_checks` leaves to these: one schema version per run and its
    fields, the threshold wherever a dissimilarity ran, `smoothed` and `interval`. Returns the
    report's notes (where the post-processing restarted)."""
    version = _schema_checks(releases, found)
    _threshold_checks(releases, found)
    return _postprocess_checks(releases, rules, version, found)


def _version(said: Any) -> int | None:
    """A schema_version this auditor reads as a number (absent: 1), else None (label_mismatch)."""
    if said is None:
        return 1
    return said if type(said) is int and said in READ_VERSIONS else None


def _schema_checks(releases: dict[int, Release], found: list[Violation]) -> int | None:
    """One schema_version for the whole run, the first release's (an absent one is 1), but for one
    step UPGRADE (version 3, then 4 from some slot on: a job upgraded across it), and every release
    with exactly its version's fields (FIELD_SINCE: `domain` not null from version 2 on, `kept_share`,
    null or not, from version 3 on, neither before). Returns the run's first version."""
    if not releases:
        return RELEASE_SCHEMA_VERSION
    first = min(releases)
    run = current = releases[first].labels["schema_version"]
    for slot, release in sorted(releases.items()):
        said = release.labels["schema_version"]
        if type(said) is int and type(current) is int and (current, said) == UPGRADE:
            current = said
        elif said != current or type(said) is not type(current):
            found.append(Violation("schema_version_mixed", slot, f"schema_version {said!r}, the run's {current!r} "
                                   f"(its first release's, slot {first}: {run!r}; an absent version is 1; "
                                   f"only {UPGRADE[0]} may turn into {UPGRADE[1]})"))
        version = _version(said)
        rec = release.record
        has = {name: name in rec and (rec[name] is not None or name == "kept_share") for name in FIELD_SINCE}
        wrong = [f"{'with' if has[name] else 'without'} {name}" for name, since in FIELD_SINCE.items()
                 if version is not None and has[name] != (version >= since)]
        if wrong:
            found.append(Violation("schema_fields_mismatch", slot, f"version {version}, {', '.join(wrong)}"))
    return _version(run)


def _threshold_checks(releases: dict[int, Release], found: list[Violation]) -> None:
    """Where a dissimilarity ran, the threshold it was compared with is there whenever the release
    states a publication epsilon (both come from one OBS choice; neither when no user had publication
    budget). A skip's threshold, which the log cannot give (a skip spends no publication budget), is
    at least the noise's own standard deviation at its epsilon_publication: OBS's error contains the
    noise variance (a publication's is derived exactly by `_release_checks`)."""
    for slot, release in sorted(releases.items()):
        if release.dissimilarity is None:
            continue
        epsilon, threshold = release.epsilon_publication, release.threshold
        if (epsilon is None) != (threshold is None):
            found.append(Violation("threshold_missing", slot, f"threshold {release.record.get('threshold')!r}, "
                                   f"epsilon_publication {release.record.get('epsilon_publication')!r}"))
        elif epsilon is not None and threshold is not None and release.kind == "skip":
            with np.errstate(all="ignore"):
                floor = math.sqrt(float(_discrete_laplace_variance(np.array(epsilon)))) if epsilon > 0 else math.inf
            if threshold < floor * (1 - DERIVED_RTOL):
                found.append(Violation("threshold_mismatch", slot, f"a skip's threshold {threshold!r} is below the "
                                       f"noise's standard deviation {floor:.9g} at epsilon_publication {epsilon!r}"))


def _postprocess_checks(
    releases: dict[int, Release], rules: InputRules, version: int | None, found: list[Violation]
) -> tuple[str, ...]:
    """Under `postprocess: none` no release has `smoothed` or `interval`. Under `kalman`, the job's
    own filter bank (`Config.smoother`) steps through the releases in slot order, read as
    `PublicRelease.from_record` reads them, and each release's `smoothed` and (from version 2 on)
    `interval` must be its output within SMOOTHED_ROUNDING + SMOOTHED_RTOL. A job that resumes after
    the last release without state (`kafka.resume_after_last_release`) starts a fresh bank, so where
    a release disagrees with the running bank but agrees with a fresh one, the bank restarts there
    (a note says so). A missing or unreadable release (release_missing, bad_release) ends the check."""
    smoother = rules.smoother()
    if smoother is None:
        found += [Violation(f"{name}_mismatch", slot, f"{name} under postprocess: none")
                  for slot, release in sorted(releases.items()) for name in ("smoothed", "interval")
                  if name in release.record]
        return ()
    wrong: dict[str, dict[int, tuple[Any, np.ndarray]]] = {"smoothed": {}, "interval": {}}
    restarts = []
    for slot in range(1, max(releases, default=0) + 1):
        release = releases.get(slot)
        public = _public_release(release, rules.d)
        if release is None or public is None:
            break
        smoother, restarted, misses = _bank_step(smoother, rules, release, public, version != 1)
        restarts += [slot] if restarted else []
        for name, said, derived in misses:
            wrong[name][slot] = (said, derived)
    for name, slots in wrong.items():
        for first, last in _spans(sorted(slots)):
            said, derived = slots[first]
            found.append(Violation(f"{name}_mismatch", first, f"slots {first}..{last}: not the post-processing of the "
                                   f"releases (slot {first}: {str(said)[:80]}, the filter bank gives "
                                   f"{np.round(derived, 3).tolist()!s:.80})"))
    return tuple(f"post-processing restarted at slot {slot} (a job that resumed after slot {slot - 1} without state)"
                 for slot in restarts)


def _bank_step(
    smoother: KalmanSmoother, rules: InputRules, release: Release, public: PublicRelease, with_interval: bool
) -> tuple[KalmanSmoother, bool, list[tuple[str, Any, np.ndarray]]]:
    """One slot: the running bank's output against the release and, where they disagree, a fresh
    bank's (a restart when that one agrees). Returns the bank to go on with, whether it restarted,
    and each field that disagrees as (name, the release's value, the running bank's)."""
    derived = _smoothed(smoother, public)
    misses = _disagreements(release, derived, with_interval)
    if misses and release.slot > 1:
        fresh = rules.smoother()
        assert fresh is not None
        if not _disagreements(release, _smoothed(fresh, public), with_interval):
            return fresh, True, []
    return smoother, False, [(name, release.record.get(name), derived[name]) for name in misses]


def _public_release(release: Release | None, d: int) -> PublicRelease | None:
    """What the post-processing reads of a release, None when it cannot be read."""
    if release is None or release.counts is None or len(release.counts) != d or release.population is None:
        return None
    try:
        return PublicRelease.from_record(dict(release.record))
    except (KeyError, TypeError, ValueError):
        return None


def _smoothed(smoother: KalmanSmoother, public: PublicRelease) -> dict[str, np.ndarray]:
    """One step of the bank: the slot's `smoothed` and `interval`, unrounded."""
    smoothed = smoother.step(public)
    return {"smoothed": smoothed, "interval": smoother.interval(smoothed, public.population)}


def _disagreements(release: Release, derived: dict[str, np.ndarray], with_interval: bool) -> list[str]:
    """The fields of `smoothed` and `interval` that are not `derived` (interval: absent before version 2)."""
    out = [] if _close(release.record.get("smoothed"), derived["smoothed"]) else ["smoothed"]
    if not (_close(release.record.get("interval"), derived["interval"]) if with_interval
            else "interval" not in release.record):
        out.append("interval")
    return out


def _close(said: Any, derived: np.ndarray) -> bool:
    values = _numbers(said)
    return values is not None and values.shape == derived.shape and bool(np.all(
        np.abs(values - derived) <= SMOOTHED_ROUNDING + SMOOTHED_RTOL * np.maximum(np.abs(derived), 1.0)))


def _numbers(value: Any) -> np.ndarray | None:
    """A list (of lists) of finite numbers as a float array; None for anything else (null, text,
    booleans, ragged lists)."""
    def leaves(item: Any) -> Iterator[Any]:
        if isinstance(item, list):
            for inner in item:
                yield from leaves(inner)
        else:
            yield item

    if not isinstance(value, list) or any(_finite(leaf) is None for leaf in leaves(value)):
        return None
    try:
        return np.array(value, dtype=float)
    except ValueError:
        return None


def _spans(slots: list[int]) -> list[tuple[int, int]]:
    """Sorted slots as runs of consecutive slots (first, last): one finding per run, not per slot."""
    return [(first, last) for first, last, _ in _runs((slot, None) for slot in slots)]


def _serves(ledger: AnyRequirement, user: AnyRequirement, global_requirement: Requirement | None) -> bool:
    """A personalized ledger serves a user when it runs at exactly the user's requirement. A baseline
    ledger runs at the global requirement, which must cover the user's (window at least as long,
    budget at most as large): every window of the user's lies inside one of the global's, so it
    spends at most the global E, which is at most the user's."""
    if global_requirement is None:
        return ledger == user
    return ledger == global_requirement and isinstance(user, Requirement) and global_requirement.covers(user)


@dataclass(frozen=True)
class _LedgerSeries:
    """A ledger's own lines as arrays (slots ascending, their total spends) and its requirement runs."""

    slots: np.ndarray
    totals: np.ndarray
    runs: list[Run]

    @classmethod
    def of(cls, lines: Mapping[int, _Spend]) -> _LedgerSeries:
        slots = sorted(lines)
        totals = np.array([lines[slot].total for slot in slots], dtype=float)
        return cls(np.array(slots, dtype=np.int64), totals, _runs((slot, lines[slot].requirement) for slot in slots))


def _ledger_series(log: _Log) -> dict[str, _LedgerSeries]:
    return {name: _LedgerSeries.of(lines) for name, lines in log.spends.items()}


def _user_series(segments: tuple[tuple[str, int], ...], start: int, horizon: int,
                 series: Mapping[str, _LedgerSeries]) -> np.ndarray:
    """A user's spend at slots start..horizon (index 0 = `start`) from its member lines: the lines of
    the ledger it belongs to at each slot, 0 where it belongs to none."""
    spend = np.zeros(horizon - start + 1)
    for i, (ledger, since) in enumerate(segments):
        end = min(segments[i + 1][1] - 1 if i + 1 < len(segments) else horizon, horizon)
        own = series.get(ledger)
        if own is None or since > end:
            continue
        lo, hi = np.searchsorted(own.slots, max(since, start)), np.searchsorted(own.slots, end, side="right")
        spend[own.slots[lo:hi] - start] = own.totals[lo:hi]
    return spend


def _user_checks(
    log: _Log, inputs: AuditInputs, users: dict[str, tuple[tuple[str, int], ...]], horizon: int,
    found: list[Violation],
) -> tuple[int, tuple[str, ...]]:
    """Registration against membership, then, once per distinct (membership, timeline), the user's
    series from its member lines against the requirements the user declared. Returns the windows
    checked and the unverifiable (erased) users."""
    declared_by_user = inputs.declared({user: segments[0][1] for user, segments in users.items()})
    unverifiable = tuple(sorted(user for user in users if inputs.unverifiable(user)))
    for user in sorted(set(users) - set(declared_by_user) - set(unverifiable)):
        found.append(Violation("unregistered_member", users[user][0][1], "no valid requirement in the input",
                               users[user][0][0], user))
    groups: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for user, declared in sorted(declared_by_user.items()):
        if declared.registered > horizon:
            continue
        segments = users.get(user)
        if not segments:
            found.append(Violation("missing_member", declared.registered, "registered but in no ledger", None, user))
            continue
        groups[(segments, declared.updates)].append(user)
    series = _ledger_series(log)
    empty = _LedgerSeries.of({})
    checked = 0
    for (segments, _), names in groups.items():
        declared = declared_by_user[names[0]]
        who = names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} with the same history)"
        first_member = segments[0][1]
        if first_member < declared.registered:
            found.append(Violation("member_before_registration", first_member,
                                   f"registered at {declared.registered}", segments[0][0], who))
        elif first_member > declared.registered:
            found.append(Violation("missing_member", declared.registered,
                                   f"in no ledger before slot {first_member}", None, who))
        start = min(first_member, declared.registered)
        spend = _user_series(segments, start, horizon, series)
        share = inputs.rules.share
        wanted = [(first, last, requirement.scaled(share)) for first, last, requirement in declared.runs(horizon)]
        global_requirement = inputs.global_requirement.scaled(share) if inputs.global_requirement else None
        for i, (ledger, since) in enumerate(segments):
            end = min(segments[i + 1][1] - 1 if i + 1 < len(segments) else horizon, horizon)
            own = series.get(ledger, empty)
            entry = log.ledgers.get(ledger)
            joined = [(since, since, entry.requirement)] if entry is not None else []
            for label, runs in (("ledger line", joined), ("spend line", own.runs)):
                clash = _first_mismatch(runs, wanted, since, end, global_requirement)
                if clash is not None:
                    slot, have, want = clash
                    found.append(Violation("requirement_mismatch", slot, f"{label} {have.to_json()}, "
                                           f"declared {want.to_json()}", ledger, who))
        n, more = _window_findings(spend, start, wanted, "user", None, who)
        checked += n
        found += more
    return checked, unverifiable


def _first_mismatch(
    have: list[Run], want: list[Run], start: int, end: int, global_requirement: Requirement | None
) -> tuple[int, AnyRequirement, AnyRequirement] | None:
    """The earliest slot in start..end where a ledger's requirement run does not serve the declared one."""
    clashes = [
        (max(a, c, start), ledger, user) for a, b, ledger in have for c, d, user in want
        if max(a, c, start) <= min(b, d, end) and not _serves(ledger, user, global_requirement)
    ]
    return min(clashes, key=lambda clash: clash[0], default=None)


def audit_records(records: Iterable[Any], inputs: AuditInputs | None = None) -> AuditReport:
    """Audit a spend log (records as dicts); with `inputs`, the full audit (docs/mechanisms.md)."""
    return _audit(((f"record {i}", rec) for i, rec in enumerate(records, 1)), inputs)


@dataclass(frozen=True)
class _Audited:
    """One statistic's log audited: its report, and what the check across statistics reads."""

    report: AuditReport
    log: _Log
    users: dict[str, tuple[tuple[str, int], ...]]
    horizon: int


def _audit(records: Iterable[tuple[str, Any]], inputs: AuditInputs | None) -> AuditReport:
    """Every statistic's log audited on its own (its ledgers, its members, its releases, each user
    against its share of the declared requirement), then, with several statistics, every user's
    windows summed over all of them against the requirement it declared (docs/mechanisms.md,
    "Several statistics under one budget")."""
    parts, views = _read_logs(records)
    names: list[str | None] = list(inputs.statistics) if inputs is not None else list(parts)
    names = names or [None]
    extra: list[Violation] = []
    for name in (name for name in parts if name not in names):
        lines = parts[name]
        where = min((line.slot for spends in lines.spends.values() for line in spends.values()), default=1)
        extra.append(Violation("unknown_statistic", where, f"{lines.lines} spend lines of statistic {name!r}; the "
                               f"configuration's statistics are {names}"))
    if inputs is not None:
        for number, rec in enumerate(inputs.releases, 1):
            said = rec.get("statistic") if isinstance(rec, dict) else None
            if said not in names:
                slot = rec.get("slot") if isinstance(rec, dict) else None
                extra.append(Violation("unknown_statistic", slot if isinstance(slot, int) else 1,
                                       f"release {number} of statistic {said!r}; the configuration's statistics "
                                       f"are {names}"))
    audited = {}
    for name in names:
        part = parts.get(name, _LogParts())
        audited[name] = _audit_log(part.log(), list(part.found), inputs.of_statistic(name) if inputs else None)
        if inputs is not None and len(names) > 1 and not any(
                isinstance(rec, dict) and rec.get("statistic") == name for rec in inputs.releases):
            extra.append(Violation("unknown_statistic", 1, f"no release of statistic {name!r}"))
    windows = 0
    late_notes: list[str] = []
    if inputs is not None:
        late, late_notes = _late_refusal_checks(inputs)
        extra += late
    if inputs is not None and len(names) > 1:
        windows, more = _total_checks(inputs, [audited[name] for name in names])
        extra += more
    horizon = max(one.horizon for one in audited.values()) if inputs is not None else None
    more, notes = _utilisation_checks(views, {name: one.log for name, one in audited.items()},
                                      _whole_requirements(inputs, names), horizon)
    return _combined(audited, extra + more, windows, late_notes + notes)


def _combined(audited: Mapping[str | None, _Audited], extra: list[Violation], windows: int,
              notes: list[str]) -> AuditReport:
    """One report of the statistics' reports (the only one's, with one statistic and nothing more found)
    with the findings and notes across statistics."""
    if len(audited) == 1 and not extra and windows == 0:
        report = next(iter(audited.values())).report
        return replace(report, notes=(*report.notes, *notes))
    found = list(extra)
    members: dict[str, tuple[str, ...]] = {}
    users: set[str] = set()
    for name, one in audited.items():
        report = one.report
        found += [replace(v, statistic=name) for v in report.violations]
        members.update({f"{name}/{ledger}" if name is not None else ledger: names
                        for ledger, names in report.members.items()})
        users |= set(one.users)
    found = [replace(v, ledger=f"{v.statistic}/{v.ledger}") if v.statistic and v.ledger else v for v in found]
    found.sort(key=lambda v: (v.slot, v.rule, v.statistic or "", v.ledger or "", v.user or ""))
    reports = [one.report for one in audited.values()]
    return AuditReport(sum(r.ledgers for r in reports), len(users) or max(r.users for r in reports),
                       sum(r.spend_lines for r in reports), sum(r.windows_checked for r in reports) + windows,
                       tuple(found), reports[0].skipped, members,
                       (*(note for r in reports for note in r.notes), *notes),
                       tuple(sorted({user for r in reports for user in r.unverifiable})), reports[0].unusable)


# ------------------------------------------------------------------------------- the budget in view

#: Statistic -> how its lines' requirements read as their classes' whole requirements: None where the
#: lines state them whole (share 1), else a table (a requirement at the share -> the whole one, None
#: where two whole ones give it); None for all when the shares are unknown (a quick audit of several).
WholeRequirements: TypeAlias = Mapping[str | None, Mapping[AnyRequirement, AnyRequirement | None] | None] | None


def _whole_requirements(inputs: AuditInputs | None, names: list[str | None]) -> WholeRequirements:
    """How to read each statistic's stated requirements as whole ones (`WholeRequirements`). A line of
    a statistic at share s states its class's requirement at s (`Requirement.scaled`); the class's
    whole requirement is then the one of those the input declares (and the default and the global
    one) that gives it at s: taken from the requirements input, not from the log."""
    if inputs is None:
        return {None: None} if names == [None] else None
    declared: set[AnyRequirement] = {requirement for updates in inputs.updates.values() for _, requirement in updates}
    declared |= {r for r in (inputs.rules.default, inputs.rules.global_requirement) if r is not None}
    out: dict[str | None, dict[AnyRequirement, AnyRequirement | None] | None] = {}
    for name in names:
        share = inputs.statistics[name].share if name in inputs.statistics else inputs.rules.share
        if share == 1.0:
            out[name] = None
            continue
        table: dict[AnyRequirement, AnyRequirement | None] = {}
        for whole in sorted(declared, key=repr):
            at_share = whole.scaled(share)
            table[at_share] = whole if table.get(at_share, whole) == whole else None
        out[name] = table
    return out


def _exact(amount: float) -> int:
    """A spend (a finite float >= 0) as a whole number of `EXACT_UNIT`s."""
    numerator, denominator = amount.as_integer_ratio()
    return numerator * (EXACT_UNIT // denominator)


def _ppm(spent: float, epsilon: float) -> int:
    """round(10^6 spent / epsilon), the exact quotient rounded to the nearest integer, half to even."""
    a, b = spent.as_integer_ratio()
    c, d = epsilon.as_integer_ratio()
    quotient, rest = divmod(PPM * a * d, b * c)
    return quotient + (2 * rest > b * c or (2 * rest == b * c and quotient % 2 == 1))


def _bucket(w: int) -> str:
    return [name for name, lowest in WINDOW_BUCKETS.items() if w >= lowest][-1]


@dataclass(frozen=True)
class _Share:
    """A class's share of its window budget at a slot, in millionths, and what it was computed from."""

    ppm: int
    ledger: str
    window: Requirement

    def __str__(self) -> str:
        return f"ledger {self.ledger}, w={self.window.w}, epsilon {self.window.epsilon!r}"


def _utilisation_checks(views: list[_View], logs: Mapping[str | None, _Log], whole: WholeRequirements,
                        horizon: int | None) -> tuple[list[Violation], list[str]]:
    """Every `utilisation` record recomputed from the spend lines (docs/formats.md): at its slot, for
    every ledger with a spend line there (in any statistic), the spend of its window (w of its class's
    whole requirement, the backward one if dynamic) summed exactly over every statistic's stitched
    lines and rounded once to a float, over that requirement's epsilon, in millionths rounded half to
    even; per window bucket the largest, 0 without a ledger. With `horizon` (the full audit), every
    released slot from the first record on has one, and none is past the last release."""
    found: list[Violation] = []
    if not views:
        spent = any(log.spends for log in logs.values())
        return found, ["the spend log has no utilisation records (a log of a release before they were written): "
                       "the budget in view was not checked"] if spent else []
    if whole is None:
        return found, ["utilisation records not checked: with several statistics the classes' whole requirements "
                       "follow from the shares and the declared requirements (the full audit)"]
    records: dict[int, _View] = {}
    for view in sorted(views, key=lambda v: v.slot):
        if view.slot in records:
            found.append(Violation("utilisation_duplicate", view.slot, "two utilisation records for one slot"))
        else:
            records[view.slot] = view
    expected: dict[int, dict[str, _Share]] = defaultdict(dict)
    unchecked: dict[int, set[str]] = defaultdict(set)
    for ledger in sorted({ledger for log in logs.values() for ledger in (*log.ledgers, *log.spends)}):
        live: dict[int, tuple[str | None, AnyRequirement]] = {}
        for name, log in logs.items():
            for slot, line in log.spends.get(ledger, {}).items():
                if slot in records:
                    live.setdefault(slot, (name, line.requirement))
        if not live:
            continue
        sums = [_prefix_sums(_stitch(ledger, log, [])) for log in logs.values()]
        for slot, (name, stated) in sorted(live.items()):
            table = whole.get(name)
            requirement = stated if table is None else table.get(stated)
            known = stated if requirement is None else requirement  # a share keeps w: the bucket is known
            window = known.backward if isinstance(known, DynamicRequirement) else known
            bucket = _bucket(window.w)
            if requirement is None:
                unchecked[slot].add(bucket)
                continue
            total = sum(_window_sum(slots, prefix, slot - window.w + 1, slot) for slots, prefix in sums)
            share = _Share(_ppm(total / EXACT_UNIT, window.epsilon), ledger, window)
            if bucket not in expected[slot] or share.ppm > expected[slot][bucket].ppm:
                expected[slot][bucket] = share
    for slot, view in records.items():
        for bucket in sorted(set(view.ppm) - set(WINDOW_BUCKETS)):
            found.append(Violation("utilisation_mismatch", slot, f"{bucket!r} is not a window bucket"))
        for bucket in WINDOW_BUCKETS:
            if bucket in unchecked.get(slot, ()):
                continue
            top = expected[slot].get(bucket)
            want = top.ppm if top is not None else 0
            said = view.ppm.get(bucket)
            if type(said) is not int or said != want:  # a bool, a float, text or missing: not the integer
                why = f"({top})" if top is not None else "(no ledger of the bucket has members)"
                said_text = f"{said!r} ppm" if bucket in view.ppm else "nothing"
                found.append(Violation("utilisation_mismatch", slot, f"bucket {bucket}: the record says {said_text}, "
                                       f"the spend lines give {want} ppm {why}"))
    notes = []
    if unchecked:
        pairs = sum(len(buckets) for buckets in unchecked.values())
        notes.append(f"utilisation not checked for {pairs} (slot, bucket) pairs from slot {min(unchecked)} on: a "
                     "ledger's requirement at its statistic's share is none the requirements input declares "
                     "(erased users)")
    if horizon is not None:
        for slot in sorted(slot for slot in records if slot > horizon):
            found.append(Violation("no_release", slot, "a utilisation record for a slot without a release"))
        missing = [slot for slot in range(min(records), horizon + 1) if slot not in records]
        for first, last in _spans(missing):
            found.append(Violation("utilisation_missing", first, f"slots {first}..{last}: no utilisation record"))
    return found, notes


def _prefix_sums(lines: Mapping[int, _Spend]) -> tuple[list[int], list[int]]:
    """A ledger's lines as their slots, ascending, and the exact sums (`_exact`) of spend1 + spend2 of
    the lines before each index."""
    slots = sorted(lines)
    prefix = [0]
    for slot in slots:
        prefix.append(prefix[-1] + _exact(lines[slot].spend1) + _exact(lines[slot].spend2))
    return slots, prefix


def _window_sum(slots: list[int], prefix: list[int], first: int, last: int) -> int:
    """The exact spend of slots first..last (`_prefix_sums`)."""
    return prefix[bisect.bisect_right(slots, last)] - prefix[bisect.bisect_left(slots, first)]


def _total_checks(inputs: AuditInputs, audited: list[_Audited]) -> tuple[int, list[Violation]]:
    """Every user's spend, summed over the statistics slot by slot from each statistic's own member and
    spend lines, against every window of the requirements the user declared (not their shares):
    rules user_total_*. Users with the same memberships and declarations are checked once."""
    horizon = max(one.horizon for one in audited)
    first_member: dict[str, int] = {}
    for one in audited:
        for user, segments in one.users.items():
            first_member[user] = min(first_member.get(user, segments[0][1]), segments[0][1])
    declared_by_user = inputs.declared(first_member)
    series = [_ledger_series(one.log) for one in audited]
    groups: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for user, declared in sorted(declared_by_user.items()):
        if user in first_member and declared.registered <= horizon:
            groups[(tuple(one.users.get(user, ()) for one in audited), declared.updates)].append(user)
    checked, found = 0, []
    for (memberships, _), names in groups.items():
        declared = declared_by_user[names[0]]
        who = names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1} with the same history)"
        start = min(first_member[names[0]], declared.registered)
        total = np.zeros(horizon - start + 1)
        for segments, own in zip(memberships, series, strict=True):
            if segments:
                total += _user_series(segments, start, horizon, own)
        n, more = _window_findings(total, start, declared.runs(horizon), "user_total", None, who)
        checked += n
        found += more
    return checked, found


def _audit_log(log: _Log, found: list[Violation], inputs: AuditInputs | None) -> _Audited:
    """The audit of one statistic's log (`found`: the findings of its lines alone)."""
    windows = _ledger_checks(log, found)
    users: dict[str, tuple[tuple[str, int], ...]] = {}
    notes: tuple[str, ...] = ()
    unverifiable: tuple[str, ...] = ()
    horizon = 0
    if inputs is None:
        for line in (line for lines in log.spends.values() for line in lines.values()):
            _line_rules(line, None, found)
        skipped = ("user-level checks (members, registrations, each user's windows against its declared "
                   "requirement) and release checks; pass --requirements, --releases and --config")
    else:
        skipped = None
        releases = _releases(inputs.releases, found)
        horizon = max(releases, default=0)
        for line in (line for lines in log.spends.values() for line in lines.values()):
            release = releases.get(line.slot)
            if release is None:
                found.append(Violation("no_release", line.slot, "no release for this slot", line.ledger))
            elif line.kind != release.kind:
                found.append(Violation("kind_mismatch", line.slot, f"line {line.kind}, release {release.kind}",
                                       line.ledger))
            _line_rules(line, release, found)
        by_user: dict[str, list[_Member]] = defaultdict(list)
        for member in log.members:
            by_user[member.user].append(member)
        users = {user: _segments(members) for user, members in by_user.items()}
        population = _membership(log, users, horizon, found)
        _release_checks(releases, log, population, inputs.rules, found)
        notes = _release_field_checks(releases, inputs.rules, found)
        _noise_labels(releases, log, inputs.rules.noise, found)
        checked, unverifiable = _user_checks(log, inputs, users, horizon, found)
        windows += checked
    found.sort(key=lambda v: (v.slot, v.rule, v.ledger or "", v.user or ""))
    members: dict[str, list[str]] = defaultdict(list)
    for member in log.members:
        if member.user not in members[member.ledger]:
            members[member.ledger].append(member.user)
    report = AuditReport(len(set(log.ledgers) | set(log.spends)), len(users), log.spend_lines, windows,
                         tuple(found), skipped, {ledger: tuple(names) for ledger, names in members.items()}, notes,
                         unverifiable, inputs.unusable if inputs is not None else ())
    return _Audited(report, log, users, horizon)


def _json_lines(path: str) -> Iterator[tuple[str, Any]]:
    """(path:line, parsed JSON) of every non-blank line; a line that is not JSON is an AuditInputError."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        yield f"{path}:{number}", json.loads(line)
                    except json.JSONDecodeError as err:
                        raise AuditInputError(f"{path}:{number}: not JSON ({err.msg})") from None
    except OSError as err:
        raise AuditInputError(f"cannot read {path}: {err.strerror}") from None


def _values(path: str, fields: InputFormat) -> list[tuple[str, str | bytes | KafkaRecord]]:
    """(path:number, value) of the records of a requirements input as the replay reads them
    (docs/formats.md, "Input formats"): the bytes of each non-blank line of a JSON-lines file (its
    newline taken off), the values of a framed-records file, the records of a container file or of
    a whole-records file, numbered from 1."""
    try:
        return [(f"{path}:{n}", value) for n, value in enumerate(input_values(path, fields), 1)]
    except (OSError, ValueError) as err:
        raise AuditInputError(f"cannot read {path}: {err}") from None


def audit_file(
    spend_log: str, requirements: str | None = None, releases: str | None = None, config: Config | None = None,
    release_records: Iterable[Any] | None = None, erased: frozenset[str] = frozenset(),
    dead_letters: str | None = None,
) -> AuditReport:
    """Audit a spend log file; with the requirements input, the releases (a file, or `release_records`
    as read from the release topic) and the configuration, the full audit (`erased`: the erased users;
    `dead_letters`: a file of the run's dead letters; module docstring). Raises AuditInputError for
    an unreadable or corrupt file."""
    inputs = None
    if releases is not None:
        release_records = (rec for _, rec in _json_lines(releases))
    if requirements is not None or release_records is not None or config is not None:
        if requirements is None or release_records is None or config is None:
            raise AuditInputError("the full audit needs the requirements, the releases and the configuration")
        lines = _values(requirements, config.requirements)
        letters = [letter for _, letter in _json_lines(dead_letters)] if dead_letters is not None else []
        inputs = AuditInputs.build(lines, release_records, config, erased, letters)
    elif dead_letters is not None:
        raise AuditInputError("the dead letters are read by the full audit only: pass --requirements, "
                              "--releases and --config too")
    return _audit(_json_lines(spend_log), inputs)
