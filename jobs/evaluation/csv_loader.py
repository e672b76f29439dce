"""Generic CSV loader: real event data -> `EventTable` (jobs/evaluation/datasets.py, docs/mechanisms.md section 1).

The caller names the user-id column, the time column and either a value column (categorical: each
distinct value becomes a cell, in sorted order) or a lat/lon pair (the cell of an nx x ny grid over
the data's bounding box, row-major from the south-west corner). Times are ISO-8601 or epoch
milliseconds (jobs/common/slots.py); a time without an offset is UTC.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from pwevent.jobs.common.slots import parse_time_ms
from pwevent.jobs.evaluation.datasets import EventTable


@dataclass(frozen=True)
class Grid:
    """An nx (longitude) x ny (latitude) grid; bounds default to the data's bounding box."""

    nx: int = 10
    ny: int = 10
    bounds: tuple[float, float, float, float] | None = None  # (lat_min, lat_max, lon_min, lon_max)

    def __post_init__(self) -> None:
        if self.nx < 1 or self.ny < 1:
            raise ValueError(f"grid must be at least 1 x 1, got {self.nx} x {self.ny}")

    def cells(self, lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, tuple[float, float, float, float]]:
        """Cell index row * nx + col of each point (points on the upper edges go to the last cell)."""
        box = self.bounds or (float(lat.min()), float(lat.max()), float(lon.min()), float(lon.max()))
        lat0, lat1, lon0, lon1 = box
        row = np.clip(((lat - lat0) / max(lat1 - lat0, 1e-12) * self.ny).astype(np.int64), 0, self.ny - 1)
        col = np.clip(((lon - lon0) / max(lon1 - lon0, 1e-12) * self.nx).astype(np.int64), 0, self.nx - 1)
        inside = (lat >= lat0) & (lat <= lat1) & (lon >= lon0) & (lon <= lon1)
        return np.where(inside, row * self.nx + col, -1), box

    def labels(self, box: tuple[float, float, float, float]) -> tuple[str, ...]:
        lat0, lat1, lon0, lon1 = box
        dlat, dlon = (lat1 - lat0) / self.ny, (lon1 - lon0) / self.nx
        return tuple(
            f"lat[{lat0 + r * dlat:.4f},{lat0 + (r + 1) * dlat:.4f}) "
            f"lon[{lon0 + c * dlon:.4f},{lon0 + (c + 1) * dlon:.4f})"
            for r in range(self.ny)
            for c in range(self.nx)
        )


@dataclass(frozen=True)
class Columns:
    """Which CSV columns hold what: `value`, or `lat` and `lon` with a `grid`."""

    user: str
    time: str
    value: str | None = None
    lat: str | None = None
    lon: str | None = None
    grid: Grid | None = None

    def __post_init__(self) -> None:
        spatial = self.lat is not None and self.lon is not None
        if (self.value is None) == (not spatial):
            raise ValueError("name either a value column or both lat and lon columns, not both")


def _column(header: list[str], name: str) -> int:
    if name not in header:
        raise ValueError(f"column {name!r} is not in the header {header}")
    return header.index(name)


def read_events(
    lines: Iterable[str], columns: Columns, name: str, time_format: str | None = None, delimiter: str = ","
) -> EventTable:
    """Parse CSV text (header first). `time_format`: a strptime pattern for times that are neither
    ISO-8601 nor epoch ms (for example '%a %b %d %H:%M:%S %z %Y'); without it parse_time_ms is used.
    `delimiter`: ',' by default, '\t' for tab-separated files."""
    reader = csv.reader(lines, delimiter=delimiter)
    header = next(reader)
    iu, it = _column(header, columns.user), _column(header, columns.time)
    spatial = columns.value is None
    fields = (_column(header, columns.lat or ""), _column(header, columns.lon or "")) if spatial else (
        _column(header, columns.value or ""),)
    users: list[str] = []
    times: list[int] = []
    raw: list[list[str]] = [[] for _ in fields]
    for number, row in enumerate(reader, 2):
        if not row:
            continue
        try:
            if time_format is None:
                times.append(parse_time_ms(row[it]))
            else:
                moment = datetime.strptime(row[it], time_format)
                moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
                times.append(int(round(moment.timestamp() * 1000)))
        except (ValueError, IndexError) as err:
            raise ValueError(f"{name} line {number}: bad time: {err}") from None
        users.append(row[iu])
        for k, index in enumerate(fields):
            raw[k].append(row[index])
    user_names, user = np.unique(np.asarray(users, dtype=object), return_inverse=True)
    time_ms = np.asarray(times, dtype=np.int64)
    if spatial:
        grid = columns.grid or Grid()
        cell, box = grid.cells(np.asarray(raw[0], dtype=float), np.asarray(raw[1], dtype=float))
        labels = grid.labels(box)
    else:
        names, cell = np.unique(np.asarray(raw[0], dtype=object), return_inverse=True)
        labels = tuple(str(v) for v in names)
    keep = cell >= 0
    return EventTable(
        name, user[keep].astype(np.int64), time_ms[keep], np.asarray(cell)[keep].astype(np.int64),
        tuple(str(u) for u in user_names), labels,
    )


def load_csv(
    path: str | Path, columns: Columns, time_format: str | None = None, delimiter: str = ","
) -> EventTable:
    """Read a CSV file into an EventTable named after the file."""
    with Path(path).open(encoding="utf-8", errors="replace", newline="") as handle:
        return read_events(handle, columns, Path(path).stem, time_format, delimiter)
