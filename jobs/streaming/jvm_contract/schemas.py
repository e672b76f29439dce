"""The parts of the published JSON schemas that other declarations own, rendered by the same command
as the Java (`python -m pwevent.jobs.streaming.jvm_contract --write`): the `reason` enum of
docs/schemas/dead-letter.schema.json is `jobs.common.reasons.Reason`'s values, in order, so that a
reason added or renamed in Python reaches the Java, the schema and the dead letters at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pwevent.jobs.common.reasons import Reason

DEAD_LETTER_SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "schemas" / "dead-letter.schema.json"


def dead_letter_schema(template: dict[str, Any]) -> dict[str, Any]:
    """`template` with its `reason` enum set to every `Reason`, in declaration order."""
    properties = dict(template["properties"])
    properties["reason"] = {**properties["reason"], "enum": [reason.value for reason in Reason]}
    return {**template, "properties": properties}


def rendered(path: Path = DEAD_LETTER_SCHEMA) -> str:
    """The schema file as the declaration renders it (two-space JSON, a final newline)."""
    return json.dumps(dead_letter_schema(json.loads(path.read_text())), indent=2, ensure_ascii=False) + "\n"


def drift(path: Path = DEAD_LETTER_SCHEMA) -> list[Path]:
    """[path] when the file differs from its rendering, else []."""
    return [path] if path.read_text() != rendered(path) else []


def write(path: Path = DEAD_LETTER_SCHEMA) -> list[Path]:
    """Rewrite the file when it differs; the files changed."""
    changed = drift(path)
    if changed:
        path.write_text(rendered(path))
    return changed
