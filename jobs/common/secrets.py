"""Secrets of the configuration (passwords, client secrets): written as `${ENV_VAR}` (resolved at load)
or `{file: PATH}` (a mounted file), held in a `Secret` whose repr and str hide the value
(docs/operations.md, "Security"). Shared by `kafka.security` (jobs/streaming/kafka_security.py) and the
Schema Registry settings of the Avro input formats (jobs/common/avro_format.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationInfo


@dataclass(frozen=True)
class Secret:
    """A credential: its repr and str never show the value; `reveal()` is the only way to read it."""

    _value: str

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


def resolve_path(path: str, info: ValidationInfo) -> str:
    """`path`, made absolute against the config file's folder (validation context `base_dir`)."""
    if os.path.isabs(path):
        return path
    return str(Path((info.context or {}).get("base_dir") or ".").resolve() / path)


def secret_value(raw: Any, info: ValidationInfo) -> Secret | None:
    """A secret written as `${ENV_VAR}` (resolved at load) or `{file: PATH}` (a mounted file, read
    now; one trailing newline dropped)."""
    if raw is None or isinstance(raw, Secret):
        return raw
    if isinstance(raw, dict) and set(raw) == {"file"} and isinstance(raw["file"], str) and raw["file"]:
        path = resolve_path(raw["file"], info)
        try:
            text = Path(path).read_text()
        except OSError as err:
            raise ValueError(f"cannot read the secret file {path}: {err.strerror}") from None
        return Secret(text.removesuffix("\n"))
    if not isinstance(raw, str):
        raise ValueError("must be a string (write ${ENV_VAR} to take it from the environment) or {file: PATH}")
    return Secret(raw)


class SecretFile(BaseModel):
    """A secret read from a mounted file (the JSON Schema's form of `{file: PATH}`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    file: str = Field(min_length=1)


SecretValue = Annotated[Secret | None, PlainValidator(secret_value, json_schema_input_type=str | SecretFile | None)]
