"""The generic CSV loader (jobs/evaluation/csv_loader.py)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from pwevent.jobs.evaluation.csv_loader import Columns, Grid, load_csv, read_events

CSV = """uid,when,kind,lat,lon
u1,2024-01-01T00:00:00Z,cafe,0.0,0.0
u2,2024-01-01T00:30:00Z,bar,1.0,1.0
u1,2024-01-01T01:10:00Z,bar,0.5,0.49
"""


def test_value_column_becomes_sorted_categories():
    t = read_events(io.StringIO(CSV), Columns("uid", "when", value="kind"), "x")
    assert t.labels == ("bar", "cafe") and t.value.tolist() == [1, 0, 0]
    assert t.user_names == ("u1", "u2") and t.user.tolist() == [0, 1, 0]
    assert t.time_ms[1] - t.time_ms[0] == 30 * 60_000


def test_lat_lon_become_grid_cells_over_the_bounding_box():
    t = read_events(io.StringIO(CSV), Columns("uid", "when", lat="lat", lon="lon", grid=Grid(2, 2)), "x")
    assert t.d == 4
    assert t.value.tolist() == [0, 3, 2]  # (0,0) south-west; (1,1) the upper edges go to the last cell
    assert t.labels[0].startswith("lat[0.0000,0.5000)")


def test_points_outside_fixed_bounds_are_dropped():
    grid = Grid(2, 2, bounds=(0.0, 0.6, 0.0, 0.6))
    t = read_events(io.StringIO(CSV), Columns("uid", "when", lat="lat", lon="lon", grid=grid), "x")
    assert len(t.user) == 2


def test_custom_time_format_and_file(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("u,t,v\na,01/02/2024 10:00,1\n")
    t = load_csv(path, Columns("u", "t", value="v"), time_format="%d/%m/%Y %H:%M")
    assert t.name == "e" and t.time_ms[0] == np.datetime64("2024-02-01T10:00", "ms").astype(np.int64)


def test_tab_separated_original_foursquare_layout(tmp_path):
    path = tmp_path / "nyc.tsv"
    path.write_text("user\tcat\ttime\n470\tBar\tTue Apr 03 18:00:09 +0000 2012\n")
    t = load_csv(path, Columns("user", "time", value="cat"), time_format="%a %b %d %H:%M:%S %z %Y", delimiter="\t")
    assert t.time_ms[0] == np.datetime64("2012-04-03T18:00:09", "ms").astype(np.int64)


def test_errors_name_the_column_or_line():
    with pytest.raises(ValueError, match="'nope'"):
        read_events(io.StringIO(CSV), Columns("nope", "when", value="kind"), "x")
    with pytest.raises(ValueError, match="line 2"):
        read_events(io.StringIO("u,t,v\na,yesterday,1\n"), Columns("u", "t", value="v"), "x")
    with pytest.raises(ValueError, match="either"):
        Columns("u", "t", value="v", lat="a", lon="b")
