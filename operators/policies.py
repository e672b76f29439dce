"""Budget policies: what each user may spend at a slot (docs/mechanisms.md sections 6-8).

A policy reads one ledger (one user, or one class of identical users) and returns that ledger's
calculation budget eps1, publication budget eps2 and nullification border for the open slot. It
never writes: the host charges the ledger with the result and settles it once the slot is decided.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from pwevent.state.ledger import DynamicLedger, FixedLedger, Ledger, Publication
from pwevent.state.requirements import DEFAULT_MIN_SLOT_EPSILON, SHARE_TOLERANCE, Requirement
from pwevent.state.spend import Kind

if TYPE_CHECKING:
    from pwevent.operators.slot_release import SlotOutcome

NO_BORDER = -math.inf


@dataclass(frozen=True)
class SlotBudget:
    """One ledger's contribution to a slot's budgets.

    border: the slot is nullified when slot <= max over all users of border (PBA, DPBA).
    projected_backward: set when the backward requirement was infeasible and projected (section 7).
    """

    eps1: float
    eps2: float
    border: float = NO_BORDER
    projected_backward: float | None = None

    def floored(self, floor: float) -> SlotBudget:
        """Budgets below the per-slot floor become exactly 0 (docs/mechanisms.md, Budget floor).

        Only ever lowers a budget: this also snaps float residues such as 0.1/2 - 0.3/6 = 6.9e-18.
        """
        eps1, eps2 = (value if value >= floor else 0.0 for value in (self.eps1, self.eps2))
        return replace(self, eps1=eps1, eps2=eps2)


class BudgetPolicy(Protocol):
    name: str
    dynamic: bool

    def budgets(self, ledger: Ledger, slot: int) -> SlotBudget: ...

    def scheduled_kind(self, slot: int) -> Kind | None:
        """A decision fixed in advance (Uniform, Sample), or None to let the dissimilarity decide."""
        ...

    def in_force(self) -> str | None:
        """The family whose rule sets the next slot's budgets, for a policy that switches (Adaptive)."""
        ...

    def rescaled(self, slot: int) -> bool:
        """Publish at OBS's threshold for the rescaled error, counts divided by the kept share
        (Adaptive's even spending, docs/mechanisms.md section 14)."""
        ...

    def observe(self, outcome: SlotOutcome) -> None:
        """A decided slot's public outcome (the only input a policy may learn from besides ledgers)."""
        ...

    def snapshot(self) -> dict[str, Any] | None:
        """The policy's own state for a checkpoint (None: it has none)."""
        ...

    def restore(self, state: dict[str, Any] | None) -> None: ...


class OneRule:
    """A policy that applies one rule for ever: nothing to observe or checkpoint."""

    def in_force(self) -> str | None:
        return None

    def rescaled(self, slot: int) -> bool:
        return False

    def observe(self, outcome: SlotOutcome) -> None:
        """Nothing to learn: the budgets depend on the ledger alone."""

    def snapshot(self) -> dict[str, Any] | None:
        return None

    def restore(self, state: dict[str, Any] | None) -> None:
        """Nothing to restore."""


def _snap(value: float) -> float:
    """A share count within float noise of an integer is that integer (spend2 / share round trips)."""
    nearest = round(value)
    return float(nearest) if abs(value - nearest) < SHARE_TOLERANCE else value


class PBD(OneRule):
    """Personalized Budget Distribution (Algorithm 4, section 6).

    eps1 = E/(2w); eps2 = (E/2 - sum of the last w-1 publication spends) / 2.
    """

    name = "PBD"
    dynamic = False

    def budgets(self, ledger: Ledger, slot: int) -> SlotBudget:
        assert isinstance(ledger, FixedLedger)
        req = ledger.requirement
        _, spent2 = ledger.spent(slot - req.w + 1, slot - 1)
        return SlotBudget(req.share, max(0.0, (req.epsilon / 2 - spent2) / 2))

    def scheduled_kind(self, slot: int) -> Kind | None:
        return None


class PBA(OneRule):
    """Personalized Budget Absorption (Algorithm 5, section 6).

    With l the last publication and s = E/(2w): t_N = spend2_l / s - 1, border l + t_N; absorbed
    shares a = max(t - l - t_N, 0); eps2 = s min(a, w). Without a publication yet, a counts the
    slots since the user registered (the paper's a = t when everybody registers at slot 1); this
    keeps a late registration from nullifying w - 1 slots for everybody.
    """

    name = "PBA"
    dynamic = False

    def budgets(self, ledger: Ledger, slot: int) -> SlotBudget:
        assert isinstance(ledger, FixedLedger)
        return absorption(ledger.requirement, slot, ledger.last_publication(), ledger.since)

    def scheduled_kind(self, slot: int) -> Kind | None:
        return None


def absorption(req: Requirement, slot: int, publication: Publication | None, since: int) -> SlotBudget:
    """PBA's budgets at `slot` from the last publication that absorbed (None: none yet, so the shares
    of the slots from `since` on are absorbed). Adaptive (operators/family.py) passes the switch
    slot as `since` and ignores publications of the distribution family."""
    share = req.share
    if publication is None:
        absorbed, border = float(slot - since + 1), NO_BORDER
    else:
        nullified = _snap(publication.spend2 / share) - 1
        border = publication.slot + nullified
        absorbed = max(_snap(slot - border), 0.0)
    return SlotBudget(share, share * min(absorbed, req.w), border)


