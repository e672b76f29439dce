"""The Foursquare NYC check-ins (Yang et al., IEEE TSMC 45(1) 2015) as an `EventTable`.

Read in place from `checkins_nyc.tar.xz` with tarfile (never unpacked into the repository). User =
stream participant; value = the cell of a lat/lon grid over the data's bounding box (default 10 x 10)
or the venue category. Where to get the data: docs/evaluation.md. The archive is found at
$PWEVENT_DATA/foursquare_nyc/checkins_nyc.tar.xz or, beside the repository, at
../shared/data/foursquare_nyc/checkins_nyc.tar.xz.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from pwevent.jobs.evaluation.csv_loader import Columns, Grid, read_events
from pwevent.jobs.evaluation.datasets import EventTable

ARCHIVE = Path("foursquare_nyc") / "checkins_nyc.tar.xz"
MEMBER = "checkins_nyc.csv"
REPO = Path(__file__).resolve().parents[2]


class DataMissingError(FileNotFoundError):
    """The dataset is not on this machine; the message says where it was looked for."""


def archive_path() -> Path:
    """$PWEVENT_DATA/foursquare_nyc/checkins_nyc.tar.xz, else ../shared/data/... beside the repository."""
    candidates = []
    if os.environ.get("PWEVENT_DATA"):
        candidates.append(Path(os.environ["PWEVENT_DATA"]) / ARCHIVE)
    candidates.append(REPO.parent / "shared" / "data" / ARCHIVE)
    for path in candidates:
        if path.is_file():
            return path
    raise DataMissingError(
        "Foursquare NYC check-ins not found at " + " or ".join(str(p) for p in candidates)
        + "; see docs/evaluation.md for where to get the dataset (Yang et al., IEEE TSMC 2015)"
    )


GRID_10X10 = Grid(10, 10)


def load_foursquare(grid: Grid | None = GRID_10X10, path: Path | None = None) -> EventTable:
    """Check-ins as events: value = grid cell (grid given) or venue category (grid None)."""
    source = path or archive_path()
    columns = (
        Columns("user", "utc_date_time", lat="lat", lon="lon", grid=grid) if grid is not None
        else Columns("user", "utc_date_time", value="category_name")
    )
    with tarfile.open(source, "r:xz") as archive:
        member = archive.extractfile(MEMBER)
        if member is None:
            raise DataMissingError(f"{source} has no {MEMBER}")
        with io.TextIOWrapper(member, encoding="utf-8", newline="") as text:
            return read_events(text, columns, "Foursquare" if grid is not None else "Foursquare-category")
