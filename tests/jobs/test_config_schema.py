"""The configuration's JSON Schema (jobs/streaming/config_schema.py) is generated from the models that
validate the configuration; the committed copy is the generated one and every shipped configuration
validates against it (docs/architecture.md, "Dependencies")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.streaming.config_schema import config_schema
from pwevent.jobs.streaming.settings import stream_settings
from tests.deploy.chart import OVERLAYS, job_yaml, render

ROOT = Path(__file__).parents[2]
SCHEMA = ROOT / "docs" / "schemas" / "config.schema.json"
EXAMPLES = sorted((ROOT / "deploy" / "examples").glob("*.yaml"))
BASE = {"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"}}


def as_json(raw: Any) -> Any:
    """A YAML document as JSON would carry it: an unquoted YAML date or time becomes its ISO text."""
    return json.loads(json.dumps(raw, default=lambda value: value.isoformat()))


def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_committed_schema_is_the_generated_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert json.loads(SCHEMA.read_text()) == config_schema(), (
        "docs/schemas/config.schema.json is out of date: pwevent config-schema --out docs/schemas/config.schema.json")
    assert main(["config-schema"]) == 0
    assert json.loads(capsys.readouterr().out) == config_schema()


def defaults(node: Any, where: str = "") -> list[tuple[str, Any, dict[str, Any]]]:
    """(path, default, property schema) of every property with a default, anywhere under `node`."""
    found = []
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            if isinstance(prop, dict) and "default" in prop:
                found.append((f"{where}.{name}", prop["default"], prop))
        for key, value in node.items():
            found += defaults(value, f"{where}/{key}")
    elif isinstance(node, list):
        for n, value in enumerate(node):
            found += defaults(value, f"{where}[{n}]")
    return found


def test_every_default_is_valid_under_its_own_property_schema() -> None:
    """A default is documentation a user may copy: it validates against the schema of its property
    ($refs into the document's $defs resolved), in every section ($defs included)."""
    schema = json.loads(SCHEMA.read_text())
    found = defaults(schema)
    assert "/$defs/FlinkSettings.checkpoint_interval" in {path for path, _, _ in found}  # the walk reaches $defs
    invalid = []
    for path, default, prop in found:
        own = {**{k: v for k, v in prop.items() if k != "default"}, "$defs": schema.get("$defs", {})}
        invalid += [f"{path}: default {default!r}: {err.message}"
                    for err in jsonschema.Draft202012Validator(own).iter_errors(default)]
    assert not invalid, "\n".join(invalid)


def test_the_examples_exist() -> None:
    assert {p.name for p in EXAMPLES} >= {"replay-pbd.yaml", "stream-pbd.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_against_the_schema(path: Path) -> None:
    raw = yaml.safe_load(path.read_text())
    validator().validate(as_json(raw))
    stream_settings(parse_config(raw), str(path.parent))  # and pwevent accepts it


@pytest.mark.parametrize("overlay", [None, *OVERLAYS])
def test_the_helm_charts_job_configuration_validates_against_the_schema(overlay: str | None) -> None:
    validator().validate(as_json(job_yaml(render(overlay))))


@pytest.mark.parametrize("change", [
    {"colour": "red"},
    {"caps": {"max_w": 0}},
    {"caps": {"maxw": 3}},
    {"slot": "15 minutes"},
    {"domain": {"type": "hex"}},
    {"domain": {"type": "cells"}},
    {"noise": "gauss"},
    {"window": "8"},
    {"adaptive": {"pilot": 3}},
    {"adaptive": {"evidence": "many"}},
    {"adaptive": {"day": 0}},
    {"adaptive": {"day": 1.5}},
    {"kafka": {"securty": {}}},
    {"kafka": {"topics": {"evnts": "x"}}},
    {"kafka": {"security": {"protocol": "SASL_SSH"}}},
    {"flink": {"checkpoint_timeout": "never"}},
    {"flink": {"parallelism": 0}},
    {"flink": {"web_port": 70000}},
    {"flink": {"state_backend": "memory"}},
])
def test_the_schema_refuses_what_the_models_refuse(change: dict[str, Any]) -> None:
    """Key names, types and ranges: the schema and the models agree (each change is an error to both)."""
    raw = {**BASE, **change}
    assert list(validator().iter_errors(raw)), f"the schema accepts {change}"
    with pytest.raises(ConfigError):
        stream_settings(parse_config(raw), "/tmp")


def test_the_schema_accepts_a_full_configuration() -> None:
    raw = {**BASE, "mechanism": "Adaptive", "adaptive": {"evidence": 12, "day": 24}, "origin": 0,
           "domain": {"type": "grid", "rows": 2, "cols": 2,
                      "bbox": {"min_lat": 0, "max_lat": 1, "min_lon": 0, "max_lon": 1}},
           "events": {"lat": "la", "lon": "lo"}, "caps": {"max_w": 50, "min_slot_epsilon": 1e-12},
           "default_requirement": {"w": 5, "epsilon": 1.0}, "max_record_bytes": 4096,
           "kafka": {"bootstrap": "127.0.0.1:1", "start": "2024-01-01T00:03:00Z", "properties": {"linger.ms": 5},
                     "security": {"protocol": "SASL_PLAINTEXT", "username": "u", "password": "${P}"}},
           "flink": {"release_delay": 0, "prometheus": {"port": "9249-9259"}, "extra": {"pipeline.name": "p"}}}
    validator().validate(raw)
