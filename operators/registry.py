"""The mechanism registry: every mechanism pwevent offers, once (docs/mechanisms.md, "The mechanism registry").

An entry knows the mechanism's name, whether every user runs at its own requirement (personalized)
or at the configuration's global (window, epsilon), whether it takes fixed or dynamic requirements,
how to build its budget policy and which configuration keys it accepts. The configuration
(`jobs.common.config`), the CLI's choices, the release schema's enum (jobs/common/release_schema.py),
the README's mechanism table (`docs_table`) and the property tests all read it, so a new mechanism
is one `register` call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

from pwevent.operators.family import Adaptive, FamilyRule
from pwevent.operators.policies import DPBA, DPBD, PBA, PBD, BudgetPolicy, MechanismSpec, Sample, Uniform
from pwevent.state.requirements import Requirement

#: The configuration keys that only a global-requirement mechanism (a baseline) takes.
GLOBAL_KEYS = frozenset({"window", "epsilon"})
#: The section key a mechanism's options take from the run's clock, not only from the configuration.
DAY_KEY = "day"


@dataclass(frozen=True)
class MechanismEntry:
    """One mechanism.

    personalized: every user runs at its own requirement; otherwise everybody runs at the global
    (window, epsilon) of the configuration, which must cover each user's own requirement.
    dynamic: users declare backward/forward requirements and may change them; otherwise (w, epsilon)
    kept for ever. build: the policy, given the global requirement (None when personalized) and the
    mechanism's own configuration section (`section`, {} when absent; its keys and their types and
    defaults are the fields of the dataclass `section_type`, which the configuration's JSON Schema reads).
    """

    name: str
    personalized: bool
    dynamic: bool
    build: Callable[[Requirement | None, Mapping[str, Any]], BudgetPolicy]
    strategy: str
    source: str
    section: str | None = None
    section_type: type | None = None

    @property
    def section_keys(self) -> frozenset[str]:
        """The keys of the mechanism's own section (none without one)."""
        return frozenset(f.name for f in fields(self.section_type)) if self.section_type is not None else frozenset()

    @property
    def config_keys(self) -> frozenset[str]:
        """The mechanism-specific top-level configuration keys it accepts: the global requirement
        (baselines) and its own section, if any."""
        own = frozenset() if self.section is None else frozenset({self.section})
        return (frozenset() if self.personalized else GLOBAL_KEYS) | own

    def global_keys(self, window: int, epsilon: float) -> dict[str, Any]:
        """{window, epsilon} for a mechanism that takes the global requirement, else {}: the
        configuration keys a run of this mechanism at that (w, E) may set."""
        return {k: v for k, v in (("window", window), ("epsilon", epsilon)) if k in self.config_keys}

    @property
    def requirements(self) -> str:
        """What users declare, in words (the docs table)."""
        if not self.personalized:
            return "one global (w, E)"
        return "dynamic backward + forward per user" if self.dynamic else "fixed per user (w_i, E_i)"

    def spec(self, window: int | None = None, epsilon: float | None = None,
             options: Mapping[str, Any] | None = None, day: int = 1) -> MechanismSpec:
        """The mechanism ready to run (a fresh policy); a baseline needs the global window and epsilon
        (section 8); `options`: its own section's values (ValueError for an unknown key); `day`: the
        slots in a day of the run's clock (`SlotClock.day`), for a section with a `day` key that
        does not set it."""
        options = options or {}
        unknown = sorted(set(options) - self.section_keys)
        if unknown:
            where = f"{self.section}." if self.section else ""
            allowed = ", ".join(sorted(self.section_keys)) or "none"
            raise ValueError(f"unknown key {where}{unknown[0]} (allowed: {allowed})")
        if DAY_KEY in self.section_keys and DAY_KEY not in options:
            options = {**options, DAY_KEY: day}
        if self.personalized:
            return MechanismSpec(self.name, self.build(None, options), None)
        if window is None or epsilon is None:
            raise ValueError(f"mechanism {self.name} needs the global window and epsilon")
        requirement = Requirement(window, epsilon)
        return MechanismSpec(self.name, self.build(requirement, options), requirement)


