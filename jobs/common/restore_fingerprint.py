"""What a restored job must share with the job whose state it takes over (docs/operations.md,
"Savepoints, upgrades and rescaling").

The state of a running job (ledgers, release history, population, the smoother) only means what it
means under the configuration that wrote it: a different slot length or origin renumbers every slot,
a different domain changes the histograms' shape, a different mechanism, mechanism section (e.g.
`adaptive:`) or cap reads the ledgers
under other rules. The job keeps this fingerprint in its state and refuses a restore whose
configuration differs in any of these fields, naming the field. With `pseudonymise`, the state's user
ids are pseudonyms under one key: the fingerprint then also holds `pseudonyms`, the pseudonym of a
fixed text (KEY_TAG_TEXT) under that key, which tells keys apart without revealing them, so a restore
that switches the setting on or off or changes the key (every user would come back as a new one,
with a fresh budget) is refused; without the setting the field is absent, as in the fingerprints of
earlier releases. Everything else in the configuration
(parallelism, checkpointing, Kafka client settings, parsing limits, field names) may change.

Next to the configuration, the fingerprint holds the job's state version, `JOB_STATE_VERSION`: the
layout of the whole job's state (every operator's, Java and Python). A release that changes that
layout so that an earlier release's savepoint cannot be read bumps it, and a restore of state of
another version is refused with the way out (docs/operations.md, "State versions").
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from pwevent.jobs.common.config import Config
from pwevent.operators.domain import Domain

#: The layout of the job's state this release writes and reads (docs/operations.md, "State versions").
JOB_STATE_VERSION = 1
#: The state version of a fingerprint that holds none: written by the releases before the state
#: version existed whose savepoints this layout reads (the older ones' Flink refuses before this check).
UNVERSIONED_STATE = 1
#: The key of the state version in the stored fingerprint.
STATE_VERSION_KEY = "state_version"

#: The fingerprint's fields, in the order a refusal names them.
FIELDS = ("mechanism", "window", "epsilon", "options", "origin_ms", "slot_ms", "domain", "caps", "noise", "postprocess")
#: The text whose pseudonym stands for the key in the fingerprint (`pseudonyms`).
KEY_TAG_TEXT = "pwevent:restore-fingerprint"


class RestoreMismatchError(RuntimeError):
    """A restore whose configuration differs from the restored state's in a fingerprinted field."""


class StateVersionError(RestoreMismatchError):
    """A restore of state written under another state version than this release's."""


def _describe_domain(config: Config) -> str:
    return _describe(config.domain)


def _describe(domain: Domain) -> str:
    return json.dumps({"type": type(domain).__name__, **dataclasses.asdict(domain)}, sort_keys=True, default=str)


@dataclass(frozen=True)
class RestoreFingerprint:
    """The fingerprinted fields of one configuration, each as a canonical string, and the state version
    of the state they describe."""

    values: tuple[tuple[str, str], ...]
    state_version: int

    @classmethod
    def of(cls, config: Config) -> RestoreFingerprint:
        caps = config.caps
        raw = {
            "mechanism": config.mechanism,
            "window": json.dumps(config.window),
            "epsilon": json.dumps(config.epsilon),
            "options": json.dumps(config.options, sort_keys=True, default=str),
            "origin_ms": str(config.origin_ms),
            "slot_ms": str(config.slot_ms),
            "domain": _describe_domain(config),
            "caps": json.dumps({"max_w": caps.max_w, "max_epsilon": caps.max_epsilon,
                                "min_slot_epsilon": caps.min_slot_epsilon}, sort_keys=True),
            "noise": config.noise,
            "postprocess": config.postprocess,
        }
        values = tuple((name, raw[name]) for name in FIELDS)
        if config.pseudonyms is not None:
            values += (("pseudonyms", config.pseudonyms.of(KEY_TAG_TEXT)),)
        if len(config.statistics) > 1:  # several statistics: names, domains, value fields and shares
            values += (("statistics", json.dumps([[s.name, _describe(s.domain), s.events.value, s.events.lat,
                                                    s.events.lon, s.share] for s in config.statistics])),)
        return cls(values, JOB_STATE_VERSION)

    def to_json(self) -> str:
        return json.dumps({**dict(self.values), STATE_VERSION_KEY: str(self.state_version)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RestoreFingerprint:
        stored = json.loads(text)
        if not isinstance(stored, dict) or not all(isinstance(v, str) for v in stored.values()):
            raise ValueError(f"not a restore fingerprint: {text[:200]!r}")
        version = stored.pop(STATE_VERSION_KEY, str(UNVERSIONED_STATE))
        if not version.isdigit():
            raise ValueError(f"not a state version: {version!r}")
        return cls(tuple((str(k), v) for k, v in stored.items()), int(version))

    def differences(self, stored: RestoreFingerprint) -> list[tuple[str, str | None, str | None]]:
        """(field, value in the stored state, value now) of every field that differs; a field only
        one side knows (a fingerprint of another version) differs too."""
        now, then = dict(self.values), dict(stored.values)
        names = [*FIELDS, *sorted((set(now) | set(then)) - set(FIELDS))]
        return [(name, then.get(name), now.get(name)) for name in names if then.get(name) != now.get(name)]

    def check_restore(self, stored: RestoreFingerprint) -> None:
        """Raise StateVersionError when the stored state's version is not this one's, else
        RestoreMismatchError naming every changed field, the first one first."""
        if stored.state_version != self.state_version:
            raise StateVersionError(
                f"restore refused: savepoint of state version {stored.state_version}, this release reads state "
                f"version {self.state_version}: start a new job with new ledgers, on new release and audit topics "
                "(docs/operations.md, 'State versions', says which release restores which savepoint and what "
                "a new job costs)")
        changed = self.differences(stored)
        if changed:
            detail = "; ".join(f"{name}: state has {then}, configuration has {now}" for name, then, now in changed)
            raise RestoreMismatchError(
                f"restore refused: the configuration changed {changed[0][0]} ({detail}). The restored state "
                "only holds under the configuration that wrote it; start a new job on new topics instead "
                "(docs/operations.md, 'Savepoints, upgrades and rescaling', lists the changes a restore allows)")
