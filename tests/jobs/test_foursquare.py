"""The Foursquare NYC loader (jobs/evaluation/foursquare.py); skipped where the shared data is absent."""

from __future__ import annotations

import pytest

from pwevent.jobs.evaluation.csv_loader import Grid
from pwevent.jobs.evaluation.foursquare import DataMissingError, archive_path, load_foursquare


def data_or_skip():
    try:
        return archive_path()
    except DataMissingError as err:
        pytest.skip(f"Foursquare NYC data absent: {err}")


def test_missing_data_names_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("PWEVENT_DATA", str(tmp_path))
    monkeypatch.setattr("pwevent.jobs.evaluation.foursquare.REPO", tmp_path / "repo")
    with pytest.raises(DataMissingError, match="TSMC"):
        archive_path()


def test_grid_load_and_hourly_slots():
    path = data_or_skip()
    table = load_foursquare(Grid(10, 10), path)
    assert len(table.user) == 227_428 and len(table.user_names) == 1083 and table.d == 100
    slotted = table.slotted(3_600_000)
    assert 7_000 < slotted.slots < 8_000 and len(slotted.slot) < len(table.user)


def test_category_values():
    table = load_foursquare(None, data_or_skip())
    assert table.d == 251 and table.name == "Foursquare-category"
