"""The `kafka.security` section: one description of how every client of the job authenticates, turned
into the Java client properties of the job's Flink sources and sinks and into the kafka-python
arguments of the Python tools (produce, tail, create-topics, the refusal to start twice).
docs/operations.md, "Security" (an example per mode there).

```yaml
kafka:
  security:
    protocol: SASL_SSL             # PLAINTEXT (default) | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl_mechanism: SCRAM-SHA-512  # SCRAM-SHA-512 (default) | SCRAM-SHA-256 | PLAIN | OAUTHBEARER | GSSAPI
                                   # | AWS_MSK_IAM (SASL_SSL, no credentials here: the AWS default chain)
    username: pwevent-job          # SCRAM and PLAIN
    password: ${PWEVENT_KAFKA_PASSWORD}   # a secret: ${ENV_VAR} or {file: PATH}, never written in the file
    oauth:                         # OAUTHBEARER: token_endpoint + client_id + client_secret (+ scope),
      token_endpoint: https://idp.example/oauth2/token   # or unsecured_subject (testing only)
      client_id: pwevent-job
      client_secret: {file: /var/run/secrets/pwevent/oauth-secret}
      extensions: {logicalCluster: lkc-abc123, identityPoolId: pool-xyz}   # SASL extensions (optional)
      login_callback_handler:      # optional: the Java clients' login callback handler of your own (it must
        class: com.example.kafka.TokenFileLoginHandler   # implement the relocated AuthenticateCallbackHandler),
        jars: [handlers/token-file-handler.jar]          # its jars, put on the job's class path, and JAAS
        options: {tokenFile: /var/run/secrets/kafka/token}   # options it reads (values as secrets); the
                                   # Python tools use the grant above (without one they refuse)
    kerberos: {principal: pwevent-job@EXAMPLE.COM, keytab: /etc/security/pwevent.keytab,
               service_name: kafka,   # GSSAPI (the Python clients need the `gssapi` package)
               krb5_conf: /etc/krb5.conf}   # optional: the Kerberos configuration (default the system's)
    ca_file: tls/ca.pem            # PEM of the CA that signed the brokers' certificates (relative paths:
                                   # relative to the config file's folder); default: the system's CAs
    truststore: {location: tls/truststore.p12, type: PKCS12, password: ${PWEVENT_TRUSTSTORE_PASSWORD}}
                                   # the Java clients' trust store instead of ca_file (optional)
    client_cert:                   # TLS client authentication (mTLS): PEM for the Python tools, a
      cert_file: tls/client.pem    # keystore for the Java clients (the same key and certificate)
      key_file: tls/client.key
      key_password: ${PWEVENT_KEY_PASSWORD}   # the private key's, if encrypted (both files)
      keystore: {location: tls/client.p12, type: PKCS12, password: ${PWEVENT_KEYSTORE_PASSWORD}}
    check_hostname: true           # the broker's certificate must name the host of the bootstrap address
    properties:                    # any other sasl.* / ssl.* Java client property the section does not
      ssl.enabled.protocols: TLSv1.3   # set, passed to the job's Java clients as it is; every value is held
      sasl.login.refresh.buffer.seconds: "120"   # as a secret: ${ENV_VAR}, {file: PATH} or text
```

Every secret is held in a `Secret`, whose repr hides it, so that neither a printed settings object
nor an error message shows it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
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

from pwevent.jobs.common.config import ClientCertificate, ConfigError, FilePath, Name, Section, Store, config_error
from pwevent.jobs.common.extras import AWS
from pwevent.jobs.common.secrets import Secret as Secret  # re-exported: the settings hold them
from pwevent.jobs.common.secrets import SecretFile, SecretValue, resolve_path, secret_value
from pwevent.jobs.streaming.kafka_kerberos import python_login
from pwevent.jobs.streaming.kafka_oauth import ClientCredentialsTokens, UnsecuredTokens

#: Java client property prefixes that belong to `kafka.security`, not `kafka.properties`.
SECURITY_PROPERTY_PREFIXES = ("security.", "sasl.", "ssl.")
#: Those `kafka.security.properties` passes through to the Java clients.
PASSED_PROPERTY_PREFIXES = ("sasl.", "ssl.")
#: The job's Java clients are those of flink-sql-connector-kafka, which relocates the Kafka client
#: classes under this package: a JAAS line or a callback handler must name the relocated class.
SHADED_KAFKA = "org.apache.flink.kafka.shaded.org.apache.kafka"
_LOGIN_MODULES = {
    "SCRAM-SHA-512": f"{SHADED_KAFKA}.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-256": f"{SHADED_KAFKA}.common.security.scram.ScramLoginModule",
    "PLAIN": f"{SHADED_KAFKA}.common.security.plain.PlainLoginModule",
    "OAUTHBEARER": f"{SHADED_KAFKA}.common.security.oauthbearer.OAuthBearerLoginModule",
    "GSSAPI": "com.sun.security.auth.module.Krb5LoginModule",  # the JDK's, not relocated
    "AWS_MSK_IAM": "software.amazon.msk.auth.iam.IAMLoginModule",  # AWS's, built relocated (jars.msk_iam_jar)
}
#: The Java clients' SASL client callback handler of AWS_MSK_IAM (AWS's; it implements the relocated
#: AuthenticateCallbackHandler in the jar deploy/local/build-msk-iam.sh builds).
MSK_IAM_CLIENT_HANDLER = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
#: The Java clients' login callback handler of the client-credentials grant (Kafka's own).
OAUTH_LOGIN_HANDLER = f"{SHADED_KAFKA}.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
#: The JVM system property that must list the token endpoint (Kafka >= 4.0 refuses other URLs), as
#: the relocated client reads it.
OAUTH_ALLOWED_URLS_PROPERTY = f"{SHADED_KAFKA}.sasl.oauthbearer.allowed.urls"
#: Where the JDK's Kerberos (the job's Java clients' Krb5LoginModule) reads its configuration.
KRB5_CONF_PROPERTY = "java.security.krb5.conf"


#: Kafka's patterns of a SASL extension's name and value (OAuthBearerClientInitialResponse).
_EXTENSION_NAME = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
#: A Java class's binary name (package and class, `$` for a nested one).
_JAVA_CLASS = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*")
#: A JAAS option name the section passes to a login callback handler.
_JAAS_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
#: JAAS options of the OAUTHBEARER login module that the section writes itself.
_OWN_JAAS_OPTIONS = ("clientId", "clientSecret", "scope")
_OWN_JAAS_PREFIXES = ("extension_", "unsecuredLogin")


def _passed_properties(raw: Any, info: ValidationInfo) -> dict[str, Secret]:
    """`kafka.security.properties`: `sasl.*` / `ssl.*` Java client property names to values, each
    held as a secret (written as text, `${ENV_VAR}` or `{file: PATH}`)."""
    def check(key: Any) -> None:
        if not isinstance(key, str) or not key.startswith(PASSED_PROPERTY_PREFIXES):
            raise ValueError(f"{key!r}: only sasl.* and ssl.* properties pass through (the others: kafka.properties)")

    return _secrets_by_name(raw, info, "sasl.* / ssl.* Java client property names", check)


def _secrets_by_name(raw: Any, info: ValidationInfo, names: str, check: Callable[[Any], None]) -> dict[str, Secret]:
    """A mapping of `names` (each passed to `check`, which raises ValueError for a name it refuses)
    to values held as secrets: text, a number or a boolean (as Java reads it), `${ENV_VAR}` or
    `{file: PATH}`; an error names the key."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ValueError(f"must be a mapping of {names} to values")
    out: dict[str, Secret] = {}
    for key, value in raw.items():
        check(key)
        if isinstance(value, (bool, int, float)):
            value = str(value).lower() if isinstance(value, bool) else str(value)
        try:
            secret = secret_value(value, info)
        except ValueError as err:
            raise ValueError(f"{key}: {err}") from None
        assert secret is not None
        out[key] = secret
    return out


