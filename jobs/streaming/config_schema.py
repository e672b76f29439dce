"""The JSON Schema of the YAML configuration, generated from the models that validate it: the top
level (jobs.common.config.Config), the `kafka:`, `flink:` and `release:` sections (jobs.streaming.settings) and
each registered mechanism's own section (operators/registry.py); docs/architecture.md,
"Dependencies", says what it is for.

The committed copy, `docs/schemas/config.schema.json`, is kept equal to `config_schema()` by a test;
regenerate it with `pwevent config-schema --out docs/schemas/config.schema.json`. The schema checks
key names, types and ranges; the rules that need several keys, the environment or the file system
(a baseline's global requirement against the budget floor, `default_requirement` against the
mechanism, `${NAME}` resolution, `kafka.security` credentials and `ca_file`) are checked by pwevent
only.
"""

from __future__ import annotations

import dataclasses
from typing import Any, get_type_hints

from pydantic import Field, create_model

from pwevent.jobs.common.config import Config, Section
from pwevent.jobs.streaming.settings import FlinkSettings, KafkaSettings, ReleaseSettings
from pwevent.operators.registry import REGISTRY, MechanismEntry, MechanismRegistry

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "https://pwevent.example/schemas/config.schema.json"


def _section_model(entry: MechanismEntry) -> type[Section]:
    """A mechanism's own section: the fields of its `section_type`, their types and defaults (the
    values are checked by the mechanism itself: MechanismEntry.spec)."""
    assert entry.section is not None and entry.section_type is not None
    hints = get_type_hints(entry.section_type)
    keys: dict[str, Any] = {f.name: (hints[f.name], _field(f)) for f in dataclasses.fields(entry.section_type)}
    model = create_model(f"{entry.name}Section", __base__=Section, **keys)
    model.__doc__ = f"`{entry.section}:` options of mechanism {entry.name} only (docs/mechanisms.md)."
    return model


def _field(spec: dataclasses.Field[Any]) -> Any:
    """A section key's default, with its `description` (field metadata) when it has one; a key whose
    default comes from the clock (`from_clock`, such as Adaptive's `day` from `slot`) states none."""
    if not spec.metadata:
        return spec.default
    extra = (lambda schema: schema.pop("default", None)) if spec.metadata.get("from_clock") else None
    return Field(spec.default, description=spec.metadata.get("description"), ge=spec.metadata.get("minimum"),
                 json_schema_extra=extra)


def config_schema(registry: MechanismRegistry = REGISTRY) -> dict[str, Any]:
    """The configuration's JSON Schema (draft 2020-12), input keys as written in the YAML file."""
    sections: dict[str, Any] = {e.section: (_section_model(e) | None, None) for e in registry if e.section}
    document = create_model("Configuration", __base__=Config, kafka=(KafkaSettings | None, None),
                            flink=(FlinkSettings | None, None), release=(ReleaseSettings | None, None), **sections)
    schema = document.model_json_schema(by_alias=True, mode="validation")
    # `statistics:` replaces `domain:` (Config._statistics_domain): one of them is required, not both
    schema["required"] = [key for key in schema["required"] if key != "domain"]
    schema["oneOf"] = [{"required": ["domain"], "not": {"required": ["statistics"]}}, {"required": ["statistics"],
                                                                                      "not": {"required": ["domain"]}}]
    head = {"$schema": SCHEMA_DIALECT, "$id": SCHEMA_ID, "title": "pwevent configuration",
            "description": "The YAML configuration of pwevent replay, run and the other commands (generated "
                           "from jobs/common/config.py and jobs/streaming/settings.py: pwevent config-schema)."}
    return {**head, **{key: value for key, value in schema.items() if key not in head}}
