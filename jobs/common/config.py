"""The YAML configuration, validated once; every error names the offending key.

```yaml
mechanism: Adaptive       # the default; or any name of operators/registry.py (README table)
adaptive: {evidence: 240, static_drift: 0.001, start: Sample, probe: 0.125, level_margin: 4}   # Adaptive only (sec. 14)
                          # adaptive.day: slots in a day, from `slot` unless set (1: no quarter-day offset)
slot: 15m                 # slot length: 500ms, 60s, 15m, 1h, 1d ...
origin: 2024-01-01T00:00:00Z   # start of slot 1 (ISO-8601 or epoch ms)
domain: {type: grid, rows: 10, cols: 10, bbox: {min_lat: .., max_lat: .., min_lon: .., max_lon: ..}}
                          # or {type: categories, values: [web, app], aliases: {iOS: app}, case: fold, other: rest}
                          # or {type: ranges, edges: [0, 18, 65], other: rest} (docs/formats.md, "Value mapping")
window: 120               # baselines only (an error for the others): the global w ...
epsilon: 0.6              # ... and E (every user's requirement must be at least as loose)
noise: opendp             # opendp (production) | numpy-fast (experiments; named in results)
postprocess: kalman       # kalman: releases also carry `smoothed` (a causal filter of the releases) | none
caps: {max_w: 1000, max_epsilon: 100,  # largest window / budget a user may declare
       min_slot_epsilon: 1.0e-14}       # per-slot budget floor (docs/mechanisms.md, Budget floor)
events: {user: user, time: time, value: value}   # field paths (or lat/lon): payload.user_id, a\\.b a dot
requirements: {user: user, time: time}   # + signature: {key_env: PWEVENT_REQUIREMENT_KEY, field: sig}
                          # + w: .., epsilon: .., backward: {w: .., epsilon: ..}, forward: {..} (field paths)
                          # both: format: json (default) | avro-confluent (+ schema_registry: {url: ..,
                          # username: .., password: ${ENV} or {file: PATH} | token: ${ENV} (bearer),
                          # ca_file: ca.pem, client_cert: {cert_file, key_file, keystore: {location,
                          # password}}, timeout: 10s, retry_for: 5m}) | avro (+ schema_file:
                          # events.avsc) | protobuf-confluent (+ schema_registry) | protobuf (+ protobuf:
                          # {descriptor_set: events.desc, message: pkg.Event}); docs/streaming.md,
                          # "Parsing"; docs/operations.md, "Security"
default_requirement: {w: 10, epsilon: 1.0}   # optional: the requirement of a user seen in the events
                          # before any requirement record of theirs ({backward: .., forward: ..} for
                          # dynamic mechanisms; docs/streaming.md, "Users without a requirement record")
max_record_bytes: 65536   # largest input record (event, requirement) accepted; larger ones are rejected
pseudonymise: {key: ${PWEVENT_PSEUDONYM_KEY}}   # optional: user ids replaced by keyed hashes (jobs/common/
                          # pseudonyms.py; docs/operations.md, "Retention and erasure"); key also {file: PATH}
```

Any string value may name environment variables, `${NAME}`, resolved at load (secrets such as
`kafka.security.password` stay out of the file; docs/operations.md, "Security"); a variable that is
not set is a configuration error naming the key and the variable. `$${` writes a literal `${`.

Each mapping is a frozen pydantic model with strict types (`"3"` is not a number) that refuses unknown
keys; the project's own rules (durations, times, domains, the mechanism registry, the budget floor,
the default requirement) are its validators. `config_error` turns pydantic's first error into a
`ConfigError` naming the key by its dotted path. The models also give the configuration's JSON Schema
(`docs/schemas/config.schema.json`, `pwevent config-schema`; jobs/streaming/config_schema.py).
"""

from __future__ import annotations

import base64
import os
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError

from pwevent.jobs.common.avro_schema import load_schema_file
from pwevent.jobs.common.field_paths import (
    RecordField,
    RecordPart,
    check_disjoint,
    field_path,
    mapping_slots,
    path_text,
    record_field,
)
from pwevent.jobs.common.protobuf_schema import load_descriptor_set, message_type
from pwevent.jobs.common.provenance import RequirementSignature
from pwevent.jobs.common.pseudonyms import Pseudonyms
from pwevent.jobs.common.requirement_rules import RequirementRules
from pwevent.jobs.common.secrets import Secret, SecretValue, resolve_path
from pwevent.jobs.common.slots import SlotClock, parse_duration_ms, parse_time_ms
from pwevent.operators.domain import BinaryDomain, CategoriesDomain, CellsDomain, Domain, GridDomain, RangesDomain
from pwevent.operators.noise import SAMPLER_MIN_EPSILON
from pwevent.operators.policies import MechanismSpec
from pwevent.operators.postprocess import KalmanSmoother
from pwevent.operators.registry import GLOBAL_KEYS, REGISTRY
from pwevent.operators.value_mapping import CaseRule
from pwevent.state.errors import InvalidRequirementError
from pwevent.state.requirements import DynamicRequirement, Requirement, RequirementCaps, parse_requirement

#: The mechanism when the configuration names none (docs/mechanisms.md section 14).
DEFAULT_MECHANISM = "Adaptive"
#: Default largest input record, in bytes (`max_record_bytes`).
DEFAULT_MAX_RECORD_BYTES = 65_536
#: Sections that other layers validate themselves (the streaming job's Kafka, Flink and release settings).
EXTRA_SECTIONS: frozenset[str] = frozenset({"kafka", "flink", "release"})  # jobs/streaming/settings.stream_settings
#: Keys whose value no error message shows (docs/operations.md, "Security").
SECRET_KEYS = frozenset({"password", "key"})

