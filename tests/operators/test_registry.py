"""The mechanism registry (operators/registry.py) is the one list: the CLI's choices, the release
schema's enum, the README's table, the configuration and the property tests all derive from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from pwevent.jobs.cli.main import build_parser
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.common.release_schema import json_schema
from pwevent.operators.policies import PBD
from pwevent.operators.registry import REGISTRY, MechanismEntry, docs_table
from tests.state import test_ledger_properties

ROOT = Path(__file__).parents[2]
BASE = {"slot": "1s", "origin": 0, "domain": {"type": "binary"}}


def choices(parser, command: str, option: str) -> list[str]:
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return list(next(a for a in sub._actions if option in a.option_strings).choices)


@pytest.fixture
def ninth():
    """A 9th mechanism, registered for one test only: a PBD under another name, counting its builds."""
    built: list[int] = []

    def build(_requirement, _options):
        built.append(1)
        return PBD()

    entry = MechanismEntry("Ninth", True, False, build, "distribution (test)", "tests")
    with REGISTRY.extended(entry):
        yield built
    assert "Ninth" not in REGISTRY.names()


def test_a_ninth_mechanism_appears_everywhere_without_touching_them(ninth):
    assert "Ninth" in choices(build_parser(), "demo", "--mechanism")
    assert "Ninth" in json_schema()["properties"]["mechanism"]["enum"]
    assert "| Ninth | fixed per user (w_i, E_i) |" in docs_table()
    assert parse_config({**BASE, "mechanism": "Ninth"}).mechanism_spec().name == "Ninth"
    with pytest.raises(ConfigError, match="personalized"):
        parse_config({**BASE, "mechanism": "Ninth", "epsilon": 1.0})
    before = len(ninth)
    # The property test's own body, unchanged, under fixed seeds until it draws the 9th mechanism:
    # hypothesis rarely draws the last of the names in 60 examples, and which examples a seed gives
    # moves with unrelated changes (strategy labels), so one fixed seed would fail on chance.
    body = test_ledger_properties.test_engine_with_random_presence_passes_the_audit.hypothesis.inner_test
    for attempt in range(20):
        run = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
        run(seed(attempt)(given(st.data())(body)))()
        if len(ninth) > before:
            break
    assert len(ninth) > before, "the property test never drew the registered 9th mechanism"


def test_the_readme_table_is_the_registry_table():
    assert docs_table() in (ROOT / "README.md").read_text()


def test_demo_offers_the_fixed_mechanisms_and_defaults_to_adaptive():
    parser = build_parser()
    assert choices(parser, "demo", "--mechanism") == [e.name for e in REGISTRY if not e.dynamic]
    assert parser.parse_args(["demo"]).mechanism == "Adaptive"


@pytest.mark.parametrize("entry", list(REGISTRY), ids=lambda e: e.name)
def test_global_keys_are_required_by_baselines_and_refused_by_the_others(entry: MechanismEntry):
    raw = {**BASE, "mechanism": entry.name}
    if entry.personalized:
        parse_config(raw)
        for key, value in (("window", 8), ("epsilon", 1.0)):
            with pytest.raises(ConfigError, match=f"^{key}: mechanism {entry.name} is personalized.*ignored"):
                parse_config({**raw, key: value})
    else:
        with pytest.raises(ConfigError, match="needs the keys window and epsilon"):
            parse_config(raw)
        parse_config({**raw, "window": 8, "epsilon": 1.0})


def test_adaptive_is_the_default_and_its_section_is_its_own():
    config = parse_config(BASE)
    assert config.mechanism == "Adaptive" and config.postprocess == "kalman"
    assert config.mechanism_spec().policy.in_force() == "Sample"  # type: ignore[attr-defined]  # bursts first
    tuned = parse_config({**BASE, "adaptive": {"evidence": 12, "hysteresis": 0.2, "static_drift": 0.5, "start": "PBA"}})
    policy = tuned.mechanism_spec().policy
    assert policy.switch.rule.evidence == 12 and policy.switch.rule.hysteresis == 0.2  # type: ignore[attr-defined]
    assert policy.switch.rule.static_drift == 0.5 and policy.in_force() == "PBA"  # type: ignore[attr-defined]
    assert tuned.mechanism_spec().policy is not policy  # a fresh policy (its own state) per engine
    for raw, match in (({"mechanism": "PBA", "adaptive": {}}, "adaptive: only mechanism Adaptive"),
                       ({"adaptive": {"pilot": 3}}, "unknown key adaptive.pilot"),
                       ({"adaptive": {"evidence": 0}}, "adaptive: evidence"),
                       ({"adaptive": {"switch_rate": "high"}}, "adaptive: switch_rate must be a number"),
                       ({"adaptive": {"static_drift": -1}}, "adaptive: static_drift must be at least 0"),
                       ({"adaptive": {"static_drift": float("inf")}}, "adaptive: static_drift must be a number"),
                       ({"adaptive": {"start": "BD"}}, "adaptive: start must be one of Uniform, PBA, PBD, Sample"),
                       ({"adaptive": {"probe": 0}}, "adaptive: probe must be a share of E in"),
                       ({"mechanism": "Auto"}, "mechanism must be one of PBD, .*Adaptive")):
        with pytest.raises(ConfigError, match=match):
            parse_config({**BASE, **raw})


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        REGISTRY.register(REGISTRY.get("PBD"))
