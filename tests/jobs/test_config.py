"""Configuration errors name the key (jobs.config)."""

from __future__ import annotations

import pytest

from pwevent.jobs.common.config import ConfigError, load_config, parse_config
from pwevent.operators.domain import GridDomain

BASE = {"mechanism": "PBD", "slot": "15m", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"}}


@pytest.mark.parametrize("change, message", [
    ({"colour": "red"}, "unknown key colour"),
    ({"domain": {"type": "grid", "rows": 2}}, "unknown key domain|missing key domain"),
    ({"domain": {"type": "cells", "d": 0}}, "domain.d"),
    ({"domain": {"type": "hex"}}, "domain.type"),
    ({"slot": "15 minutes"}, "slot"),
    ({"origin": "soon"}, "origin"),
    ({"mechanism": "XYZ"}, "mechanism"),
    ({"mechanism": "BD"}, "window and epsilon"),
    ({"mechanism": "BD", "window": 0, "epsilon": 1}, "window"),
    ({"noise": "gauss"}, "noise"),
    ({"postprocess": "median"}, "postprocess"),
    ({"caps": {"max_w": -1}}, "caps.max_w"),
    ({"caps": {"maxw": 3}}, "unknown key caps.maxw"),
    ({"caps": {"min_slot_epsilon": 0}}, "caps.min_slot_epsilon"),
    ({"caps": {"min_slot_epsilon": "small"}}, "caps.min_slot_epsilon"),
    ({"caps": {"min_slot_epsilon": 1e-16}}, "caps.min_slot_epsilon .*sampler"),
    ({"mechanism": "BD", "window": 1000, "epsilon": 1e-12, "caps": {"min_slot_epsilon": 1e-14}},
     "window and epsilon .*caps.min_slot_epsilon"),
    ({"events": {"lat": "la"}}, "events.lat"),
    ({"domain": {"type": "grid", "rows": 2, "cols": 2, "bbox": {"min_lat": 1, "max_lat": 0, "min_lon": 0,
                                                                 "max_lon": 1}}}, "bbox"),
])
def test_errors_name_the_key(change, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({**BASE, **change})


def test_missing_key():
    raw = dict(BASE)
    del raw["slot"]
    with pytest.raises(ConfigError, match="missing key slot"):
        parse_config(raw)


def test_grid_domain_and_durations():
    config = parse_config({**BASE, "slot": "100m", "origin": 0, "domain": {
        "type": "grid", "rows": 10, "cols": 10,
        "bbox": {"min_lat": 40.5, "max_lat": 41.0, "min_lon": -74.3, "max_lon": -73.7}}})
    assert config.slot_ms == 6_000_000 and config.origin_ms == 0
    assert isinstance(config.domain, GridDomain) and config.domain.d == 100
    assert config.domain.cell({"lat": 40.5, "lon": -74.3}) == 0
    assert config.domain.cell([41.0, -73.7]) == 99


def test_load_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(str(tmp_path / "none.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("mechanism: [PBD\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(str(bad))


def test_yaml_timestamps_are_times(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("mechanism: PBD\nslot: 60s\norigin: 2024-01-01T00:00:00Z\ndomain: {type: binary}\n")
    assert load_config(str(path)).origin_ms == 1_704_067_200_000


@pytest.mark.parametrize("text", ["2024-01-01", "2024-01-01T00:00:00Z", "2024-01-01 00:00:00", "'2024-01-01'"])
def test_an_unquoted_yaml_date_or_time_is_an_origin(tmp_path, text):
    """YAML reads `origin: 2024-01-01` as a datetime.date: it is that day's midnight, UTC."""
    path = tmp_path / "c.yaml"
    path.write_text(f"mechanism: PBD\nslot: 60s\norigin: {text}\ndomain: {{type: binary}}\n")
    assert load_config(str(path)).origin_ms == 1_704_067_200_000


@pytest.mark.parametrize("change, message", [
    ({"window": "8", "mechanism": "BD", "epsilon": 1}, r"^window: Input should be a valid integer, got '8'$"),
    ({"caps": {"max_w": True}}, r"^caps\.max_w: Input should be a valid integer, got True$"),
    ({"domain": {"type": "categories", "values": ["a", 2]}}, r"^domain\.values\[1\]: .*string, got 2$"),
    ({"caps": [1]}, r"^caps must be a mapping$"),
    ({"events": {"user": ""}}, r"^events\.user: "),
])
def test_types_are_strict_and_errors_give_the_dotted_path(change, message):
    """pydantic's strict mode: no "8" for 8 and no true for 1, as the hand-written checks did."""
    with pytest.raises(ConfigError, match=message):
        parse_config({**BASE, **change})


def test_an_empty_section_takes_the_defaults(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("mechanism: PBD\nslot: 60s\norigin: 0\ndomain: {type: binary}\ncaps:\nevents:\n")
    config = load_config(str(path))
    assert config.caps.max_w == 1000 and config.events.user == "user"
    with pytest.raises(ConfigError, match="^missing key slot$"):
        parse_config(None)  # an empty file


@pytest.mark.parametrize(("slot", "options", "day"), [
    ("1h", {}, 24), ("15m", {}, 96), ("1d", {}, 1), ("2d", {}, 1), ("7m", {}, 1), ("500ms", {}, 172_800),
    ("1h", {"day": 1}, 1), ("1h", {"day": 12}, 12),
])
def test_adaptive_reads_the_slots_in_a_day_from_the_slot_unless_set(slot, options, day):
    """Adaptive's `day` (its bursts' quarter-day offset, docs/mechanisms.md section 14) is the slots in a
    day of `slot` when the slot divides a day, else 1; `adaptive.day` sets it (1: no offset)."""
    config = parse_config({**BASE, "mechanism": "Adaptive", "slot": slot, "adaptive": options})
    assert config.mechanism_spec().policy.switch.rule.day == day


def test_adaptive_day_must_be_a_whole_number_of_slots():
    with pytest.raises(ConfigError, match=r"adaptive: day must be a whole number"):
        parse_config({**BASE, "mechanism": "Adaptive", "adaptive": {"day": 0}})