T = TypeVar("T")


class ConfigError(ValueError):
    """An invalid configuration; the message names the key."""


class Section(BaseModel):
    """A mapping of the YAML configuration: frozen, strict types, and an unknown key is an error that
    lists the allowed ones. An empty section (`caps:` with no value) takes the defaults. `derived`:
    fields the validation fills from other keys, not keys of the file."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    derived: ClassVar[frozenset[str]] = frozenset()
    #: Keys of earlier releases this version no longer takes -> what took their place.
    replaced: ClassVar[dict[str, str]] = {}

    @classmethod
    def input_keys(cls) -> set[str]:
        return {f.alias or name for name, f in cls.model_fields.items() if name not in cls.derived}

    @classmethod
    def derive(cls, raw: dict[str, Any]) -> dict[str, Any]:
        """The raw mapping with the derived fields filled in (none by default)."""
        return raw

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, raw: Any) -> Any:
        raw = {} if raw is None else raw
        if not isinstance(raw, dict):
            return raw  # pydantic's error: not a mapping
        allowed = cls.input_keys()
        unknown = sorted(str(key) for key in raw if key not in allowed)
        gone = [key for key in unknown if key in cls.replaced]
        if gone:
            raise PydanticCustomError("replaced_key", "unknown key {key}: {instead}",
                                      {"key": gone[0], "instead": cls.replaced[gone[0]]})
        if unknown:
            raise PydanticCustomError("unknown_key", "unknown key {key} (allowed: {allowed})",
                                      {"key": unknown[0], "allowed": ", ".join(sorted(allowed))})
        return cls.derive(raw)


def config_error(err: ValidationError, section: str = "") -> ConfigError:
    """The first error of a validation as a ConfigError naming the key by its dotted path (under
    `section`, the path of the mapping validated). A secret's value is never shown."""
    first = err.errors(include_url=False)[0]
    loc = [str(part) for part in first["loc"]]
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"])
    path = f"{section}{path}" if section else path.lstrip(".")
    kind, ctx = first["type"], first.get("ctx", {})
    if kind == "unknown_key":
        return ConfigError(f"unknown key {path + '.' if path else ''}{ctx['key']} (allowed: {ctx['allowed']})")
    if kind == "replaced_key":
        return ConfigError(f"unknown key {path + '.' if path else ''}{ctx['key']}: {ctx['instead']}")
    if kind == "missing":
        return ConfigError(f"missing key {path}")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return ConfigError(f"{path or 'config'} must be a mapping")
    if kind in ("value_error", "assertion_error"):
        text = str(ctx.get("error", first["msg"]))
        return ConfigError(text if not path or text.startswith(path) else f"{path}: {text}")
    shown = "" if SECRET_KEYS & set(loc) else f", got {first['input']!r}"
    return ConfigError(f"{path}: {first['msg']}{shown}")


def _rule(parse: Callable[[Any, str], T]) -> Callable[[Any], T]:
    """A parser of jobs.common.slots (its ValueError starts with the field name it is given) as a
    validator: the message without a name, which `config_error` puts before it."""
    def validate(value: Any) -> T:
        try:
            return parse(value, "")
        except ValueError as err:
            raise ValueError(str(err).strip()) from None

    return validate


_DURATION_PATTERN = r"^\s*\d+\s*(ms|s|m|h|d)\s*$"
#: A positive duration: 500ms, 60s, 15m, 1h, 1d (jobs.common.slots.parse_duration_ms).
Duration = Annotated[int, PlainValidator(_rule(parse_duration_ms)), WithJsonSchema(
    {"type": "string", "pattern": _DURATION_PATTERN, "description": "a duration: 500ms, 60s, 15m, 1h, 1d"})]


def _duration_or_zero(value: Any) -> int:
    return 0 if value in (0, "0", "0ms", "0s") and not isinstance(value, bool) else _rule(parse_duration_ms)(value)


#: A duration, or 0 (off).
DurationOrZero = Annotated[int, PlainValidator(_duration_or_zero), WithJsonSchema(
    {"anyOf": [{"type": "string", "pattern": _DURATION_PATTERN}, {"const": 0}],
     "description": "a duration (500ms, 60s, 15m, 1h, 1d) or 0 (off)"})]
#: An instant: ISO-8601 (a YAML date or time too; UTC without an offset) or epoch milliseconds.
Time = Annotated[int, PlainValidator(_rule(parse_time_ms)), WithJsonSchema(
    {"anyOf": [{"type": "string"}, {"type": "number"}],
     "description": "ISO-8601 (UTC without an offset; a date alone is its midnight) or epoch milliseconds"})]
#: A non-empty string.
Name = Annotated[StrictStr, Field(min_length=1)]


def _field_path(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"a field path is a string, got {value!r}")
    if record_field(value) is None:  # ValueError naming what is wrong
        field_path(value)
    return value


_KEY = r"(?:[^.\\$]|\\[.\\$])(?:[^.\\]|\\[.\\$])*"
_INNER_KEY = r"(?:[^.\\]|\\[.\\$])+"
_PATH = f"{_KEY}(?:\\.{_INNER_KEY})*"
#: Where a field mapping finds its value: keys separated by `.`, `\.` a dot, `\\` a backslash and
#: `\$` a dollar sign in a key; or, starting with `$`, a part of the Kafka record: `$key`,
#: `$key.<path>`, `$timestamp`, `$headers.<name>` (jobs.common.field_paths; docs/formats.md).
FieldPath = Annotated[str, PlainValidator(_field_path), WithJsonSchema(
    {"type": "string", "pattern": f"^(?:{_PATH}|\\$key(?:\\.{_PATH})?|\\$timestamp|\\$headers\\..+)$",
     "description": "a field path: keys of nested objects separated by '.'; in a key, '\\.' is a dot, "
                    "'\\\\' a backslash and '\\$' a dollar sign; arrays are never indexed. Or a part of the "
                    "Kafka record: $key, $key.<field path>, $timestamp, $headers.<name>"})]


