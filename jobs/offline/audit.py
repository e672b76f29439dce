"""Independent auditor: recomputes every window sum from the raw spend log (docs/mechanisms.md section 9).

It imports nothing from the ledgers: it rebuilds each ledger's spend series from the log's
`spend` lines (stitching forked ledgers onto their parents' history before `since`), then sums
every window directly, so a bug in a ledger's running sums cannot hide behind its twin here.

Checks, each with tolerance 1e-9:
- fixed requirement (w, E): every w consecutive slots spend at most E;
- dynamic: every backward window ending at t spends at most max(EB_t, what the window had spent
  before t) (an infeasible EB is projected, so the slot itself must then spend 0), and every
  forward window declared at tau spends at most EF_tau;
- spends are finite and >= 0, a skip spends no publication budget, a nullified slot spends
  nothing, and no ledger has two lines for one slot.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TOLERANCE = 1e-9


@dataclass(frozen=True)
class Violation:
    ledger: str
    slot: int
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"ledger {self.ledger} slot {self.slot}: {self.rule}: {self.detail}"


@dataclass
class AuditReport:
    ledgers: int = 0
    spend_lines: int = 0
    windows_checked: int = 0
    violations: list[Violation] = field(default_factory=list)
    members: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violations

    def render(self, limit: int = 50) -> str:
        head = (
            f"audited {self.ledgers} ledgers, {self.spend_lines} spend lines, "
            f"{self.windows_checked} windows: "
        )
        if self.ok:
            return head + "no violation"
        lines = [head + f"{len(self.violations)} VIOLATIONS"]
        for v in self.violations[:limit]:
            users = self.members.get(v.ledger, [])
            who = f" (users {', '.join(users[:5])}{' ...' if len(users) > 5 else ''})" if users else ""
            lines.append(f"  {v}{who}")
        if len(self.violations) > limit:
            lines.append(f"  ... and {len(self.violations) - limit} more")
        return "\n".join(lines)


@dataclass
class _Series:
    parent: str | None = None
    since: int | None = None
    lines: dict[int, dict[str, Any]] = field(default_factory=dict)


def _window_sums(spend: np.ndarray, w: int) -> np.ndarray:
    """out[t] = spend[t - w + 1] + ... + spend[t] (trailing, zeros before the start), summed directly."""
    return np.convolve(spend, np.ones(w))[: len(spend)]


def audit_records(records: Iterable[dict[str, Any]]) -> AuditReport:
    report = AuditReport()
    series: dict[str, _Series] = defaultdict(_Series)
    for rec in records:
        kind = rec.get("record", "spend")
        if kind == "ledger":
            s = series[str(rec["ledger"])]
            s.parent = None if rec.get("parent") is None else str(rec["parent"])
            s.since = int(rec["since"])
        elif kind == "member":
            report.members.setdefault(str(rec["ledger"]), []).append(str(rec["user"]))
        elif kind == "spend":
            report.spend_lines += 1
            ledger, slot = str(rec["ledger"]), int(rec["slot"])
            if slot in series[ledger].lines:
                report.violations.append(Violation(ledger, slot, "duplicate", "two spend lines for one slot"))
            series[ledger].lines[slot] = rec
            _check_line(ledger, slot, rec, report)
    report.ledgers = len(series)
    for name in series:
        _check_series(name, _stitch(name, series), report)
    return report


def _check_line(ledger: str, slot: int, rec: dict[str, Any], report: AuditReport) -> None:
    for label in ("spend1", "spend2"):
        value = rec.get(label)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            report.violations.append(Violation(ledger, slot, "bad spend", f"{label}={value!r}"))
            return
    s1, s2 = float(rec["spend1"]), float(rec["spend2"])
    kind = rec.get("kind")
    if kind == "skip" and s2 > TOLERANCE:
        report.violations.append(Violation(ledger, slot, "skip spent", f"publication spend {s2} on a skipped slot"))
    if kind == "nullify" and s1 + s2 > TOLERANCE:
        report.violations.append(Violation(ledger, slot, "nullify spent", f"spend {s1 + s2} on a nullified slot"))


def _stitch(name: str, series: dict[str, _Series]) -> dict[int, dict[str, Any]]:
    """Spend lines of a ledger, preceded by its ancestors' lines before each fork's `since`."""
    own = series[name]
    lines = dict(own.lines)
    parent, cutoff, seen = own.parent, own.since, {name}
    while parent is not None and parent not in seen and cutoff is not None:
        seen.add(parent)
        ancestor = series.get(parent, _Series())
        for slot, rec in ancestor.lines.items():
            if slot < cutoff and slot not in lines:
                lines[slot] = rec
        parent, cutoff = ancestor.parent, min(cutoff, ancestor.since) if ancestor.since is not None else cutoff
    return lines


def _check_series(name: str, lines: dict[int, dict[str, Any]], report: AuditReport) -> None:
    if not lines:
        return
    first, last = min(lines), max(lines)
    slots = np.arange(first, last + 1)
    spend = np.zeros(len(slots))
    for slot, rec in lines.items():
        spend[slot - first] = float(rec["spend1"]) + float(rec["spend2"])
    by_rule: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)
    for slot, rec in lines.items():
        req = rec["requirement"]
        if "w" in req:
            by_rule[("fixed", int(req["w"]))].append((slot, float(req["epsilon"])))
        else:
            by_rule[("backward", int(req["backward"]["w"]))].append((slot, float(req["backward"]["epsilon"])))
            by_rule[("forward", int(req["forward"]["w"]))].append((slot, float(req["forward"]["epsilon"])))
    padded = np.concatenate([spend, np.zeros(max(w for _, w in by_rule))])
    for (rule, w), bounds in by_rule.items():
        sums = _window_sums(padded, w)
        for slot, bound in bounds:
            i = slot - first
            report.windows_checked += 1
            if rule == "forward":
                total = sums[i + w - 1]
                limit, where = bound, f"forward window {slot}..{slot + w - 1}"
            else:
                total = sums[i]
                limit = bound if rule == "fixed" else max(bound, total - spend[i])
                where = f"{rule} window {slot - w + 1}..{slot}"
            if total > limit + TOLERANCE:
                report.violations.append(
                    Violation(name, slot, f"{rule} w={w}", f"{where} spent {total:.12g} > {limit:.12g}")
                )


def audit_file(path: str) -> AuditReport:
    def records() -> Iterable[dict[str, Any]]:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError as err:
                        raise ValueError(f"{path}:{number}: not JSON ({err.msg})") from None

    return audit_records(records())
