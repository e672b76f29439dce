"""The `kafka.security` section: one description of how every client of the job authenticates, turned
into the Java client properties of the job's Flink sources and sinks and into the kafka-python
arguments of the Python tools (produce, tail, create-topics, the refusal to start twice).
docs/operations.md, "Security".

```yaml
kafka:
  security:
    protocol: SASL_SSL             # PLAINTEXT (default) | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl_mechanism: SCRAM-SHA-512  # SCRAM-SHA-512 (default) | SCRAM-SHA-256 | PLAIN
    username: pwevent-job
    password: ${PWEVENT_KAFKA_PASSWORD}   # from the environment, never written in the file
    ca_file: tls/ca.pem            # PEM of the CA that signed the brokers' certificates (relative paths:
                                   # relative to the config file's folder); default: the system's CAs
    check_hostname: true           # the broker's certificate must name the host of the bootstrap address
```

The password is held in a `Secret`, whose repr hides it, so that neither a printed settings object
nor an error message shows it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pwevent.jobs.common.config import ConfigError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
#: Java client property prefixes that belong to `kafka.security`, not `kafka.properties`.
SECURITY_PROPERTY_PREFIXES = ("security.", "sasl.", "ssl.")
#: The job's Java clients are those of flink-sql-connector-kafka, which relocates the Kafka client
#: classes under this package: a JAAS line must name the relocated login module.
SHADED_KAFKA = "org.apache.flink.kafka.shaded.org.apache.kafka"
_LOGIN_MODULES = {
    "SCRAM-SHA-512": "common.security.scram.ScramLoginModule",
    "SCRAM-SHA-256": "common.security.scram.ScramLoginModule",
    "PLAIN": "common.security.plain.PlainLoginModule",
}


@dataclass(frozen=True)
class Secret:
    """A credential: its repr and str never show the value; `reveal()` is the only way to read it."""

    _value: str

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


@dataclass(frozen=True)
class KafkaSecurity:
    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "SCRAM-SHA-512"
    username: str | None = None
    password: Secret | None = None
    ca_file: str | None = None
    check_hostname: bool = True

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def jvm_properties(self) -> dict[str, str]:
        """Java Kafka client properties of the job's Flink sources and sinks (the connector's
        relocated Kafka client: `SHADED_KAFKA`)."""
        props = {"security.protocol": self.protocol}
        if self.sasl:
            assert self.username is not None and self.password is not None
            props["sasl.mechanism"] = self.sasl_mechanism
            props["sasl.jaas.config"] = (f"{SHADED_KAFKA}.{_LOGIN_MODULES[self.sasl_mechanism]} required "
                                         f"username={_jaas_quote(self.username)} "
                                         f"password={_jaas_quote(self.password.reveal())};")
        if self.tls:
            if self.ca_file:
                props["ssl.truststore.type"] = "PEM"
                props["ssl.truststore.location"] = self.ca_file
            props["ssl.endpoint.identification.algorithm"] = "https" if self.check_hostname else ""
        return props

    def python_options(self) -> dict[str, Any]:
        """kafka-python keyword arguments (KafkaProducer, KafkaConsumer, KafkaAdminClient)."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            assert self.password is not None
            options.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.username,
                           sasl_plain_password=self.password.reveal())
        if self.tls:
            options["ssl_check_hostname"] = self.check_hostname
            if self.ca_file:
                options["ssl_cafile"] = self.ca_file
        return options


def _jaas_quote(value: str) -> str:
    """A JAAS option value in double quotes (backslash and quote escaped)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_security(raw: Any, base_dir: str | None) -> KafkaSecurity:
    """Validate `kafka.security`; messages name the key and never show the password."""
    if raw is None:
        return KafkaSecurity()
    if not isinstance(raw, dict):
        raise ConfigError("kafka.security must be a mapping")
    allowed = {"protocol", "sasl_mechanism", "username", "password", "ca_file", "check_hostname"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ConfigError(f"unknown key kafka.security.{unknown[0]} (allowed: {', '.join(sorted(allowed))})")
    protocol = raw.get("protocol", "PLAINTEXT")
    if protocol not in PROTOCOLS:
        raise ConfigError(f"kafka.security.protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    mechanism = raw.get("sasl_mechanism", "SCRAM-SHA-512")
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(f"kafka.security.sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, "
                          f"got {mechanism!r}")
    username, password = raw.get("username"), raw.get("password")
    sasl = protocol.startswith("SASL_")
    if sasl:
        if not isinstance(username, str) or not username:
            raise ConfigError(f"kafka.security.username must be a non-empty string with protocol {protocol}")
        if not isinstance(password, str) or not password:
            raise ConfigError(f"kafka.security.password must be a non-empty string with protocol {protocol} "
                              "(write ${ENV_VAR} to take it from the environment)")
    elif username is not None or password is not None:
        raise ConfigError(f"kafka.security.username and password need a SASL protocol, not {protocol}")
    ca_file = raw.get("ca_file")
    if ca_file is not None:
        if not protocol.endswith("SSL"):
            raise ConfigError(f"kafka.security.ca_file needs protocol SSL or SASL_SSL, not {protocol}")
        if not isinstance(ca_file, str) or not ca_file:
            raise ConfigError(f"kafka.security.ca_file must be a path, got {ca_file!r}")
        if not os.path.isabs(ca_file):
            ca_file = str(Path(base_dir or ".").resolve() / ca_file)
        if not os.path.isfile(ca_file):
            raise ConfigError(f"kafka.security.ca_file {ca_file} is not a file")
    check_hostname = raw.get("check_hostname", True)
    if not isinstance(check_hostname, bool):
        raise ConfigError(f"kafka.security.check_hostname must be true or false, got {check_hostname!r}")
    secret = Secret(password) if sasl and isinstance(password, str) else None
    return KafkaSecurity(protocol, mechanism, username if sasl else None, secret, ca_file, check_hostname)


def check_properties(properties: dict[str, Any]) -> None:
    """`kafka.properties` takes client tuning only: security settings have one place, `kafka.security`."""
    for key in properties:
        if key.startswith(SECURITY_PROPERTY_PREFIXES):
            raise ConfigError(f"kafka.properties.{key}: security settings go in kafka.security "
                              "(docs/operations.md, Security)")