def _value_path(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"a field path is a string, got {value!r}")
    field_path(value)  # ValueError naming what is wrong, a leading $ included
    return value


#: A field path into the value only (no `$` mapping): where a requirement record holds its window
#: and budget, which the record's value always carries.
ValuePath = Annotated[str, PlainValidator(_value_path), WithJsonSchema(
    {"type": "string", "pattern": f"^{_PATH}$",
     "description": "a field path into the value: keys of nested objects separated by '.'; in a key, '\\.' is "
                    "a dot, '\\\\' a backslash and '\\$' a dollar sign; arrays are never indexed"})]


class BinarySpec(Section):
    """Values 0/1 (or false/true)."""

    type: Literal["binary"]


class CellsSpec(Section):
    """Cell indexes 0 .. d-1."""

    type: Literal["cells"]
    d: StrictInt = Field(ge=1)


class CategoriesSpec(Section):
    """Named categories, in cell order, and how values map to them (operators/value_mapping.py)."""

    type: Literal["categories"]
    values: list[StrictStr] = Field(min_length=1)
    aliases: dict[StrictStr, StrictStr] = Field(
        default_factory=dict, description="another spelling -> the name of its cell (one of values)")
    case: Literal["exact", "fold"] = Field(
        "exact", description="exact: names compared as they are; fold: after Unicode case folding")
    other: StrictStr | None = Field(
        None, description="the name of an extra last cell for every other string (else out_of_domain)")


class RangesSpec(Section):
    """Numeric ranges: cell j holds edges[j] <= value < edges[j + 1] (operators/value_mapping.py)."""

    type: Literal["ranges"]
    edges: list[float] = Field(min_length=2, description="strictly increasing finite numbers")
    other: StrictStr | None = Field(
        None, description="the name of an extra last cell for every number outside the edges (else out_of_domain)")


class BBox(Section):
    min_lat: float
    max_lat: float
    min_lon: float
    max_lon: float


class GridSpec(Section):
    """A rows x cols grid over a lat/lon bounding box."""

    type: Literal["grid"]
    rows: StrictInt = Field(ge=1)
    cols: StrictInt = Field(ge=1)
    bbox: BBox


DOMAIN_SPECS: dict[str, type[Section]] = {"binary": BinarySpec, "cells": CellsSpec, "categories": CategoriesSpec,
                                          "ranges": RangesSpec, "grid": GridSpec}
DomainSpec = Annotated[BinarySpec | CellsSpec | CategoriesSpec | RangesSpec | GridSpec, Field(discriminator="type")]


def _domain(raw: Any) -> Domain:
    """`domain:`, by its type (operators/domain.py checks what the key types cannot say)."""
    if not isinstance(raw, dict):
        raise ValueError("domain must be a mapping")
    if "type" not in raw:
        raise ValueError("missing key domain.type")
    spec_type = DOMAIN_SPECS.get(raw["type"]) if isinstance(raw["type"], str) else None
    if spec_type is None:
        *kinds, last = DOMAIN_SPECS
        raise ValueError(f"domain.type must be {', '.join(kinds)} or {last}, got {raw['type']!r}")
    spec = spec_type.model_validate(raw)
    if isinstance(spec, CellsSpec):
        return CellsDomain(spec.d)
    if isinstance(spec, CategoriesSpec):
        return CategoriesDomain(tuple(spec.values), tuple(spec.aliases.items()), CaseRule(spec.case), spec.other)
    if isinstance(spec, RangesSpec):
        return RangesDomain(tuple(float(edge) for edge in spec.edges), spec.other)
    if isinstance(spec, GridSpec):
        return GridDomain(rows=spec.rows, cols=spec.cols, **spec.bbox.model_dump())
    return BinaryDomain()


class CapsSection(Section):
    """`caps:` (state.requirements.RequirementCaps, whose defaults these are)."""

    max_w: StrictInt = Field(RequirementCaps.max_w, ge=1)
    max_epsilon: float = Field(RequirementCaps.max_epsilon, gt=0)
    min_slot_epsilon: float = Field(RequirementCaps.min_slot_epsilon, allow_inf_nan=False)

    @model_validator(mode="after")
    def _sampler_range(self) -> CapsSection:
        """The budget floor is within the noise sampler's range (docs/mechanisms.md, Budget floor)."""
        if self.min_slot_epsilon < SAMPLER_MIN_EPSILON:
            raise ValueError(f"caps.min_slot_epsilon {self.min_slot_epsilon!r} is below the noise sampler's range "
                             f"limit {SAMPLER_MIN_EPSILON:.4g}")
        return self


def _caps(raw: Any) -> RequirementCaps:
    if isinstance(raw, RequirementCaps):
        return raw
    return RequirementCaps(**CapsSection.model_validate(raw).model_dump())


def _file(raw: Any, info: ValidationInfo) -> str:
    """An existing file; relative paths are relative to the config file's folder."""
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"must be the path of a file, got {raw!r}")
    path = resolve_path(raw, info)
    if not os.path.isfile(path):
        raise ValueError(f"{path} is not a file")
    return path