PassedProperties = Annotated[dict[str, Secret], PlainValidator(
    _passed_properties, json_schema_input_type=dict[str, str | int | float | bool | SecretFile])]


def _jaas_options(raw: Any, info: ValidationInfo) -> dict[str, Secret]:
    """`kafka.security.oauth.login_callback_handler.options`: JAAS option names to values, each held
    as a secret (text, `${ENV_VAR}` or `{file: PATH}`); not the options the section writes itself."""
    def check(key: Any) -> None:
        if not isinstance(key, str) or not _JAAS_OPTION.fullmatch(key):
            raise ValueError(f"{key!r} is not a JAAS option name (a letter, then letters, digits, '_', '.', '-')")
        if key in _OWN_JAAS_OPTIONS or key.startswith(_OWN_JAAS_PREFIXES):
            raise ValueError(f"{key} is written by kafka.security.oauth itself (client_id, client_secret, scope, "
                             "extensions); set it there")

    return _secrets_by_name(raw, info, "JAAS option names", check)


JaasOptions = Annotated[dict[str, Secret], PlainValidator(
    _jaas_options, json_schema_input_type=dict[str, str | int | float | bool | SecretFile])]


class LoginCallbackHandler(Section):
    """`kafka.security.oauth.login_callback_handler`: the job's Java clients' login callback handler
    of your own (Kafka's `sasl.login.callback.handler.class`), loaded from `jars`, which the job puts
    on its class path (locally and in a cluster submission, like its other jars). The job's Kafka
    client is the connector's relocated one, so the class must implement
    `org.apache.flink.kafka.shaded.org.apache.kafka.common.security.auth.AuthenticateCallbackHandler`
    (docs/operations.md, "Security": a build recipe for a handler written against Kafka's own classes).
    `options` are JAAS options of the OAUTHBEARER login module, which the handler reads in `configure`."""

    class_name: Name = Field(alias="class", description=(
        "the handler's class: it must implement the relocated "
        "org.apache.flink.kafka.shaded.org.apache.kafka.common.security.auth.AuthenticateCallbackHandler"))
    jars: list[FilePath] = Field(default_factory=list, description=(
        "jars holding the handler and what it needs besides the Kafka client (relative paths: to the config "
        "file's folder); none when the cluster's class path has them"))
    options: JaasOptions = Field(default_factory=dict, description=(
        "JAAS options of the login module, which the handler reads; values as secrets"))

    @field_validator("class_name")
    @classmethod
    def _class_name(cls, value: str) -> str:
        if not _JAVA_CLASS.fullmatch(value):
            raise ValueError(f"kafka.security.oauth.login_callback_handler.class: {value!r} is not a Java class name")
        if value.startswith("org.apache.kafka."):
            relocated = SHADED_KAFKA + value.removeprefix("org.apache.kafka")
            raise ValueError(f"kafka.security.oauth.login_callback_handler.class: {value} is in Kafka's own package, "
                             f"which the job's Kafka client relocates: name {relocated} or a class built against "
                             "the relocated client (docs/operations.md, Security)")
        return value


