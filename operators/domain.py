"""Value domains: how an event's value becomes a cell index in [0, d) (docs/mechanisms.md section 1).
The categories and ranges domains map values through operators/value_mapping.py."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pwevent.operators.value_mapping import CaseRule, CategoryMapping, OutOfDomainError, RangeMapping


@dataclass(frozen=True)
class BinaryDomain:
    d: int = 2

    def describe(self) -> dict[str, Any]:
        """The domain as a release names it (docs/formats.md, Release: `domain`): cell 0 is false/0."""
        return {"type": "binary"}

    def cell(self, value: Any) -> int:
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int) and value in (0, 1):
            return value
        raise OutOfDomainError(f"binary value must be 0, 1, true or false, got {value!r}")


@dataclass(frozen=True)
class CellsDomain:
    d: int

    def __post_init__(self) -> None:
        if isinstance(self.d, bool) or not isinstance(self.d, int) or self.d < 1:
            raise ValueError(f"domain.d must be an integer >= 1, got {self.d!r}")

    def describe(self) -> dict[str, Any]:
        """The domain as a release names it: cell j is the event value j."""
        return {"type": "cells", "d": self.d}

    def cell(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.d:
            raise OutOfDomainError(f"cell must be an integer in [0, {self.d}), got {value!r}")
        return value


@dataclass(frozen=True)
class CategoriesDomain:
    """Named categories, in cell order, read through a `CategoryMapping` (aliases, a case rule and an
    `other` cell, all optional)."""

    values: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...] = ()
    case: CaseRule = CaseRule.EXACT
    other: str | None = None
    mapping: CategoryMapping = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mapping", CategoryMapping(self.values, self.aliases, self.case, self.other))

    @property
    def d(self) -> int:
        return self.mapping.d

    def describe(self) -> dict[str, Any]:
        """The domain as a release names it: cell j is the category values[j] (CategoryMapping.describe)."""
        return {"type": "categories", **self.mapping.describe()}

    def cell(self, value: Any) -> int:
        return self.mapping.cell(value)


@dataclass(frozen=True)
class RangesDomain:
    """Numeric ranges between `edges`, one cell each, and an optional `other` cell (RangeMapping)."""

    edges: tuple[float, ...]
    other: str | None = None
    mapping: RangeMapping = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mapping", RangeMapping(self.edges, self.other))

    @property
    def d(self) -> int:
        return self.mapping.d

    def describe(self) -> dict[str, Any]:
        """The domain as a release names it (RangeMapping.describe)."""
        return {"type": "ranges", **self.mapping.describe()}

    def cell(self, value: Any) -> int:
        return self.mapping.cell(value)


@dataclass(frozen=True)
class GridDomain:
    """A rows x cols grid over a lat/lon bounding box; cell = row * cols + col, row 0 at min_lat."""

    min_lat: float
    max_lat: float
    min_lon: float
    max_lon: float
    rows: int
    cols: int

    def __post_init__(self) -> None:
        for name in ("rows", "cols"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"domain.{name} must be an integer >= 1, got {value!r}")
        if not (self.min_lat < self.max_lat and self.min_lon < self.max_lon):
            raise ValueError("domain.bbox must have min_lat < max_lat and min_lon < max_lon")

    @property
    def d(self) -> int:
        return self.rows * self.cols

    def describe(self) -> dict[str, Any]:
        """The domain as a release names it: cell j is row j // cols (row 0 at min_lat), column j % cols
        (column 0 at min_lon), of equal steps in latitude and longitude."""
        return {"type": "grid", "rows": self.rows, "cols": self.cols,
                "bbox": {"min_lat": self.min_lat, "max_lat": self.max_lat, "min_lon": self.min_lon,
                         "max_lon": self.max_lon}}

    def cell(self, value: Any) -> int:
        lat: Any
        lon: Any
        if isinstance(value, dict):
            lat, lon = value.get("lat"), value.get("lon")
        elif isinstance(value, (list, tuple)) and len(value) == 2:
            lat, lon = value
        else:
            raise OutOfDomainError(f"grid value must be {{'lat', 'lon'}} or [lat, lon], got {value!r}")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in (lat, lon)):
            raise OutOfDomainError(f"lat/lon must be finite numbers, got {lat!r}, {lon!r}")
        if not (self.min_lat <= lat <= self.max_lat and self.min_lon <= lon <= self.max_lon):
            raise OutOfDomainError(f"({lat}, {lon}) is outside the grid's bounding box")
        row = min(int((lat - self.min_lat) / (self.max_lat - self.min_lat) * self.rows), self.rows - 1)
        col = min(int((lon - self.min_lon) / (self.max_lon - self.min_lon) * self.cols), self.cols - 1)
        return row * self.cols + col


Domain = BinaryDomain | CellsDomain | CategoriesDomain | RangesDomain | GridDomain