FilePath = Annotated[str, PlainValidator(_file, json_schema_input_type=str)]


class Store(Section):
    """A Java key or trust store (Kafka's `ssl.keystore.*`, `ssl.truststore.*`)."""

    location: FilePath
    type: Literal["PKCS12", "JKS", "PEM"] = "PKCS12"
    password: SecretValue = Field(None, description="write ${ENV_VAR} or {file: PATH}")


class ClientCertificate(Section):
    """`client_cert` of `kafka.security` and of a `schema_registry`: the client's key and certificate
    for TLS client authentication, as PEM files for the Python clients and as a keystore for the
    job's Java ones."""

    cert_file: FilePath = Field(description="PEM certificate (chain) of the client: the Python clients")
    key_file: FilePath = Field(description="PEM private key of the client: the Python clients")
    key_password: SecretValue = Field(None, description="the private key's password, if it is encrypted "
                                      "(the key file's and the keystore's key; default: the keystore's password)")
    keystore: Store = Field(description="the same key and certificate for the job's Java clients")


class SchemaRegistrySection(Section):
    """`schema_registry:` of an input in the `avro-confluent` or `protobuf-confluent` format: where the
    writer schemas are, by the id in each record's frame (the Confluent REST API, `GET
    /schemas/ids/{id}`), with HTTP basic auth (`username`, `password`) or a bearer token (`token`), and
    over HTTPS the CA file its certificate must chain to (`ca_file`, else the system's CAs) and a
    client certificate (`client_cert`); of `release:` in a registered format, where the release's
    schema is registered (jobs/streaming/release_format.py). A registry that does not answer is asked
    again, with backoff, for `retry_for`; then the job's task fails (Flink restarts it,
    `flink.restart_strategy`) and the replay stops (docs/streaming.md, "Parsing"; docs/operations.md,
    "A long Schema Registry outage")."""

    url: Name = Field(pattern=r"^https?://", description="the registry's base URL, e.g. http://registry:8081")
    username: Name | None = None
    password: SecretValue = Field(None, description="write ${ENV_VAR} or {file: PATH}")
    token: SecretValue = Field(None, description="a bearer token: write ${ENV_VAR} or {file: PATH}")
    ca_file: FilePath | None = Field(None, description="PEM of the CA that signed the registry's certificate "
                                     "(https; default: the system's CAs)")
    client_cert: ClientCertificate | None = Field(None, description="TLS client authentication (https); the "
                                                  "keystore PKCS12 or JKS")
    timeout_ms: Duration = Field("10s", alias="timeout", validate_default=True, description="of one request")
    retry_for_ms: Duration = Field("5m", alias="retry_for", validate_default=True,
                                   description="how long an unanswered request is retried before the run fails")

    @model_validator(mode="after")
    def _auth(self) -> SchemaRegistrySection:
        if (self.username is None) != (self.password is None):
            raise ValueError("schema_registry.username and schema_registry.password go together")
        if self.token is not None and self.username is not None:
            raise ValueError("schema_registry.token (bearer) and schema_registry.username (basic) exclude each other")
        for key in ("ca_file", "client_cert"):
            if getattr(self, key) is not None and not self.url.startswith("https://"):
                raise ValueError(f"schema_registry.{key} needs an https:// url, got {self.url}")
        if self.client_cert is not None and self.client_cert.keystore.type == "PEM":
            raise ValueError("schema_registry.client_cert.keystore.type: the registry client's JVM reads PKCS12 or "
                             "JKS, not PEM")
        try:
            self.tls_context()
        except (OSError, ssl.SSLError) as err:  # an unreadable CA file, a key that does not decrypt or match
            raise ValueError(f"schema_registry: the CA file or client certificate does not load: {err}") from None
        return self

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS settings of the Python client's requests to an https registry: `ca_file` (else the
        system's CAs) and `client_cert`; None for http."""
        if not self.url.startswith("https://"):
            return None
        context = ssl.create_default_context(cafile=self.ca_file)
        cert = self.client_cert
        if cert is not None:
            password = cert.key_password or cert.keystore.password
            context.load_cert_chain(cert.cert_file, cert.key_file, password.reveal if password is not None else None)
        return context

    def authorization(self) -> Secret | None:
        """The `Authorization` header of every request (Python's and the JVM's): HTTP basic of
        `username` and `password`, `Bearer` and `token`, or none."""
        if self.token is not None:
            return Secret(f"Bearer {self.token.reveal()}")
        if self.username is not None and self.password is not None:
            basic = base64.b64encode(f"{self.username}:{self.password.reveal()}".encode()).decode("ascii")
            return Secret(f"Basic {basic}")
        return None


class ProtobufSection(Section):
    """`protobuf:` of an input in the plain `protobuf` format: the message type of every record, by its
    full name (`package.Message`) in a descriptor set file (`protoc --descriptor_set_out`), both
    checked at load (jobs/common/protobuf_schema.py)."""

    descriptor_set: Name = Field(description="a descriptor set file (protoc --descriptor_set_out, "
                                 "--include_imports)")
    message: Name = Field(description="the records' message type, by its full name: package.Message")

    @field_validator("descriptor_set")
    @classmethod
    def _readable(cls, path: str) -> str:
        load_descriptor_set(path)  # ValueError naming the file and what is wrong
        return path

    @field_validator("message")
    @classmethod
    def _known(cls, name: str, info: ValidationInfo) -> str:
        path = info.data.get("descriptor_set")
        if path is not None:
            message_type(load_descriptor_set(path), name, f"descriptor set {path}")
        return name


