"""Ledgers: refusal, settle, pending rule, codecs (docs/mechanisms.md sections 7 and 9)."""

from __future__ import annotations

import pytest

from pwevent.state.errors import BudgetExceededError
from pwevent.state.ledger import DynamicLedger, FixedLedger, ledger_from_bytes
from pwevent.state.requirements import DynamicRequirement, Requirement
from pwevent.state.spend import Kind


def test_fixed_refuses_a_spend_over_the_window():
    ledger = FixedLedger(Requirement(3, 1.0), 1)
    ledger.charge(1, 0.2, 0.5)
    ledger.settle(1, Kind.PUBLISH)
    ledger.charge(2, 0.2, 0.0)
    with pytest.raises(BudgetExceededError, match="w=3"):
        ledger.charge(3, 0.2, 0.0 + 0.2)  # 0.7 + 0.2 + 0.4 > 1.0
    ledger.charge(3, 0.1, 0.0)  # the refused spend left no trace


def test_fixed_window_slides():
    ledger = FixedLedger(Requirement(2, 1.0), 1)
    for slot in range(1, 6):
        ledger.charge(slot, 0.0, 0.5)
        ledger.settle(slot, Kind.PUBLISH)
    assert ledger.spent(4, 5) == (0.0, 1.0)


def test_pending_counts_until_settled_and_settle_only_lowers():
    ledger = FixedLedger(Requirement(4, 1.0), 1)
    ledger.charge(1, 0.1, 0.4)
    assert ledger.spent(1, 1) == (0.1, 0.4)
    assert ledger.pending_slots() == [1]
    assert ledger.last_publication() is not None  # a pending publication budget counts as a publication
    ledger.settle(1, Kind.SKIP)
    assert ledger.spent(1, 1) == (0.1, 0.0)
    assert ledger.last_publication() is None
    ledger.settle(1, Kind.SKIP)  # idempotent
    with pytest.raises(ValueError, match="already settled"):
        ledger.settle(1, Kind.PUBLISH)
    with pytest.raises(KeyError):
        ledger.settle(2, Kind.SKIP)


def test_nullify_spends_nothing():
    ledger = FixedLedger(Requirement(4, 1.0), 1)
    ledger.charge(1, 0.1, 0.4)
    ledger.settle(1, Kind.NULLIFY)
    assert ledger.spent(1, 1) == (0.0, 0.0)


def test_slots_must_increase_and_budgets_be_valid():
    ledger = FixedLedger(Requirement(4, 1.0), 1)
    ledger.charge(2, 0.1, 0.1)
    with pytest.raises(ValueError, match="must increase"):
        ledger.charge(2, 0.1, 0.1)
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            ledger.charge(3, bad, 0.0)


def test_last_publication_survives_the_window():
    ledger = FixedLedger(Requirement(2, 1.0), 1)
    ledger.charge(1, 0.0, 0.5)
    ledger.settle(1, Kind.PUBLISH)
    for slot in range(2, 6):
        ledger.charge(slot, 0.0, 0.0)
        ledger.settle(slot, Kind.SKIP)
    publication = ledger.last_publication()
    assert publication is not None and publication.slot == 1 and publication.spend2 == 0.5


def dyn(bw, be, fw, fe):
    return DynamicRequirement(Requirement(bw, be), Requirement(fw, fe))


def test_dynamic_forward_refusal_names_the_window():
    ledger = DynamicLedger(dyn(1, 10.0, 3, 1.0), 1, 10)
    ledger.open_slot(1)
    ledger.charge(1, 0.3, 0.6)
    ledger.settle(1, Kind.PUBLISH)
    ledger.declare(dyn(1, 10.0, 1, 5.0))  # a looser forward requirement later cannot lift the old one
    ledger.open_slot(2)
    with pytest.raises(BudgetExceededError, match="forward from slot 1"):
        ledger.charge(2, 0.0, 0.2)


