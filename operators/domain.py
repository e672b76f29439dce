"""Value domains: how an event's value becomes a cell index in [0, d) (docs/mechanisms.md section 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


class OutOfDomainError(ValueError):
    """An event value that is not in the configured domain."""


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
    values: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.values or len(set(self.values)) != len(self.values):
            raise ValueError("domain.values must be a non-empty list of distinct names")
        object.__setattr__(self, "_index", {v: i for i, v in enumerate(self.values)})

    @property
    def d(self) -> int:
        return len(self.values)

    def describe(self) -> dict[str, Any]:
        """The domain as a release names it: cell j is the category values[j]."""
        return {"type": "categories", "values": list(self.values)}

    def cell(self, value: Any) -> int:
        index = self._index.get(value) if isinstance(value, str) else None  # type: ignore[attr-defined]
        if index is None:
            raise OutOfDomainError(f"category {value!r} is not one of the configured domain.values")
        return int(index)


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


Domain = BinaryDomain | CellsDomain | CategoriesDomain | GridDomain