#: The input formats (docs/formats.md, "Input formats").
INPUT_FORMATS = ("json", "avro-confluent", "avro", "protobuf-confluent", "protobuf")
#: The formats whose schemas a Schema Registry serves by the id in each record's frame.
REGISTRY_FORMATS = ("avro-confluent", "protobuf-confluent")


#: How a `$key` mapping reads the Kafka key (docs/formats.md, "Whole Kafka records").
KEY_FORMATS = ("string", "json", "avro-confluent")


class InputFormat(Section):
    """How an input's record values are encoded: `json` (a Confluent frame taken off if present),
    `avro-confluent` (the Confluent wire format, writer schemas from `schema_registry`), `avro`
    (plain Avro binary, the writer schema in `schema_file`, an .avsc file), `protobuf-confluent` (the
    Confluent wire format with message indexes, `.proto` schemas from `schema_registry`) or `protobuf`
    (plain Protobuf, the message type in `protobuf`). Avro and Protobuf records are decoded, then read
    by the same field paths and rules as JSON ones (jobs/common/avro_format.py,
    jobs/common/protobuf_format.py). An input whose mappings name a part of the Kafka record (`$key`,
    `$timestamp`, `$headers.<name>`) is read as whole records (jobs/common/kafka_record.py), its key
    as `key_format` says: `string` (UTF-8 text), `json` or `avro-confluent` (writer schemas from
    `schema_registry`)."""

    format: Literal["json", "avro-confluent", "avro", "protobuf-confluent", "protobuf"] = "json"
    schema_file: Name | None = None
    schema_registry: SchemaRegistrySection | None = None
    key_format: Literal["string", "json", "avro-confluent"] | None = None
    protobuf: ProtobufSection | None = None

    @model_validator(mode="after")
    def _format_settings(self) -> InputFormat:
        if (self.format == "avro") != (self.schema_file is not None):
            raise ValueError("schema_file goes with format avro, and format avro needs it")
        registry_needs = [f"{name} {value}" for name, value in (("format", self.format),
                                                                ("key_format", self.key_format))
                          if value in REGISTRY_FORMATS]
        if bool(registry_needs) != (self.schema_registry is not None):
            verb = "needs" if len(registry_needs) == 1 else "need"
            needs = f"{' and '.join(registry_needs)} {verb} it" if registry_needs else "they need it"
            raise ValueError("schema_registry goes with formats avro-confluent and protobuf-confluent (and "
                             f"key_format avro-confluent), and {needs}")
        if (self.format == "protobuf") != (self.protobuf is not None):
            raise ValueError("protobuf (descriptor_set, message) goes with format protobuf, and format protobuf "
                             "needs it")
        if self.schema_file is not None:
            load_schema_file(self.schema_file)  # ValueError naming the file and what is wrong
        return self

    def mappings(self) -> dict[str, str]:
        """The input's field mappings by key (`user`, `time`, ...), those that are set."""
        return {}

    @cached_property
    def record_fields(self) -> dict[str, RecordField]:
        """The mappings that name a part of the Kafka record, by key."""
        found = {name: record_field(text) for name, text in self.mappings().items()}
        return {name: field for name, field in found.items() if field is not None}

    @cached_property
    def whole_records(self) -> bool:
        """Whether the input is read as whole Kafka records (a mapping names a part of the record)."""
        return bool(self.record_fields)

    @property
    def key_decoding(self) -> str:
        """How the key is read: `key_format`, `string` by default."""
        return self.key_format or "string"

    def _check_record_fields(self, section: str) -> None:
        """ValueError naming the mapping: a `$key.<path>` of a string key, a `key_format` without a
        `$key` mapping."""
        keyed = {name: field for name, field in self.record_fields.items() if field.part is RecordPart.KEY}
        for name, field in keyed.items():
            if field.keys and self.key_decoding == "string":
                raise ValueError(f"{section}.{name}: {self.mappings()[name]!r} is a path inside the key, and a "
                                 f"string key has none (set {section}.key_format: json or avro-confluent)")
        if self.key_format is not None and not keyed:
            raise ValueError(f"{section}.key_format: no mapping reads the key ($key)")


class EventFields(InputFormat):
    """Which JSON field of an event holds what, as field paths (`payload.user_id`). `value` or both
    `lat` and `lon` (grid domains)."""

    user: FieldPath = "user"
    time: FieldPath = "time"
    value: FieldPath = "value"
    lat: FieldPath | None = None
    lon: FieldPath | None = None

    def mappings(self) -> dict[str, str]:
        values = {"lat": self.lat, "lon": self.lon} if self.lat and self.lon else {"value": self.value}
        return {key: path for key, path in {"user": self.user, "time": self.time, **values}.items() if path is not None}

    @model_validator(mode="after")
    def _lat_lon(self) -> EventFields:
        if (self.lat is None) != (self.lon is None):
            raise ValueError("events.lat and events.lon go together")
        check_disjoint({f"events.{key}": path for key, path in self.mappings().items()})
        self._check_record_fields("events")
        return self


#: A statistic's name: what its releases and spend lines carry (letters, digits, `_`, `-`).
STATISTIC_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"


class StatisticSection(Section):
    """One statistic of `statistics:`: its name, its domain, where an event holds its value (`value`,
    or `lat` and `lon` for a grid; field paths, as in `events:`) and its share of every user's
    budget (the shares of all statistics add up to at most 1; without any, equal shares)."""

    name: StrictStr = Field(pattern=STATISTIC_NAME)
    domain: Annotated[Domain, PlainValidator(_domain, json_schema_input_type=DomainSpec)]
    value: FieldPath | None = None
    lat: FieldPath | None = None
    lon: FieldPath | None = None
    share: float | None = Field(None, gt=0, le=1)

    @model_validator(mode="after")
    def _value_fields(self) -> StatisticSection:
        if (self.lat is None) != (self.lon is None):
            raise ValueError("lat and lon go together")
        if (self.value is None) == (self.lat is None):
            raise ValueError("give value, or lat and lon (a grid's coordinates), not both")
        return self