def test_dynamic_backward_projection_allows_only_zero():
    ledger = DynamicLedger(dyn(3, 2.0, 3, 2.0), 1, 10)
    ledger.open_slot(1)
    ledger.charge(1, 0.5, 0.5)
    ledger.settle(1, Kind.PUBLISH)
    ledger.declare(dyn(3, 0.5, 3, 2.0))
    ledger.open_slot(2)
    assert ledger.backward_projection(2) == pytest.approx(1.0)
    with pytest.raises(BudgetExceededError, match="backward"):
        ledger.charge(2, 0.01, 0.0)
    ledger.charge(2, 0.0, 0.0)


def test_dynamic_horizon_must_cover_windows():
    with pytest.raises(ValueError, match="horizon"):
        DynamicLedger(dyn(5, 1.0, 50, 1.0), 1, 10)
    ledger = DynamicLedger(dyn(5, 1.0, 5, 1.0), 1, 10)
    with pytest.raises(ValueError, match="horizon"):
        ledger.declare(dyn(11, 1.0, 5, 1.0))


@pytest.mark.parametrize("make", [
    lambda: FixedLedger(Requirement(4, 1.2), 3),
    lambda: DynamicLedger(dyn(2, 1.0, 3, 1.2), 3, 20),
])
def test_codec_round_trip_keeps_behaviour(make):
    ledger = make()
    for slot, kind in ((3, Kind.PUBLISH), (4, Kind.SKIP), (5, None)):
        ledger.open_slot(slot)
        ledger.charge(slot, 0.05, 0.1)
        if kind:
            ledger.settle(slot, kind)
    copy = ledger_from_bytes(ledger.to_bytes())
    assert type(copy) is type(ledger)
    assert copy.to_bytes() == ledger.to_bytes()
    assert copy.spent(3, 5) == ledger.spent(3, 5)
    assert copy.pending_slots() == [5]


def test_release_history_keeps_the_last_publication_and_order():
    from pwevent.state.release_history import ReleaseHistory

    history = ReleaseHistory.start(2)
    assert history.last.tolist() == [0, 0]
    history.record(1, Kind.PUBLISH, [3, 4])
    history.record(2, Kind.SKIP, [9, 9])
    assert history.last.tolist() == [3, 4] and history.last_publication == 1
    with pytest.raises(ValueError, match="in order"):
        history.record(2, Kind.SKIP, [3, 4])
    copy = ReleaseHistory.from_bytes(history.to_bytes())
    assert copy.last.tolist() == [3, 4] and copy.decided == 2 and copy.last_publication == 1


@pytest.mark.parametrize("epsilon", [2e-14, 1e-10, 1e-6, 1.0, 100.0])
def test_every_ledger_refuses_a_relative_excess_at_every_budget(epsilon):
    """docs/mechanisms.md section 9: a window over E by a relative 1e-8 is refused at every budget
    (an absolute 1e-9 margin admitted any spend below ~1e-9); rounding (1e-12 relative) is not."""
    fixed = FixedLedger(Requirement(2, epsilon), 1)
    fixed.charge(1, epsilon / 2, 0.0)
    with pytest.raises(BudgetExceededError):
        fixed.charge(2, 0.0, epsilon / 2 * (1 + 2e-8))
    fixed.charge(2, 0.0, epsilon / 2 * (1 + 1e-12))
    for side in ("backward", "forward"):
        tight, loose = Requirement(2, epsilon), Requirement(2, 10 * epsilon)
        ledger = DynamicLedger(DynamicRequirement(*((tight, loose) if side == "backward" else (loose, tight))), 1, 4)
        ledger.open_slot(1)
        with pytest.raises(BudgetExceededError, match=side):
            ledger.charge(1, 0.0, epsilon * (1 + 1e-8))
        ledger.charge(1, 0.0, epsilon * (1 + 1e-12))


def test_a_baseline_covers_only_a_budget_at_least_its_own():
    """Exact (docs/mechanisms.md section 9): no margin, which would add to the ledger's."""
    global_ = Requirement(10, 1e-9)
    assert global_.covers(Requirement(10, 1e-9)) and global_.covers(Requirement(3, 2e-9))
    assert not global_.covers(Requirement(10, 5e-10)) and not global_.covers(Requirement(10, 2e-13))
    assert not global_.covers(Requirement(11, 1.0))
