"""Several statistics under one budget: one `Engine` per statistic, each at its share of every user's
requirement (docs/mechanisms.md, "Several statistics under one budget").

A configuration's statistics (`Config.statistics`) are released every slot from the same users. Each
runs its own engine (ledger classes, policy, release step) whose ledgers spend `share` of every
requirement: a class's ledger under statistic s enforces share_s * E on every window (share_s * EB
and share_s * EF for dynamic requirements), so a user's spend over any window, summed over the
statistics, is at most (sum of shares) * E <= E. The membership rule does not depend on the share,
so every engine registers, changes and rejects the same users at the same slots and names the same
classes; only the ledgers' bounds differ. The spend lines of a named statistic carry its name, and
`pwevent audit` adds up each user's windows over all statistics against the requirement the user
declared.

With one statistic (no `statistics:` key) this is one engine at share 1, whose records carry no
name: the same bytes as before statistics existed.

After every statistic has decided a slot, the spend log gets the slot's `utilisation` record (the
budget in view, `budget_view`), one for all statistics, without a name: each class's spend summed
over the statistics against its members' whole requirement, as the metric shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np

from pwevent.jobs.common.config import Config, Statistic
from pwevent.jobs.common.engine import Engine, Projection, SpendSink
from pwevent.jobs.common.membership import Membership
from pwevent.jobs.common.requirement_rules import RequirementAction
from pwevent.jobs.common.service_metrics import utilisation_ppm, window_utilisation
from pwevent.operators.noise import Randomness
from pwevent.operators.slot_release import SlotOutcome
from pwevent.state.population import UserRequirement
from pwevent.state.spend_log import utilisation_record


@dataclass(frozen=True)
class StatisticOutcome:
    """One statistic's decision of a slot and the backward projections of its ledgers."""

    statistic: Statistic
    outcome: SlotOutcome
    projections: tuple[Projection, ...]


def named_line(statistic: Statistic, line: dict[str, Any]) -> dict[str, Any]:
    """A spend-log line of `statistic`: with its name after the record type (unchanged for the
    configuration's one unnamed statistic)."""
    if statistic.name is None:
        return line
    return {"record": line["record"], "statistic": statistic.name, **line}


class SharedBudget:
    """The engines of a configuration's statistics, driven together: every requirement record and
    every slot reaches each engine, in the order of `statistics`."""

    def __init__(self, config: Config, rng: Randomness, spend_sink: SpendSink | None = None) -> None:
        self.statistics = config.statistics
        self._spend_sink = spend_sink
        self.engines = tuple(
            Engine(config.mechanism_spec(), statistic.domain.d, rng, config.caps.max_w,
                   self._sink(statistic, spend_sink), floor=config.caps.min_slot_epsilon,
                   default_requirement=config.default_requirement, share=statistic.share)
            for statistic in self.statistics)

    @staticmethod
    def _sink(statistic: Statistic, sink: SpendSink | None) -> SpendSink | None:
        if sink is None or statistic.name is None:
            return sink
        return lambda line: sink(named_line(statistic, line))

    def declare(self, name: str, slot: int, requested: UserRequirement) -> RequirementAction:
        """A requirement record (`Engine.declare`), in every statistic: the same action in each."""
        actions = [engine.declare(name, slot, requested) for engine in self.engines]
        if any(action != actions[0] for action in actions):
            raise AssertionError(f"slot {slot}: statistics took user {name!r}'s requirement differently: {actions}")
        return actions[0]

    def declare_default(self, name: str, slot: int) -> bool:
        """`Engine.declare_default` in every statistic."""
        return all([engine.declare_default(name, slot) for engine in self.engines])

    def index_of(self, name: str) -> int | None:
        """The user's dense index, the same in every statistic's engine."""
        return self.engines[0].index_of(name)

    @property
    def users(self) -> int:
        return self.engines[0].users

    @property
    def membership(self) -> Membership:
        """The membership rule, the same in every statistic's engine."""
        return self.engines[0].membership

    def step(self, slot: int, users: np.ndarray, values: Sequence[np.ndarray]) -> list[StatisticOutcome]:
        """Decide `slot` in every statistic: `users` present (dense indices), `values[k]` their cells
        under statistic k."""
        out = []
        for statistic, engine, cells in zip(self.statistics, self.engines, values, strict=True):
            outcome, projections = engine.step(slot, users, cells)
            named = tuple(replace(p, statistic=statistic.name) for p in projections)
            out.append(StatisticOutcome(statistic, outcome, named))
        if self._spend_sink is not None:
            self.budget_view(slot)
        return out

    def budget_view(self, slot: int) -> dict[str, Fraction]:
        """Once every statistic has decided `slot`: per window bucket, the share of the window budget
        spent (`service_metrics.window_utilisation` over every statistic's live classes, what the
        metric shows), written to the spend log as the slot's `utilisation` record."""
        populations = [engine.population.live() for engine in self.engines]
        shares = window_utilisation(populations[0], slot, *populations[1:])
        if self._spend_sink is not None:
            self._spend_sink(utilisation_record(slot, utilisation_ppm(shares)))
        return shares