@dataclass(frozen=True)
class Statistic:
    """What one released histogram counts: its name (None: the configuration's one statistic,
    `domain:` and `events:`, whose records carry no name), its domain, the event fields its value
    is read from, and its share of every user's requirement (docs/mechanisms.md, "Several
    statistics under one budget")."""

    name: str | None
    domain: Domain
    events: EventFields
    share: float = 1.0


#: Shares may add up to 1 plus this (0.1 + 0.2 + 0.7 is 1 + 2.2e-16 in floats); far inside the
#: relative precision of every budget comparison (state.requirements.RELATIVE_TOLERANCE).
SHARE_SUM_SLACK = 1e-12


class SignatureSection(Section):
    """`requirements.signature:` (jobs.common.provenance)."""

    key_env: Name
    field: Name = "sig"


def _signature(raw: Any) -> RequirementSignature | None:
    """The signature every requirement record must carry; its key must be set now (a missing key is a
    configuration error, not a rejected record later)."""
    if raw is None or isinstance(raw, RequirementSignature):
        return raw
    section = SignatureSection.model_validate(raw)
    signature = RequirementSignature(section.key_env, section.field)
    signature.key()  # MissingKeyError (a ValueError naming requirements.signature.key_env)
    return signature


class RequirementPart(Section):
    """Field paths of a requirement's window and budget: the fixed one's (`requirements.w`,
    `requirements.epsilon`) or one side of a dynamic one (`requirements.backward`, `.forward`)."""

    w: ValuePath
    epsilon: ValuePath

    @property
    def marks(self) -> tuple[tuple[str, ...], ...]:
        """Where a record shows that it holds this part: the keys its two paths share (`backward` by
        default), or the two paths themselves when they share none."""
        w, epsilon = field_path(self.w), field_path(self.epsilon)
        shared = next((n for n in range(min(len(w), len(epsilon))) if w[n] != epsilon[n]), min(len(w), len(epsilon)))
        return (w[:shared],) if shared else (w, epsilon)


class RequirementFields(InputFormat):
    """Field paths of a requirement record's user, time and requirement (a fixed `w` and `epsilon`, or
    a dynamic `backward` and `forward` each with its `w` and `epsilon`), and the signature every
    record must carry, if any (jobs.common.provenance)."""

    user: FieldPath = "user"
    time: FieldPath = "time"
    w: ValuePath = "w"
    epsilon: ValuePath = "epsilon"
    backward: RequirementPart = RequirementPart(w="backward.w", epsilon="backward.epsilon")
    forward: RequirementPart = RequirementPart(w="forward.w", epsilon="forward.epsilon")
    signature: Annotated[RequirementSignature | None,
                         PlainValidator(_signature, json_schema_input_type=SignatureSection | None)] = None

    @property
    def fixed(self) -> RequirementPart:
        """The paths of a fixed requirement."""
        return RequirementPart(w=self.w, epsilon=self.epsilon)

    def mappings(self) -> dict[str, str]:
        return {"user": self.user, "time": self.time, "w": self.w, "epsilon": self.epsilon,
                **{f"{side}.{key}": getattr(getattr(self, side), key)
                   for side in ("backward", "forward") for key in ("w", "epsilon")}}

    @model_validator(mode="after")
    def _paths(self) -> RequirementFields:
        check_disjoint({f"requirements.{key}": path for key, path in self.mappings().items()})
        self._check_record_fields("requirements")
        for side in ("backward", "forward"):
            for mark in getattr(self, side).marks:
                for key in ("user", "time", "w", "epsilon"):
                    if mapping_slots(getattr(self, key))[:len(mark)] == mark:
                        raise ValueError(f"requirements.{key} ({getattr(self, key)!r}) lies where a record holds "
                                         f"its {side} requirement ({path_text(mark)!r}): every record would read "
                                         "as dynamic")
        if self.signature is not None and self.format != "json":
            raise ValueError("requirements.signature: signed requirement records are JSON (format json)")
        if self.signature is not None and self.whole_records:
            name, text = next((name, self.mappings()[name]) for name in self.record_fields)
            raise ValueError(f"requirements.signature: a signature covers the value only, and requirements.{name} "
                             f"({text!r}) is outside it: map the user and time into the signed value")
        return self


class FixedRequirementSpec(Section):
    """A fixed requirement: window w and budget epsilon."""

    w: StrictInt = Field(ge=1)
    epsilon: float = Field(gt=0)


class DynamicRequirementSpec(Section):
    """A dynamic requirement: backward and forward (w, epsilon)."""

    backward: FixedRequirementSpec
    forward: FixedRequirementSpec


def _default_requirement(raw: Any) -> Requirement | DynamicRequirement | None:
    """`default_requirement:` parsed as a requirement record's requirement (state.requirements); the
    caps and the mechanism's rules are checked with the whole configuration (`Config._rules`)."""
    if raw is None or isinstance(raw, (Requirement, DynamicRequirement)):
        return raw
    if not isinstance(raw, dict):
        raise ValueError("default_requirement must be a mapping: {w: .., epsilon: ..} or {backward: .., forward: ..}")
    allowed = {"w", "epsilon", "backward", "forward"}
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        raise PydanticCustomError("unknown_key", "unknown key {key} (allowed: {allowed})",
                                  {"key": unknown[0], "allowed": ", ".join(sorted(allowed))})
    try:
        return parse_requirement(raw)
    except InvalidRequirementError as err:
        raise ValueError(f"default_requirement: {err}") from None


