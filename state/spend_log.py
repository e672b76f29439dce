"""Records of the spend log: what every ledger spent at every slot, enough to audit from alone.

Four record types, one JSON object per line (docs/formats.md):
- `ledger`: a ledger came to exist; `parent`/`since` say that its history before `since` is the
  parent's (a class forked by a requirement change, `state.population`).
- `member`: a user is represented by a ledger from slot `since` on.
- `spend`: a ledger's actual calculation and publication spend at a slot, the decision, the
  requirement in force at that slot, and the label of the randomness that drew the slot's release
  (operators/noise.py, `Randomness.label`).
- `utilisation`: once per decided slot, after its spend lines, the budget in view: per window bucket
  the largest share of the window budget a class of that bucket has spent, in millionths (computed
  by jobs/common/service_metrics.py, which the metric `budget_utilisation_ppm` shows too). It follows
  from the other records and the requirements alone; `pwevent audit` recomputes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pwevent.state.requirements import DynamicRequirement, Requirement
from pwevent.state.spend import SpendEntry


def ledger_record(
    ledger: str, requirement: Requirement | DynamicRequirement, since: int, parent: str | None
) -> dict[str, Any]:
    return {
        "record": "ledger", "ledger": ledger, "parent": parent, "since": since, "requirement": requirement.to_json()
    }


def member_record(user: str, ledger: str, since: int) -> dict[str, Any]:
    return {"record": "member", "user": user, "ledger": ledger, "since": since}


def spend_record(
    ledger: str,
    entry: SpendEntry,
    requirement: Requirement | DynamicRequirement,
    noise: str,
    members: int = 1,
    projected_backward: float | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "record": "spend",
        "ledger": ledger,
        "slot": entry.slot,
        "members": members,
        "spend1": entry.spend1,
        "spend2": entry.spend2,
        "kind": entry.kind.value if entry.kind else None,
        "requirement": requirement.to_json(),
        "noise": noise,
    }
    if projected_backward is not None:
        record["projected_backward"] = projected_backward
    return record


def utilisation_record(slot: int, ppm: Mapping[str, int]) -> dict[str, Any]:
    """The budget in view after `slot`: `ppm`, window bucket -> millionths, every bucket."""
    return {"record": "utilisation", "slot": slot, "ppm": dict(ppm)}


def last_logged_slot(records: Iterable[Any]) -> int:
    """The last slot spend-log records reach with a spend line or a utilisation record (0: none; any
    other value is skipped). The job writes both in the transaction of their slot's release, and a
    slot without registered users has only the latter: the releases up to this slot are the ones the
    log confirms."""
    return max((record["slot"] for record in records if isinstance(record, dict)
                and record.get("record") in ("spend", "utilisation") and type(record.get("slot")) is int),
               default=0)