class OAuth(Section):
    """`kafka.security.oauth` (OAUTHBEARER): the client-credentials grant against `token_endpoint`,
    or, for testing, an unsigned token of `unsecured_subject`."""

    token_endpoint: Name | None = None
    client_id: StrictStr | None = None
    client_secret: SecretValue = Field(None, description="write ${ENV_VAR} or {file: PATH}")
    scope: StrictStr | None = None
    unsecured_subject: Name | None = Field(None, description="TESTING ONLY: an unsigned JWS with this sub, "
                                           "accepted by a broker with Kafka's unsecured validator only")
    extensions: dict[str, StrictStr] = Field(default_factory=dict, description=(
        "SASL extensions sent with the token (e.g. Confluent Cloud's logicalCluster and identityPoolId): "
        "names of letters, values of printable ASCII"))
    login_callback_handler: LoginCallbackHandler | None = Field(None, description=(
        "the Java clients' own login callback handler (class, jars, JAAS options) instead of Kafka's "
        "client-credentials login; the Python tools use token_endpoint, client_id and client_secret if given"))

    @field_validator("extensions")
    @classmethod
    def _extensions(cls, value: dict[str, str]) -> dict[str, str]:
        """Kafka's rules for SASL extensions (OAuthBearerClientInitialResponse): a name of letters,
        not `auth`; a value of printable ASCII, spaces and tabs."""
        for name, text in value.items():
            if not _EXTENSION_NAME.fullmatch(name) or name == "auth":
                raise ValueError(f"kafka.security.oauth.extensions: {name!r} is not a SASL extension name "
                                 "(letters only, not 'auth')")
            if not _EXTENSION_VALUE.fullmatch(text):
                raise ValueError(f"kafka.security.oauth.extensions.{name}: the value must be printable ASCII")
        return value

    @model_validator(mode="after")
    def _one_way(self) -> OAuth:
        grant = (self.token_endpoint, self.client_id, self.client_secret, self.scope)
        if self.unsecured_subject is not None:
            if any(value is not None for value in grant) or self.login_callback_handler is not None:
                raise ValueError("kafka.security.oauth.unsecured_subject takes no token_endpoint, client_id, "
                                 "client_secret, scope or login_callback_handler")
            return self
        if self.token_endpoint is None:
            if self.login_callback_handler is not None and all(value is None for value in grant):
                return self  # the handler alone: the Python tools refuse (KafkaSecurity.python_options)
            raise ValueError("kafka.security.oauth needs token_endpoint (with client_id and client_secret), "
                             "unsecured_subject or login_callback_handler")
        if not self.token_endpoint.startswith(("https://", "http://")):
            raise ValueError(f"kafka.security.oauth.token_endpoint must be an http(s) URL, got "
                             f"{self.token_endpoint!r}")
        if not self.client_id:
            raise ValueError("kafka.security.oauth.client_id must be a non-empty string with a token_endpoint")
        if self.client_secret is None or not self.client_secret.reveal():
            raise ValueError("kafka.security.oauth.client_secret must be a non-empty secret with a token_endpoint "
                             "(write ${ENV_VAR} or {file: PATH})")
        return self