class PseudonymiseSection(Section):
    """`pseudonymise:` (jobs/common/pseudonyms.py): the HMAC key, at least 32 bytes."""

    key: SecretValue = Field(description="write ${ENV_VAR} or {file: PATH}; at least 32 bytes")


def _pseudonymise(raw: Any) -> Pseudonyms | None:
    """`pseudonymise:`, its key required and long enough (errors name `pseudonymise.key`)."""
    if raw is None or isinstance(raw, Pseudonyms):
        return raw
    key = PseudonymiseSection.model_validate(raw).key
    if not isinstance(key, Secret):
        raise ValueError("pseudonymise.key: missing (write ${ENV_VAR} or {file: PATH})")
    try:
        return Pseudonyms(key)
    except ValueError as err:
        raise ValueError(f"pseudonymise.key: {err}") from None


def _mechanism_schema(schema: dict[str, Any]) -> None:
    schema["enum"] = list(REGISTRY.names())


class Config(Section):
    """The validated configuration. `extra`: the sections jobs/streaming/settings.py validates (raw; may
    hold resolved secrets, so not in the repr). `options`: the mechanism's own section (registry)."""

    derived: ClassVar[frozenset[str]] = frozenset({"extra", "options"})

    mechanism: StrictStr = Field(DEFAULT_MECHANISM, json_schema_extra=_mechanism_schema)
    slot_ms: Duration = Field(alias="slot")
    origin_ms: Time = Field(alias="origin")
    domain: Annotated[Domain, PlainValidator(_domain, json_schema_input_type=DomainSpec)]
    window: StrictInt | None = Field(None, ge=1)
    epsilon: float | None = Field(None, gt=0)
    noise: Literal["opendp", "numpy-fast"] = "opendp"
    postprocess: Literal["kalman", "none"] = "kalman"
    caps: Annotated[RequirementCaps, PlainValidator(_caps, json_schema_input_type=CapsSection)] = Field(
        default_factory=RequirementCaps)
    events: EventFields = Field(default_factory=EventFields)
    requirements: RequirementFields = Field(default_factory=RequirementFields)
    extra: SkipJsonSchema[dict[str, Any]] = Field(default_factory=dict, repr=False)
    max_record_bytes: StrictInt = Field(DEFAULT_MAX_RECORD_BYTES, ge=64)
    options: SkipJsonSchema[dict[str, Any]] = Field(default_factory=dict)
    default_requirement: Annotated[
        Requirement | DynamicRequirement | None,
        PlainValidator(_default_requirement,
                       json_schema_input_type=FixedRequirementSpec | DynamicRequirementSpec | None)] = None
    pseudonyms: Annotated[Pseudonyms | None, PlainValidator(
        _pseudonymise, json_schema_input_type=PseudonymiseSection | None)] = Field(None, alias="pseudonymise")
    statistic_sections: list[StatisticSection] | None = Field(
        None, alias="statistics", min_length=1,
        description="several statistics released under one budget, each with its name, domain, value fields and "
                    "share; replaces domain and events.value/lat/lon (docs/mechanisms.md)")

    @classmethod
    def input_keys(cls) -> set[str]:
        return super().input_keys() | EXTRA_SECTIONS | {e.section for e in REGISTRY if e.section is not None}

    @classmethod
    def derive(cls, raw: dict[str, Any]) -> dict[str, Any]:
        """The registry's rules on the top-level keys: a personalized mechanism refuses the global
        window/epsilon, a mechanism section belongs to its mechanism only (docs/mechanisms.md, "The
        mechanism registry"); that section becomes `options`, the streaming sections `extra`."""
        name = raw.get("mechanism", DEFAULT_MECHANISM)
        entry = REGISTRY.get(name)  # a ValueError that lists the names
        for key in sorted(GLOBAL_KEYS - entry.config_keys):
            if key in raw:
                takers = ", ".join(e.name for e in REGISTRY if key in e.config_keys)
                raise ValueError(
                    f"{key}: mechanism {name} is personalized (every user runs at its own requirement), so a "
                    f"global {key} would be ignored; remove it (only {takers} take it)"
                )
        sections = {e.section for e in REGISTRY if e.section is not None}
        for other in REGISTRY:
            if other.section in raw and other.section not in entry.config_keys:
                raise ValueError(f"{other.section}: only mechanism {other.name} takes it, not {entry.name}")
        options = {} if entry.section is None else raw.get(entry.section, {})
        if not isinstance(options, dict):
            raise ValueError(f"{entry.section} must be a mapping")
        out = {key: value for key, value in raw.items() if key not in sections | EXTRA_SECTIONS}
        if raw.get("statistics") is not None:
            out = cls._statistics_domain(out)
        return {**out, "extra": {key: raw[key] for key in EXTRA_SECTIONS if key in raw}, "options": options}

    @staticmethod
    def _statistics_domain(raw: dict[str, Any]) -> dict[str, Any]:
        """With `statistics:`, each statistic has its domain and value fields: `domain` and
        `events.value`/`lat`/`lon` are refused (not ignored); `domain` is then the first statistic's,
        for what reads one domain (the streaming job, which refuses several statistics)."""
        if "domain" in raw:
            raise ValueError("domain: with statistics, each statistic names its own domain; remove the top-level one")
        events = raw.get("events")
        taken = sorted(key for key in ("value", "lat", "lon") if isinstance(events, dict) and key in events)
        if taken:
            raise ValueError(f"events.{taken[0]}: with statistics, each statistic names its own value fields; "
                             "remove it from events")
        statistics = raw["statistics"]
        if not isinstance(statistics, list) or not statistics:
            raise ValueError("statistics: a list of at least one statistic ({name, domain, value or lat and lon, "
                             "share}); without the key, domain: and events: give the one statistic")
        first = statistics[0]
        return {**raw, "domain": first.get("domain") if isinstance(first, dict) else None}

    @property
    def statistics(self) -> tuple[Statistic, ...]:
        """The statistics released every slot: `statistics:`, or the one of `domain:` and `events:`."""
        sections = self.statistic_sections
        if sections is None:
            return (Statistic(None, self.domain, self.events),)
        equal = 1.0 / len(sections)
        return tuple(
            Statistic(section.name, section.domain,
                      self.events.model_copy(update={"value": section.value or "value", "lat": section.lat,
                                                     "lon": section.lon}),
                      equal if section.share is None else section.share)
            for section in sections)

    def _check_statistics(self) -> None:
        """Names differ, shares all given or none, adding up to at most 1, value fields outside the
        user's and time's."""
        sections = self.statistic_sections or []
        names: set[str] = set()
        for index, section in enumerate(sections):
            where = f"statistics[{index}]"
            if section.name in names:
                raise ValueError(f"{where}.name: {section.name!r} names two statistics")
            names.add(section.name)
            if (section.share is None) != (sections[0].share is None):
                raise ValueError(f"{where}.share: give every statistic a share, or none (equal shares)")
            values = {"value": section.value} if section.value else {"lat": section.lat, "lon": section.lon}
            check_disjoint({"events.user": self.events.user, "events.time": self.events.time,
                            **{f"{where}.{key}": path for key, path in values.items() if path is not None}})
        total = sum(section.share or 0.0 for section in sections)
        if total > 1.0 + SHARE_SUM_SLACK:
            raise ValueError(f"statistics[{len(sections) - 1}].share: the shares add up to {total:.12g}, more than "
                             "1: every user's window would spend more than its budget E")

    @model_validator(mode="after")
    def _rules(self) -> Config:
        """What needs several keys: a baseline's global requirement (present, above the budget floor),
        the mechanism's section, the default requirement (within the caps, acceptable to the
        mechanism, so that applying it can never be refused: docs/streaming.md, "Users without a
        requirement record")."""
        entry = REGISTRY.get(self.mechanism)
        if entry.config_keys >= GLOBAL_KEYS:
            if self.window is None or self.epsilon is None:
                raise ValueError(f"mechanism {self.mechanism} needs the keys window and epsilon")
            try:
                self.caps.check_floor(Requirement(self.window, self.epsilon))
            except InvalidRequirementError as err:
                raise ValueError(f"window and epsilon (the global requirement): {err}") from None
        try:
            spec = entry.spec(self.window, self.epsilon, self.options, self.clock.day)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{entry.section or 'mechanism'}: {err}") from None
        self._check_statistics()
        if self.default_requirement is not None:
            try:
                self.caps.check(self.default_requirement)
                RequirementRules(spec, self.caps.max_w).ledger_requirement(self.default_requirement)
            except InvalidRequirementError as err:
                raise ValueError(f"default_requirement: {err}") from None
        return self

    @property
    def clock(self) -> SlotClock:
        return SlotClock(self.origin_ms, self.slot_ms)

    def smoother(self, statistic: Statistic | None = None) -> KalmanSmoother | None:
        """The configured post-processing of a statistic's releases (default: the first), fresh (None
        when `postprocess: none`)."""
        domain = (statistic or self.statistics[0]).domain
        return KalmanSmoother(domain.d) if self.postprocess == "kalman" else None

    def mechanism_spec(self) -> MechanismSpec:
        """A fresh mechanism (its policy may hold state, such as Adaptive's family: one per engine)."""
        return REGISTRY.spec(self.mechanism, self.window, self.epsilon, self.options, self.clock.day)