class MechanismRegistry:
    """The mechanisms by name, in registration order."""

    def __init__(self, entries: tuple[MechanismEntry, ...]) -> None:
        self._entries: dict[str, MechanismEntry] = {}
        for entry in entries:
            self.register(entry)

    def register(self, entry: MechanismEntry) -> None:
        if entry.name in self._entries:
            raise ValueError(f"mechanism {entry.name} is already registered")
        self._entries[entry.name] = entry

    @contextmanager
    def extended(self, entry: MechanismEntry) -> Iterator[MechanismEntry]:
        """`entry` registered for the duration of a `with` block (tests)."""
        self.register(entry)
        try:
            yield entry
        finally:
            del self._entries[entry.name]

    def __iter__(self) -> Iterator[MechanismEntry]:
        return iter(tuple(self._entries.values()))

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def get(self, name: str) -> MechanismEntry:
        """The entry of `name`; a ValueError that lists the registered names otherwise."""
        entry = self._entries.get(name) if isinstance(name, str) else None
        if entry is None:
            raise ValueError(f"mechanism must be one of {', '.join(self.names())}, got {name!r}")
        return entry

    def spec(self, name: str, window: int | None = None, epsilon: float | None = None,
             options: Mapping[str, Any] | None = None, day: int = 1) -> MechanismSpec:
        return self.get(name).spec(window, epsilon, options, day)


def _own(build: Callable[[], BudgetPolicy]) -> Callable[[Requirement | None, Mapping[str, Any]], BudgetPolicy]:
    """A personalized policy without options."""
    return lambda _requirement, _options: build()


def _global(build: Callable[[Requirement], BudgetPolicy]) -> Callable[[Requirement | None, Mapping[str, Any]],
                                                                      BudgetPolicy]:
    """A baseline's policy, built for the global requirement."""
    def make(requirement: Requirement | None, _options: Mapping[str, Any]) -> BudgetPolicy:
        assert requirement is not None
        return build(requirement)

    return make


PAPER = "Du et al. (PWSM)"
KELLARIS = "Kellaris et al. (baseline)"
OURS = "pwevent"

REGISTRY = MechanismRegistry((
    MechanismEntry("PBD", True, False, _own(PBD), "distribution", PAPER),
    MechanismEntry("PBA", True, False, _own(PBA), "absorption", PAPER),
    MechanismEntry("DPBD", True, True, _own(DPBD), "distribution", PAPER),
    MechanismEntry("DPBA", True, True, _own(DPBA), "absorption", PAPER),
    MechanismEntry("Uniform", False, False, _global(lambda _: Uniform()), "E/w every slot", KELLARIS),
    MechanismEntry("Sample", False, False, _global(lambda r: Sample(r.w)), "E every w slots", KELLARIS),
    MechanismEntry("BD", False, False, _global(lambda _: PBD()), "distribution", KELLARIS),
    MechanismEntry("BA", False, False, _global(lambda _: PBA()), "absorption", KELLARIS),
    MechanismEntry("Adaptive", True, False, lambda _, options: Adaptive(FamilyRule(**options)),
                   "bursts, E_i/w_i every slot or absorption, re-chosen from public releases (the default)", OURS,
                   "adaptive", FamilyRule),
))


def mechanism(name: str, window: int | None = None, epsilon: float | None = None, day: int = 1) -> MechanismSpec:
    """Build a registered mechanism; a baseline needs the global window and epsilon (section 8);
    `day`: the slots in a day of the data's clock (1: none, or slots of a day or longer)."""
    return REGISTRY.spec(name, window, epsilon, day=day)


def docs_table(registry: MechanismRegistry = REGISTRY) -> str:
    """The README's mechanism table (a test keeps the README equal to it)."""
    rows = ["| name | requirements | budget strategy | from |", "|---|---|---|---|"]
    rows += [f"| {e.name} | {e.requirements} | {e.strategy} | {e.source} |" for e in registry]
    return "\n".join(rows)
