"""Value mappings: how a raw event value becomes a cell of a `categories` or `ranges` domain
(docs/formats.md, "Value mapping"; operators/domain.py holds the domains that use them).

A mapping is public configuration: it decides which cell a value counts in and is named in every
release (`describe`), so a consumer of the releases knows what each cell holds. It never looks at
anything but the one value.

- `CategoryMapping`: named cells; `aliases` map other spellings to a cell's name; `case: fold`
  compares names, aliases and values after Unicode case folding (`str.casefold`; no other
  normalisation); `other` names an extra last cell that takes every other string. Without `other`
  such a string is out of the domain.
- `RangeMapping`: numeric cells `edges[j] <= v < edges[j + 1]` (half-open, so a value equal to the
  last edge is outside); `other` names an extra last cell for every finite number outside them.

A value of the wrong kind (a number for categories, a string or a non-finite number for ranges) is
out of the domain whatever `other` says: `other` catches values the configuration did not list, not
records of another shape.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class OutOfDomainError(ValueError):
    """An event value that is not in the configured domain."""


class CaseRule(StrEnum):
    """How category names, aliases and values are compared."""

    EXACT = "exact"
    FOLD = "fold"


@dataclass(frozen=True)
class CategoryMapping:
    """Category names (one cell each, in order), aliases, a case rule and an optional `other` cell.
    Errors name the configuration key (`domain.aliases: ...`)."""

    names: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...] = ()
    case: CaseRule = CaseRule.EXACT
    other: str | None = None
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "case", CaseRule(self.case))
        cells = self.cells
        if not self.names or len(set(cells)) != len(cells):
            raise ValueError("domain.values must be a non-empty list of distinct names (and domain.other not one "
                             "of them)")
        index: dict[str, int] = {}
        for position, name in enumerate(cells):
            key = self.key(name)
            if key in index:
                raise ValueError(f"domain.values: {cells[index[key]]!r} and {name!r} are the same name under "
                                 "case: fold")
            index[key] = position
        for alias, name in self.aliases:
            if name not in self.names:
                raise ValueError(f"domain.aliases: {alias!r} maps to {name!r}, which is not one of domain.values")
            key = self.key(alias)
            if index.get(key, self.names.index(name)) != self.names.index(name):
                raise ValueError(f"domain.aliases: {alias!r} is already the name or an alias of another cell")
            index[key] = self.names.index(name)
        object.__setattr__(self, "_index", index)

    @property
    def cells(self) -> tuple[str, ...]:
        """The name of every cell, in order: the names, then `other` if configured."""
        return self.names if self.other is None else (*self.names, self.other)

    @property
    def d(self) -> int:
        return len(self.cells)

    def key(self, text: str) -> str:
        """How `text` is compared under the case rule."""
        return text.casefold() if self.case is CaseRule.FOLD else text

    def spellings(self) -> dict[str, int]:
        """Every accepted value as compared (`key`) -> its cell; any other string goes to `other`."""
        return dict(self._index)

    def cell(self, value: Any) -> int:
        if not isinstance(value, str):
            raise OutOfDomainError(f"category {value!r} is not a string")
        index = self._index.get(self.key(value))
        if index is not None:
            return index
        if self.other is not None:
            return len(self.names)
        raise OutOfDomainError(f"category {value!r} is not one of the configured domain.values or domain.aliases")

    def describe(self) -> dict[str, Any]:
        """The mapping as a release names it: cell j is `values[j]` (the last one `other`, if
        configured); the aliases, case rule and `other` only when configured."""
        out: dict[str, Any] = {"values": list(self.cells)}
        if self.aliases:
            out["aliases"] = dict(self.aliases)
        if self.case is not CaseRule.EXACT:
            out["case"] = self.case.value
        if self.other is not None:
            out["other"] = self.other
        return out


def _number(value: Any) -> float | int | None:
    """`value` as a finite number (an int or float, not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


@dataclass(frozen=True)
class RangeMapping:
    """Numeric cells between increasing finite `edges` (cell j: edges[j] <= v < edges[j + 1]) and an
    optional `other` cell for the numbers outside them."""

    edges: tuple[float, ...]
    other: str | None = None

    def __post_init__(self) -> None:
        edges = tuple(float(edge) for edge in self.edges)
        if len(edges) < 2 or not all(math.isfinite(edge) for edge in edges):
            raise ValueError("domain.edges must be at least two finite numbers")
        if any(low >= high for low, high in zip(edges, edges[1:], strict=False)):
            raise ValueError(f"domain.edges must be strictly increasing, got {list(self.edges)}")
        object.__setattr__(self, "edges", edges)

    @property
    def d(self) -> int:
        return len(self.edges) - 1 + (self.other is not None)

    def cell(self, value: Any) -> int:
        number = _number(value)
        if number is None:
            raise OutOfDomainError(f"range value must be a finite number, got {value!r}")
        index = bisect.bisect_right(self.edges, number) - 1
        if 0 <= index < len(self.edges) - 1:
            return index
        if self.other is not None:
            return len(self.edges) - 1
        raise OutOfDomainError(f"{value!r} is outside domain.edges [{self.edges[0]!r}, {self.edges[-1]!r})")

    def describe(self) -> dict[str, Any]:
        """The mapping as a release names it: cell j holds edges[j] <= v < edges[j + 1]; the last cell
        is `other`, if configured."""
        out: dict[str, Any] = {"edges": list(self.edges)}
        if self.other is not None:
            out["other"] = self.other
        return out