_ENV_REFERENCE = re.compile(r"\$(\$)?\{([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def resolve_env(raw: Any, where: str = "") -> Any:
    """`raw` with every `${NAME}` in its string values replaced by the environment variable NAME."""
    if isinstance(raw, dict):
        return {key: resolve_env(value, f"{where}{key}" if not where else f"{where}.{key}")
                for key, value in raw.items()}
    if isinstance(raw, list):
        return [resolve_env(value, f"{where}[{n}]") for n, value in enumerate(raw)]
    if not isinstance(raw, str) or "${" not in raw:
        return raw

    def substitute(match: re.Match[str]) -> str:
        if match.group(1):  # $${...}: a literal ${...}
            return "${" + match.group(2) + "}"
        name = match.group(2)
        if not _ENV_NAME.fullmatch(name):
            raise ConfigError(f"{where or 'config'}: ${{{name}}} is not an environment variable reference")
        if name not in os.environ:
            raise ConfigError(f"{where or 'config'}: environment variable {name} is not set")
        return os.environ[name]

    return _ENV_REFERENCE.sub(substitute, raw)


def parse_config(raw: Any) -> Config:
    """The configuration of a parsed YAML document, its `${NAME}` resolved first."""
    try:
        return Config.model_validate(resolve_env(raw))
    except ValidationError as err:
        raise config_error(err) from None


def load_config(path: str) -> Config:
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except OSError as err:
        raise ConfigError(f"cannot read config {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"config {path} is not valid YAML: {err}") from None
    return parse_config(raw)
