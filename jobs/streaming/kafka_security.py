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
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PlainValidator,
    StrictBool,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pwevent.jobs.common.config import ConfigError, Name, Section, config_error

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


def _secret(raw: Any) -> Secret | None:
    if raw is None or isinstance(raw, Secret):
        return raw
    if not isinstance(raw, str):
        raise ValueError("must be a string (write ${ENV_VAR} to take it from the environment)")
    return Secret(raw)


class KafkaSecurity(Section):
    """`kafka.security`; `ca_file` relative to the config file's folder (validation context `base_dir`)."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = "SCRAM-SHA-512"
    username: StrictStr | None = None
    password: Annotated[Secret | None, PlainValidator(_secret, json_schema_input_type=str | None)] = Field(
        None, description="write ${ENV_VAR}: the password stays out of the file")
    ca_file: Name | None = None
    check_hostname: StrictBool = True

    @field_validator("ca_file")
    @classmethod
    def _ca_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        protocol = info.data.get("protocol")
        if value is None:
            return None
        if protocol is not None and not protocol.endswith("SSL"):
            raise ValueError(f"kafka.security.ca_file needs protocol SSL or SASL_SSL, not {protocol}")
        if not os.path.isabs(value):
            value = str(Path((info.context or {}).get("base_dir") or ".").resolve() / value)
        if not os.path.isfile(value):
            raise ValueError(f"kafka.security.ca_file {value} is not a file")
        return value

    @model_validator(mode="after")
    def _credentials(self) -> KafkaSecurity:
        """A SASL protocol needs a username and a password (never shown); the others take neither."""
        if self.sasl:
            if not self.username:
                raise ValueError(f"kafka.security.username must be a non-empty string with protocol {self.protocol}")
            if self.password is None or not self.password.reveal():
                raise ValueError(f"kafka.security.password must be a non-empty string with protocol "
                                 f"{self.protocol} (write ${{ENV_VAR}} to take it from the environment)")
        elif self.username is not None or self.password is not None:
            raise ValueError(f"kafka.security.username and password need a SASL protocol, not {self.protocol}")
        return self

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def jvm_properties(self) -> dict[str, str]:
        """Java Kafka client properties of the job's Flink sources and sinks (the connector's
        relocated Kafka client: `SHADED_KAFKA`)."""
        props: dict[str, str] = {"security.protocol": self.protocol}
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
    """Validate `kafka.security` alone; messages name the key and never show the password."""
    try:
        return KafkaSecurity.model_validate(raw, context={"base_dir": base_dir})
    except ValidationError as err:
        raise config_error(err, "kafka.security") from None


def check_properties(properties: dict[str, Any]) -> None:
    """`kafka.properties` takes client tuning only: security settings have one place, `kafka.security`."""
    for key in properties:
        if key.startswith(SECURITY_PROPERTY_PREFIXES):
            raise ConfigError(f"kafka.properties.{key}: security settings go in kafka.security "
                              "(docs/operations.md, Security)")