class Kerberos(Section):
    """`kafka.security.kerberos` (GSSAPI): the job's Java clients log in from the keytab as the
    principal, and so do pwevent's Python clients (`kafka_kerberos.python_login`; they need the
    `gssapi` package). krb5_conf: the Kerberos configuration of both (else the system's,
    /etc/krb5.conf)."""

    principal: Name
    keytab: FilePath
    service_name: Name = "kafka"
    krb5_conf: FilePath | None = Field(None, description="Kerberos configuration (krb5.conf) of the job's "
                                       "Java and Python clients; default: the system's (/etc/krb5.conf)")


_SASL_SECTIONS = {"SCRAM-SHA-512": "username", "SCRAM-SHA-256": "username", "PLAIN": "username",
                  "OAUTHBEARER": "oauth", "GSSAPI": "kerberos", "AWS_MSK_IAM": None}


class KafkaSecurity(Section):
    """`kafka.security`; paths relative to the config file's folder (validation context `base_dir`)."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN", "OAUTHBEARER", "GSSAPI",
                            "AWS_MSK_IAM"] = "SCRAM-SHA-512"
    username: StrictStr | None = None
    password: SecretValue = Field(None, description="write ${ENV_VAR} or {file: PATH}: the password stays out "
                                  "of the file")
    oauth: OAuth | None = None
    kerberos: Kerberos | None = None
    ca_file: Name | None = None
    truststore: Store | None = None
    client_cert: ClientCertificate | None = None
    check_hostname: StrictBool = True
    properties: PassedProperties = Field(default_factory=dict, description=(
        "any other sasl.* / ssl.* Java client property, as it is; values as secrets"))

    @field_validator("ca_file")
    @classmethod
    def _ca_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        protocol = info.data.get("protocol")
        if value is None:
            return None
        if protocol is not None and not protocol.endswith("SSL"):
            raise ValueError(f"kafka.security.ca_file needs protocol SSL or SASL_SSL, not {protocol}")
        value = resolve_path(value, info)
        if not os.path.isfile(value):
            raise ValueError(f"kafka.security.ca_file {value} is not a file")
        return value

    @model_validator(mode="after")
    def _credentials(self) -> KafkaSecurity:
        """A SASL protocol needs the credentials of its mechanism and no others; TLS settings need
        a TLS protocol."""
        given = {key for key in ("username", "password", "oauth", "kerberos") if getattr(self, key) is not None}
        if not self.sasl:
            if given:
                raise ValueError(f"kafka.security.{sorted(given)[0]} needs a SASL protocol, not {self.protocol}")
        else:
            wanted = _SASL_SECTIONS[self.sasl_mechanism]
            if wanted is None:  # AWS_MSK_IAM: AWS's default credential chain, on each side
                if self.protocol != "SASL_SSL":
                    raise ValueError(f"kafka.security.sasl_mechanism AWS_MSK_IAM needs protocol SASL_SSL, not "
                                     f"{self.protocol}")
            elif wanted == "username":
                if not self.username:
                    raise ValueError(f"kafka.security.username must be a non-empty string with protocol "
                                     f"{self.protocol}")
                if self.password is None or not self.password.reveal():
                    raise ValueError(f"kafka.security.password must be a non-empty string with protocol "
                                     f"{self.protocol} (write ${{ENV_VAR}} to take it from the environment)")
                given -= {"username", "password"}
            elif wanted not in given:
                raise ValueError(f"kafka.security.{wanted} is required with sasl_mechanism {self.sasl_mechanism}")
            else:
                given.discard(wanted)
            if given:
                raise ValueError(f"kafka.security.{sorted(given)[0]} does not apply to sasl_mechanism "
                                 f"{self.sasl_mechanism}")
        for key in ("truststore", "client_cert"):
            if getattr(self, key) is not None and not self.tls:
                raise ValueError(f"kafka.security.{key} needs protocol SSL or SASL_SSL, not {self.protocol}")
        owned = sorted(set(self.properties) & set(self._own_jvm_properties()))
        if owned:
            raise ValueError(f"kafka.security.properties.{owned[0]} is set by kafka.security itself (protocol, "
                             "sasl_mechanism and its credentials, the TLS settings); set it there")
        return self

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def _jaas(self) -> str:
        """The `sasl.jaas.config` line of the mechanism (values quoted; secrets revealed here only)."""
        options: dict[str, str] = {}
        if self.oauth is not None:
            if self.oauth.unsecured_subject is not None:
                options["unsecuredLoginStringClaim_sub"] = self.oauth.unsecured_subject
            else:
                if self.oauth.token_endpoint is not None:
                    assert self.oauth.client_id is not None and self.oauth.client_secret is not None
                    options["clientId"] = self.oauth.client_id
                    options["clientSecret"] = self.oauth.client_secret.reveal()
                    if self.oauth.scope:
                        options["scope"] = self.oauth.scope
                if self.oauth.login_callback_handler is not None:
                    options.update({key: value.reveal()
                                    for key, value in self.oauth.login_callback_handler.options.items()})
            options.update({f"extension_{name}": value for name, value in self.oauth.extensions.items()})
        elif self.kerberos is not None:
            options = {"useKeyTab": "true", "storeKey": "true", "keyTab": self.kerberos.keytab,
                       "principal": self.kerberos.principal}
        elif self.sasl_mechanism == "AWS_MSK_IAM":
            return f"{_LOGIN_MODULES[self.sasl_mechanism]} required;"
        else:
            assert self.username is not None and self.password is not None
            options = {"username": self.username, "password": self.password.reveal()}
        text = " ".join(f"{key}={_jaas_quote(value)}" for key, value in options.items())
        return f"{_LOGIN_MODULES[self.sasl_mechanism]} required {text};"

    def jvm_properties(self) -> dict[str, str]:
        """Java Kafka client properties of the job's Flink sources and sinks (the connector's
        relocated Kafka client: `SHADED_KAFKA`): the section's own and the passed-through
        `properties`."""
        return {**self._own_jvm_properties(), **{key: value.reveal() for key, value in self.properties.items()}}

    def _own_jvm_properties(self) -> dict[str, str]:
        """The Java client properties the section's keys set."""
        props: dict[str, str] = {"security.protocol": self.protocol}
        if self.sasl:
            props["sasl.mechanism"] = self.sasl_mechanism
            props["sasl.jaas.config"] = self._jaas()
            if self.oauth is not None and self.oauth.login_callback_handler is not None:
                props["sasl.login.callback.handler.class"] = self.oauth.login_callback_handler.class_name
            elif self.oauth is not None and self.oauth.token_endpoint is not None:
                props["sasl.login.callback.handler.class"] = OAUTH_LOGIN_HANDLER
            if self.oauth is not None and self.oauth.token_endpoint is not None:
                props["sasl.oauthbearer.token.endpoint.url"] = self.oauth.token_endpoint
            if self.kerberos is not None:
                props["sasl.kerberos.service.name"] = self.kerberos.service_name
            if self.sasl_mechanism == "AWS_MSK_IAM":
                props["sasl.client.callback.handler.class"] = MSK_IAM_CLIENT_HANDLER
        if self.tls:
            if self.truststore is not None:
                props.update(_store("truststore", self.truststore))
            elif self.ca_file:
                props["ssl.truststore.type"] = "PEM"
                props["ssl.truststore.location"] = self.ca_file
            if self.client_cert is not None:
                store = self.client_cert.keystore
                props.update(_store("keystore", store))
                key_password = self.client_cert.key_password or store.password
                if key_password is not None:
                    props["ssl.key.password"] = key_password.reveal()
            props["ssl.endpoint.identification.algorithm"] = "https" if self.check_hostname else ""
        return props

    def jvm_system_properties(self) -> dict[str, str]:
        """JVM system properties the Java clients need: the token endpoint listed as allowed; the
        Kerberos configuration."""
        if self.oauth is not None and self.oauth.token_endpoint is not None:
            return {OAUTH_ALLOWED_URLS_PROPERTY: self.oauth.token_endpoint}
        if self.kerberos is not None and self.kerberos.krb5_conf is not None:
            return {KRB5_CONF_PROPERTY: self.kerberos.krb5_conf}
        return {}

    def python_options(self) -> dict[str, Any]:
        """kafka-python keyword arguments (KafkaProducer, KafkaConsumer, KafkaAdminClient). With
        GSSAPI, first logs this process's Python clients in as the configured principal
        (`python_login`)."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            options["sasl_mechanism"] = self.sasl_mechanism
            if self.oauth is not None:
                options["sasl_oauth_token_provider"] = _token_provider(self.oauth)
            elif self.kerberos is not None:
                python_login(self.kerberos.principal, self.kerberos.keytab, self.kerberos.krb5_conf)
                options["sasl_kerberos_service_name"] = self.kerberos.service_name
            elif self.sasl_mechanism == "AWS_MSK_IAM":
                AWS.require()  # kafka-python signs the AWS_MSK_IAM request with botocore's credentials
            else:
                assert self.password is not None
                options.update(sasl_plain_username=self.username, sasl_plain_password=self.password.reveal())
        if self.tls:
            options["ssl_check_hostname"] = self.check_hostname
            if self.ca_file:
                options["ssl_cafile"] = self.ca_file
            if self.client_cert is not None:
                options.update(ssl_certfile=self.client_cert.cert_file, ssl_keyfile=self.client_cert.key_file)
                if self.client_cert.key_password is not None:
                    options["ssl_password"] = self.client_cert.key_password.reveal()
        return options


def _store(kind: str, store: Store) -> dict[str, str]:
    """`ssl.<kind>.type`, `.location` and `.password` of a Java key or trust store."""
    props = {f"ssl.{kind}.type": store.type, f"ssl.{kind}.location": store.location}
    if store.password is not None:
        props[f"ssl.{kind}.password"] = store.password.reveal()
    return props


def _token_provider(oauth: OAuth) -> UnsecuredTokens | ClientCredentialsTokens:
    """kafka-python's `sasl_oauth_token_provider` of `oauth` (jobs/streaming/kafka_oauth.py). A Java
    login callback handler cannot run in Python: with one, the client-credentials grant, else a
    ConfigError naming the key."""
    if oauth.unsecured_subject is not None:
        return UnsecuredTokens(oauth.unsecured_subject, oauth.extensions)
    if oauth.token_endpoint is None:
        raise ConfigError("kafka.security.oauth.login_callback_handler: the Python clients (pwevent run's check of "
                          "its topics, produce, tail, create-topics.py) cannot run a Java login callback handler; "
                          "give token_endpoint, client_id and client_secret beside it: the client-credentials "
                          "grant they use instead (docs/operations.md, Security)")
    assert oauth.token_endpoint is not None and oauth.client_id is not None and oauth.client_secret is not None
    return ClientCredentialsTokens(oauth.token_endpoint, oauth.client_id, oauth.client_secret.reveal, oauth.scope,
                                   oauth.extensions)


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
    """`kafka.properties` takes client tuning only: security settings have one place, `kafka.security`
    (a `sasl.*` / `ssl.*` property it does not name: `kafka.security.properties`)."""
    for key in properties:
        if key.startswith(SECURITY_PROPERTY_PREFIXES):
            raise ConfigError(f"kafka.properties.{key}: security settings go in kafka.security (a sasl.* or ssl.* "
                              "property it does not name: kafka.security.properties; docs/operations.md, Security)")
