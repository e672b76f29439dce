"""The YAML configuration, validated once; every error names the offending key.

```yaml
mechanism: Adaptive       # the default; or any name of operators/registry.py (README table)
adaptive: {evidence: 240, static_drift: 0.001, start: Uniform}   # Adaptive only (docs/mechanisms.md section 14)
slot: 15m                 # slot length: 500ms, 60s, 15m, 1h, 1d ...
origin: 2024-01-01T00:00:00Z   # start of slot 1 (ISO-8601 or epoch ms)
domain: {type: grid, rows: 10, cols: 10, bbox: {min_lat: .., max_lat: .., min_lon: .., max_lon: ..}}
window: 120               # baselines only (an error for the others): the global w ...
epsilon: 0.6              # ... and E (every user's requirement must be at least as loose)
noise: opendp             # opendp (production) | numpy-fast (experiments; named in results)
postprocess: kalman       # kalman: releases also carry `smoothed` (a causal filter of the releases) | none
caps: {max_w: 1000, max_epsilon: 100,  # largest window / budget a user may declare
       min_slot_epsilon: 1.0e-14}       # per-slot budget floor (docs/mechanisms.md, Budget floor)
events: {user: user, time: time, value: value}           # JSON field names (or lat/lon)
requirements: {user: user, time: time}   # + signature: {key_env: PWEVENT_REQUIREMENT_KEY, field: sig}
default_requirement: {w: 10, epsilon: 1.0}   # optional: the requirement of a user seen in the events
                          # before any requirement record of theirs ({backward: .., forward: ..} for
                          # dynamic mechanisms; docs/streaming.md, "Users without a requirement record")
max_record_bytes: 65536   # largest input record (event, requirement) accepted; larger ones are rejected
```

Any string value may name environment variables, `${NAME}`, resolved at load (secrets such as
`kafka.security.password` stay out of the file; docs/operations.md, "Security"); a variable that is
not set is a configuration error naming the key and the variable. `$${` writes a literal `${`.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from pwevent.jobs.common.provenance import RequirementSignature
from pwevent.jobs.common.slots import SlotClock, parse_duration_ms, parse_time_ms
from pwevent.operators.domain import BinaryDomain, CategoriesDomain, CellsDomain, Domain, GridDomain
from pwevent.operators.noise import SAMPLER_MIN_EPSILON
from pwevent.operators.policies import MechanismSpec
from pwevent.operators.postprocess import KalmanSmoother
from pwevent.operators.registry import GLOBAL_KEYS, REGISTRY, MechanismEntry
from pwevent.state.errors import InvalidRequirementError
from pwevent.state.requirements import DynamicRequirement, Requirement, RequirementCaps, parse_requirement

#: The mechanism when the configuration names none (docs/mechanisms.md section 14).
DEFAULT_MECHANISM = "Adaptive"
#: Default largest input record, in bytes (`max_record_bytes`).
DEFAULT_MAX_RECORD_BYTES = 65_536


class ConfigError(ValueError):
    """An invalid configuration; the message names the key."""


@dataclass(frozen=True)
class EventFields:
    """Which JSON field of an event holds what. `value` or both `lat` and `lon` (grid domains)."""

    user: str = "user"
    time: str = "time"
    value: str = "value"
    lat: str | None = None
    lon: str | None = None


@dataclass(frozen=True)
class RequirementFields:
    """Field names of a requirement record, and the signature every record must carry, if any
    (jobs.common.provenance)."""

    user: str = "user"
    time: str = "time"
    signature: RequirementSignature | None = None


@dataclass(frozen=True)
class Config:
    mechanism: str
    slot_ms: int
    origin_ms: int
    domain: Domain
    window: int | None = None
    epsilon: float | None = None
    noise: str = "opendp"
    postprocess: str = "kalman"
    caps: RequirementCaps = field(default_factory=RequirementCaps)
    events: EventFields = field(default_factory=EventFields)
    requirements: RequirementFields = field(default_factory=RequirementFields)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # may hold resolved secrets
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES
    options: dict[str, Any] = field(default_factory=dict)
    default_requirement: Requirement | DynamicRequirement | None = None

    @property
    def clock(self) -> SlotClock:
        return SlotClock(self.origin_ms, self.slot_ms)

    def smoother(self) -> KalmanSmoother | None:
        """The configured post-processing of the releases, fresh (None when `postprocess: none`)."""
        return KalmanSmoother(self.domain.d) if self.postprocess == "kalman" else None

    def mechanism_spec(self) -> MechanismSpec:
        """A fresh mechanism (its policy may hold state, such as Adaptive's family: one per engine)."""
        return REGISTRY.spec(self.mechanism, self.window, self.epsilon, self.options)


TOP_KEYS = {
    "mechanism", "slot", "origin", "domain", "window", "epsilon", "noise", "postprocess", "caps", "events",
    "requirements", "max_record_bytes", "default_requirement",
}
#: Sections that other layers validate themselves (the streaming job's Kafka and Flink settings).
EXTRA_SECTIONS: set[str] = {"kafka", "flink"}  # validated by jobs/flink_config.stream_settings


def _only(section: str, obj: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ConfigError(f"{section} must be a mapping")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        where = f"{section}." if section != "config" else ""
        raise ConfigError(f"unknown key {where}{unknown[0]} (allowed: {', '.join(sorted(allowed))})")
    return obj


def _need(obj: dict[str, Any], key: str, section: str) -> Any:
    if key not in obj:
        raise ConfigError(f"missing key {section}{key}")
    return obj[key]


def _domain(obj: Any) -> Domain:
    obj = _only("domain", obj, {"type", "d", "values", "rows", "cols", "bbox"})
    kind = _need(obj, "type", "domain.")
    try:
        if kind == "binary":
            _only("domain", obj, {"type"})
            return BinaryDomain()
        if kind == "cells":
            _only("domain", obj, {"type", "d"})
            return CellsDomain(_need(obj, "d", "domain."))
        if kind == "categories":
            _only("domain", obj, {"type", "values"})
            values = _need(obj, "values", "domain.")
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise ConfigError("domain.values must be a list of strings")
            return CategoriesDomain(tuple(values))
        if kind == "grid":
            _only("domain", obj, {"type", "rows", "cols", "bbox"})
            box = _only("domain.bbox", _need(obj, "bbox", "domain."), {"min_lat", "max_lat", "min_lon", "max_lon"})
            coords = {k: _need(box, k, "domain.bbox.") for k in ("min_lat", "max_lat", "min_lon", "max_lon")}
            for key, value in coords.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ConfigError(f"domain.bbox.{key} must be a number, got {value!r}")
            return GridDomain(rows=_need(obj, "rows", "domain."), cols=_need(obj, "cols", "domain."), **coords)
    except ValueError as err:
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(str(err)) from None
    raise ConfigError(f"domain.type must be binary, cells, categories or grid, got {kind!r}")


def _check_floor(caps: RequirementCaps, entry: MechanismEntry, window: int | None, epsilon: float | None) -> None:
    """caps.min_slot_epsilon: a number within the noise sampler's range that a baseline's global
    requirement can reach (docs/mechanisms.md, Budget floor)."""
    floor = caps.min_slot_epsilon
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not math.isfinite(floor):
        raise ConfigError(f"caps.min_slot_epsilon must be a finite number, got {floor!r}")
    if floor < SAMPLER_MIN_EPSILON:
        raise ConfigError(
            f"caps.min_slot_epsilon {floor!r} is below the noise sampler's range limit {SAMPLER_MIN_EPSILON:.4g}"
        )
    if not entry.personalized and window is not None and epsilon is not None:
        try:
            caps.check_floor(Requirement(window, epsilon))
        except InvalidRequirementError as err:
            raise ConfigError(f"window and epsilon (the global requirement): {err}") from None


def _requirement_fields(obj: Any) -> RequirementFields:
    obj = dict(_only("requirements", obj, {"user", "time", "signature"}))
    if "signature" not in obj:
        return RequirementFields(**obj)
    sig = _only("requirements.signature", obj.pop("signature"), {"key_env", "field"})
    try:
        signature = RequirementSignature(_need(sig, "key_env", "requirements.signature."), sig.get("field", "sig"))
        signature.key()  # a missing key is a configuration error now, not a rejected record later
    except ValueError as err:  # ConfigError, a bad field, or MissingKeyError
        raise ConfigError(str(err)) from None
    return RequirementFields(**obj, signature=signature)


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


def _options(raw: dict[str, Any], entry: MechanismEntry) -> dict[str, Any]:
    """The mechanism's own section ({} when absent); another mechanism's section is an error."""
    for other in REGISTRY:
        if other.section is not None and other.section in raw and other.section not in entry.config_keys:
            raise ConfigError(f"{other.section}: only mechanism {other.name} takes it, not {entry.name}")
    if entry.section is None:
        return {}
    return dict(_only(entry.section, raw.get(entry.section, {}), set(entry.section_keys)))


def parse_config(raw: Any) -> Config:
    sections = {e.section for e in REGISTRY if e.section is not None}
    raw = _only("config", resolve_env(raw), TOP_KEYS | EXTRA_SECTIONS | sections)
    name = raw.get("mechanism", DEFAULT_MECHANISM)
    try:
        entry = REGISTRY.get(name)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    for key in sorted(GLOBAL_KEYS - entry.config_keys):
        if key in raw:
            takers = ", ".join(e.name for e in REGISTRY if key in e.config_keys)
            raise ConfigError(
                f"{key}: mechanism {name} is personalized (every user runs at its own requirement), so a "
                f"global {key} would be ignored; remove it (only {takers} take it)"
            )
    try:
        slot_ms = parse_duration_ms(_need(raw, "slot", ""), "slot")
        origin_ms = parse_time_ms(_need(raw, "origin", ""), "origin")
    except ValueError as err:
        raise ConfigError(str(err)) from None
    window, epsilon = raw.get("window"), raw.get("epsilon")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise ConfigError(f"window must be an integer >= 1, got {window!r}")
    if epsilon is not None and (isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon > 0):
        raise ConfigError(f"epsilon must be a number > 0, got {epsilon!r}")
    if entry.config_keys >= GLOBAL_KEYS and (window is None or epsilon is None):
        raise ConfigError(f"mechanism {name} needs the keys window and epsilon")
    noise = raw.get("noise", "opendp")
    if noise not in ("opendp", "numpy-fast"):
        raise ConfigError(f"noise must be opendp or numpy-fast, got {noise!r}")
    postprocess = raw.get("postprocess", "kalman")
    if postprocess not in ("kalman", "none"):
        raise ConfigError(f"postprocess must be kalman or none, got {postprocess!r}")
    caps_raw = _only("caps", raw.get("caps", {}), {"max_w", "max_epsilon", "min_slot_epsilon"})
    caps = RequirementCaps(**caps_raw)
    if isinstance(caps.max_w, bool) or not isinstance(caps.max_w, int) or caps.max_w < 1:
        raise ConfigError(f"caps.max_w must be an integer >= 1, got {caps.max_w!r}")
    if not isinstance(caps.max_epsilon, (int, float)) or not caps.max_epsilon > 0:
        raise ConfigError(f"caps.max_epsilon must be a number > 0, got {caps.max_epsilon!r}")
    _check_floor(caps, entry, window, epsilon)
    events = EventFields(**_only("events", raw.get("events", {}), {"user", "time", "value", "lat", "lon"}))
    if (events.lat is None) != (events.lon is None):
        raise ConfigError("events.lat and events.lon go together")
    requirements = _requirement_fields(raw.get("requirements", {}))
    extra = {k: raw[k] for k in EXTRA_SECTIONS if k in raw}
    max_bytes = raw.get("max_record_bytes", DEFAULT_MAX_RECORD_BYTES)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 64:
        raise ConfigError(f"max_record_bytes must be an integer >= 64, got {max_bytes!r}")
    options = _options(raw, entry)
    try:
        spec = entry.spec(window, epsilon, options)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{entry.section or 'mechanism'}: {err}") from None
    default = _default_requirement(raw.get("default_requirement"), caps, spec)
    return Config(
        name, slot_ms, origin_ms, _domain(_need(raw, "domain", "")), window,
        None if epsilon is None else float(epsilon), noise, postprocess, caps, events, requirements, extra, max_bytes,
        options, default,
    )


def _default_requirement(obj: Any, caps: RequirementCaps,
                         spec: MechanismSpec) -> Requirement | DynamicRequirement | None:
    """`default_requirement`: what a requirement record would carry (w/epsilon, or backward/forward
    for a dynamic mechanism), within the caps and acceptable to the mechanism, so that applying it
    can never be refused (docs/streaming.md, "Users without a requirement record")."""
    if obj is None:
        return None
    # Imported here: requirement_rules imports records, which imports this module.
    from pwevent.jobs.common.requirement_rules import RequirementRules

    if not isinstance(obj, dict):
        raise ConfigError("default_requirement must be a mapping: {w: .., epsilon: ..} or {backward: .., forward: ..}")
    _only("default_requirement", obj, {"w", "epsilon", "backward", "forward"})
    try:
        requirement = parse_requirement(obj)
        caps.check(requirement)
        RequirementRules(spec, caps.max_w).ledger_requirement(requirement)
    except InvalidRequirementError as err:
        raise ConfigError(f"default_requirement: {err}") from None
    return requirement


def load_config(path: str) -> Config:
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except OSError as err:
        raise ConfigError(f"cannot read config {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"config {path} is not valid YAML: {err}") from None
    return parse_config(raw)