def _dynamic_calculation(ledger: DynamicLedger, slot: int) -> tuple[float, float, float | None]:
    """eps1 of DPBD/DPBA and the backward publication bound UB (section 7), clipped at 0.

    eps1 = min(min_tau EF_tau / (2 wF_tau), EB/2 - backward spend1); UB = EB/2 - backward spend2.
    The paper's halves assume the backward window spent at most EB/2 on each part, which fails
    once a user tightens EB: then they could grant more than the window has left. So both are
    also capped by what is left of EB in the window, EB - (spend1 + spend2), which is 0 for an
    infeasible (projected) requirement. Without a tightening the cap never binds: eps1 <= EB/2 - s1
    gives EB - s1 - s2 - eps1 >= EB/2 - s2.
    """
    backward = ledger.requirement.backward
    spent1, spent2 = ledger.spent(slot - backward.w + 1, slot - 1)
    left = max(0.0, backward.epsilon - spent1 - spent2)
    forward_share = min(f.requirement.share for f in ledger.forward_windows())
    eps1 = max(0.0, min(forward_share, backward.epsilon / 2 - spent1, left))
    return eps1, min(backward.epsilon / 2 - spent2, left - eps1), ledger.backward_projection(slot)


class DPBD(OneRule):
    """Dynamic Personalized Budget Distribution (Algorithm 6, section 7).

    eps2 = min((1/2) min_tau (EF_tau/2 - spend2 since tau), EB/2 - backward spend2).
    """

    name = "DPBD"
    dynamic = True

    def budgets(self, ledger: Ledger, slot: int) -> SlotBudget:
        assert isinstance(ledger, DynamicLedger)
        eps1, upper_backward, projected = _dynamic_calculation(ledger, slot)
        spent = ledger.spent_since_forward(slot)
        forward_left = min(
            f.requirement.epsilon / 2 - used2 for f, (_, used2) in zip(ledger.forward_windows(), spent, strict=True)
        )
        return SlotBudget(eps1, max(0.0, min(forward_left / 2, upper_backward)), NO_BORDER, projected)

    def scheduled_kind(self, slot: int) -> Kind | None:
        return None


class DPBA(OneRule):
    """Dynamic Personalized Budget Absorption (Algorithm 7, section 7).

    For tau in T: share_tau = EF/(2 wF), tFN_tau = spend2 since tau / share_tau + tau - 1; the border
    is max tFN. eps2 = min(AF, UF, UB) with AF = max (t - tFN_tau) share_tau,
    UF = min (EF/2 - spend2 since tau), UB = EB/2 - backward spend2.
    """

    name = "DPBA"
    dynamic = True

    def budgets(self, ledger: Ledger, slot: int) -> SlotBudget:
        assert isinstance(ledger, DynamicLedger)
        eps1, upper_backward, projected = _dynamic_calculation(ledger, slot)
        border, absorbed, forward_left = NO_BORDER, 0.0, math.inf
        spent = ledger.spent_since_forward(slot)
        for window, (_, used) in zip(ledger.forward_windows(), spent, strict=True):
            req: Requirement = window.requirement
            right = _snap(used / req.share) + window.tau - 1
            border = max(border, right)
            absorbed = max(absorbed, (slot - right) * req.share)
            forward_left = min(forward_left, req.epsilon / 2 - used)
        return SlotBudget(eps1, max(0.0, min(absorbed, forward_left, upper_backward)), border, projected)

    def scheduled_kind(self, slot: int) -> Kind | None:
        return None


class Uniform(OneRule):
    """Kellaris et al.'s Uniform: E/w at every slot, always published (section 8)."""

    name = "Uniform"
    dynamic = False

    def budgets(self, ledger: Ledger, slot: int) -> SlotBudget:
        assert isinstance(ledger, FixedLedger)
        return SlotBudget(0.0, ledger.requirement.epsilon / ledger.requirement.w)

    def scheduled_kind(self, slot: int) -> Kind | None:
        return Kind.PUBLISH


class Sample(OneRule):
    """Kellaris et al.'s Sample: the whole E at slots 1, w+1, 2w+1, ...; repeat in between (section 8)."""

    name = "Sample"
    dynamic = False

    def __init__(self, window: int) -> None:
        self.window = window

    def budgets(self, ledger: Ledger, slot: int) -> SlotBudget:
        assert isinstance(ledger, FixedLedger)
        on = self.scheduled_kind(slot) is Kind.PUBLISH
        return SlotBudget(0.0, ledger.requirement.epsilon if on else 0.0)

    def scheduled_kind(self, slot: int) -> Kind | None:
        return Kind.PUBLISH if (slot - 1) % self.window == 0 else Kind.SKIP


@dataclass(frozen=True)
class MechanismSpec:
    """A mechanism by name (operators/registry.py): its policy and the global (w, E) every user runs
    at, or None when each runs at its own."""

    name: str
    policy: BudgetPolicy
    global_requirement: Requirement | None

    @property
    def dynamic(self) -> bool:
        return self.policy.dynamic


def charge_slot(
    policy: BudgetPolicy, ledger: Ledger, slot: int, floor: float = DEFAULT_MIN_SLOT_EPSILON
) -> SlotBudget:
    """Open `slot` on a ledger, compute its budgets and book them as pending spend.

    The one path by which budgets reach a ledger, shared by the replay (per class) and the
    streaming job (per user); the ledger refuses budgets that would break an invariant. Budgets
    below `floor` (the configured caps.min_slot_epsilon) are 0: not spent, never an OBS candidate,
    their users sampled with p = 0 (docs/mechanisms.md, Budget floor).
    """
    ledger.open_slot(slot)
    budget = policy.budgets(ledger, slot).floored(floor)
    ledger.charge(slot, budget.eps1, budget.eps2)
    return budget
