"""`kafka.security` (one section for the job's Java clients and the Python tools) in every mode
(SCRAM/PLAIN, mTLS, OAUTHBEARER, GSSAPI), `${ENV_VAR}` and mounted-file secrets in the
configuration, and the ACL plan per principal (docs/operations.md, "Security"). No broker."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import urllib.request
from pathlib import Path

import jwt
import pytest
import yaml

from pwevent.jobs.cli.main import main as cli_main
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.common.extras import MissingExtraError
from pwevent.jobs.streaming.jars import parent_first_patterns, security_jars
from pwevent.jobs.streaming.job import make_environment
from pwevent.jobs.streaming.kafka_acls import Grant, acl_plan
from pwevent.jobs.streaming.kafka_oauth import (
    ClientCredentialsTokens,
    TokenEndpointError,
    UnsecuredTokens,
    unsecured_jws,
)
from pwevent.jobs.streaming.local_run import local_configuration, with_jvm_args
from pwevent.jobs.streaming.maven_jars import AWS_MSK_IAM, OAUTHBEARER_JARS, JarError
from pwevent.jobs.streaming.settings import stream_settings
from pwevent.jobs.streaming.sink_tables import sink_ddl
from tests.streaming.token_endpoint import AUDIENCE, Signer, TokenEndpoint

BASE = {"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"}}
SECRET = 'p"a\\ss w0rd'  # a quote and a backslash: the JAAS line must escape them


def settings(kafka: dict, base_dir: str = "/tmp"):  # type: ignore[no-untyped-def]
    return stream_settings(parse_config({**BASE, "kafka": {"bootstrap": "127.0.0.1:1", **kafka}}), base_dir)


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


def sasl_ssl(ca: Path) -> dict:
    return {"security": {"protocol": "SASL_SSL", "username": "pwevent-job", "password": "${PWEVENT_T_PASSWORD}",
                         "ca_file": ca.name}}


def test_one_section_drives_the_java_and_the_python_clients(ca: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWEVENT_T_PASSWORD", SECRET)
    kafka = settings(sasl_ssl(ca), str(ca.parent)).kafka
    assert kafka.jvm_properties() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.flink.kafka.shaded.org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required '
                            'username="pwevent-job" password="p\\"a\\\\ss w0rd";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca),
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert kafka.client_options() == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "pwevent-job",
        "sasl_plain_password": SECRET, "ssl_cafile": str(ca), "ssl_check_hostname": True,
    }
    ddl = sink_ddl("b", "t", "audit", settings(sasl_ssl(ca), str(ca.parent)))
    assert "'properties.security.protocol' = 'SASL_SSL'" in ddl and "'properties.sasl.jaas.config'" in ddl


def test_plaintext_is_the_default_and_tuning_properties_pass_through() -> None:
    kafka = settings({"properties": {"fetch.max.bytes": 1048576}}).kafka
    assert kafka.jvm_properties() == {"fetch.max.bytes": "1048576", "security.protocol": "PLAINTEXT"}
    assert kafka.client_options() == {"security_protocol": "PLAINTEXT"}


def test_the_password_shows_in_no_repr_and_no_error(ca: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWEVENT_T_PASSWORD", SECRET)
    config = parse_config({**BASE, "kafka": sasl_ssl(ca)})
    s = stream_settings(config, str(ca.parent))
    for shown in (repr(config), repr(s), str(s.kafka.security), repr(s.kafka.security.password)):
        assert SECRET not in shown
    monkeypatch.setenv("PWEVENT_T_PASSWORD", "")
    with pytest.raises(ConfigError, match=r"kafka\.security\.password") as err:
        settings(sasl_ssl(ca), str(ca.parent))
    assert SECRET not in str(err.value)


def test_a_password_of_another_type_is_named_not_shown() -> None:
    with pytest.raises(ConfigError, match=r"^kafka\.security\.password: must be a string") as err:
        settings({"security": {"protocol": "SASL_SSL", "username": "u", "password": [SECRET]}})
    assert SECRET not in str(err.value)


def test_print_submit_shows_no_secret(ca: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    jar = tmp_path / "connector.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("PWEVENT_KAFKA_CONNECTOR_JAR", str(jar))
    monkeypatch.setenv("PWEVENT_T_PASSWORD", SECRET)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, "kafka": {"bootstrap": "127.0.0.1:1", **sasl_ssl(ca)}}))
    assert cli_main(["run", "--config", str(path), "--print-submit"]) == 0
    out = capsys.readouterr()
    assert "flink" in out.out and str(path) in out.out
    assert SECRET not in out.out + out.err and "p\"a" not in out.out + out.err


@pytest.mark.parametrize(("security", "message"), [
    ({"protocol": "SASL_SSH"}, "kafka.security.protocol"),
    ({"protocol": "SASL_SSL", "username": "u"}, "kafka.security.password"),
    ({"protocol": "SASL_SSL", "password": "p"}, "kafka.security.username"),
    ({"protocol": "SASL_SSL", "username": "u", "password": "p", "sasl_mechanism": "GSSAPI"},
     "kafka.security.kerberos is required"),
    ({"protocol": "SASL_SSL", "username": "u", "password": "p", "sasl_mechanism": "SCRAM-SHA-1"},
     "kafka.security.sasl_mechanism"),
    ({"protocol": "SSL", "username": "u", "password": "p"}, "needs a SASL protocol"),
    ({"protocol": "SASL_PLAINTEXT", "username": "u", "password": "p", "ca_file": "x"}, "kafka.security.ca_file"),
    ({"protocol": "SSL", "ca_file": "missing.pem"}, "kafka.security.ca_file"),
    ({"protocol": "SSL", "check_hostname": "no"}, "kafka.security.check_hostname"),
    ({"protocl": "SSL"}, "kafka.security.protocl"),
])
def test_security_errors_name_the_key(security: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        settings({"security": security})


def test_security_has_one_place() -> None:
    with pytest.raises(ConfigError, match=r"kafka\.properties\.sasl\.jaas\.config: .*kafka\.security"):
        settings({"properties": {"sasl.jaas.config": "x"}})
    with pytest.raises(ConfigError, match=r"kafka\.client was replaced by kafka\.security"):
        settings({"client": {"security_protocol": "SSL"}})


def test_environment_variables_resolve_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWEVENT_T_BROKER", "broker-1")
    kafka = settings({"bootstrap": "${PWEVENT_T_BROKER}:9093", "group_id": "$${literal}"}).kafka
    assert kafka.bootstrap == "broker-1:9093" and kafka.group_id == "${literal}"
    monkeypatch.delenv("PWEVENT_T_UNSET", raising=False)
    unset = r"^kafka\.security\.password: environment variable PWEVENT_T_UNSET is not set"
    with pytest.raises(ConfigError, match=unset):
        settings({"security": {"protocol": "SASL_SSL", "username": "u", "password": "${PWEVENT_T_UNSET}"}})
    with pytest.raises(ConfigError, match=r"kafka\.topics\.events: \$\{1x\} is not an environment variable"):
        settings({"topics": {"events": "${1x}"}})


def test_the_acl_plan_names_every_principal_and_resource() -> None:
    kafka = settings({"group_id": "g", "transactional_id_prefix": "tx",
                      "topics": {"events": "ev", "requirements": "rq", "releases": "rl", "dead_letters": "dl",
                                 "audit": "au"}}).kafka
    plan = acl_plan(kafka)
    assert len(plan) == len(set(plan))
    allowed = {(g.principal, g.resource, g.name, g.operation, g.prefixed) for g in plan}
    job = "User:pwevent-job"
    for topic, ops in {"ev": {"READ"}, "rq": {"READ"}, "rl": {"READ", "WRITE"}, "dl": {"WRITE"},
                       "au": {"READ", "WRITE"}}.items():
        assert {g.operation for g in plan if g.principal == job and g.name == topic} == ops | {"DESCRIBE"}
    assert (job, "group", "g", "READ", True) in allowed
    assert (job, "transactional_id", "tx", "WRITE", True) in allowed
    producer = {(g.name, g.operation) for g in plan if g.principal == "User:pwevent-producer"}
    assert producer == {("ev", "WRITE"), ("ev", "DESCRIBE"), ("rq", "WRITE"), ("rq", "DESCRIBE")}
    analyst = {(g.name, g.operation) for g in plan if g.principal == "User:pwevent-analyst"}
    assert ("rl", "READ") in analyst and not {n for n, op in analyst if op == "WRITE"}
    assert not any(g.name in ("ev", "rq") for g in plan if g.principal == "User:pwevent-analyst")
    assert Grant("User:pwevent-job", "topic", "ev", "WRITE") not in plan
    several = acl_plan(kafka, statistics=("cells", "screen"))  # each statistic's release topic as the releases'
    for topic in ("rl.cells", "rl.screen"):
        assert {g.operation for g in several if g.principal == job and g.name == topic} == {"READ", "WRITE", "DESCRIBE"}
        assert ("User:pwevent-analyst", "topic", topic, "READ", False) in {
            (g.principal, g.resource, g.name, g.operation, g.prefixed) for g in several}


# Every mode of kafka.security (docs/operations.md, "Security"): mTLS, OAUTHBEARER, GSSAPI, secrets
# from mounted files.

KEY_SECRET = "k3y-pa$$"
STORE_SECRET = "st0re-pa$$"
OAUTH_SECRET = "0auth:secret/with&chars"


@pytest.fixture
def tls_files(tmp_path: Path) -> Path:
    for name in ("ca.pem", "client.pem", "client.key", "client.p12", "truststore.jks", "job.keytab"):
        (tmp_path / name).write_text("x")
    (tmp_path / "store-secret").write_text(STORE_SECRET + "\n")
    return tmp_path


def mtls(key_password: str | None = "${PWEVENT_T_KEY}") -> dict:
    cert = {"cert_file": "client.pem", "key_file": "client.key",
            "keystore": {"location": "client.p12", "password": {"file": "store-secret"}}}
    if key_password:
        cert["key_password"] = key_password
    return {"security": {"protocol": "SSL", "ca_file": "ca.pem", "client_cert": cert}}


def test_mtls_gives_a_keystore_to_the_java_clients_and_pem_files_to_the_python_tools(
        tls_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWEVENT_T_KEY", KEY_SECRET)
    kafka = settings(mtls(), str(tls_files)).kafka
    assert kafka.jvm_properties() == {
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls_files / "ca.pem"),
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(tls_files / "client.p12"),
        "ssl.keystore.password": STORE_SECRET, "ssl.key.password": KEY_SECRET,
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert kafka.client_options() == {
        "security_protocol": "SSL", "ssl_check_hostname": True, "ssl_cafile": str(tls_files / "ca.pem"),
        "ssl_certfile": str(tls_files / "client.pem"), "ssl_keyfile": str(tls_files / "client.key"),
        "ssl_password": KEY_SECRET,
    }
    # Without a key password the keystore's is the key's (keytool's PKCS12); the PEM key is unencrypted.
    plain = settings(mtls(key_password=None), str(tls_files)).kafka
    assert plain.jvm_properties()["ssl.key.password"] == STORE_SECRET
    assert "ssl_password" not in plain.client_options()
    for shown in (repr(kafka), str(kafka.security.client_cert)):
        assert KEY_SECRET not in shown and STORE_SECRET not in shown


def test_a_java_truststore_replaces_the_pem_ca_for_the_java_clients_only(tls_files: Path) -> None:
    security = {"protocol": "SSL", "ca_file": "ca.pem",
                "truststore": {"location": "truststore.jks", "type": "JKS", "password": {"file": "store-secret"}}}
    kafka = settings({"security": security}, str(tls_files)).kafka
    jvm = kafka.jvm_properties()
    assert (jvm["ssl.truststore.type"], jvm["ssl.truststore.location"], jvm["ssl.truststore.password"]) == (
        "JKS", str(tls_files / "truststore.jks"), STORE_SECRET)
    assert kafka.client_options()["ssl_cafile"] == str(tls_files / "ca.pem")


def test_oauthbearer_client_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWEVENT_T_OAUTH", OAUTH_SECRET)
    oauth = {"token_endpoint": "https://idp.example/oauth2/token", "client_id": "pwevent-job",
             "client_secret": "${PWEVENT_T_OAUTH}", "scope": "kafka"}
    kafka = settings({"security": {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth": oauth}}).kafka
    shaded = "org.apache.flink.kafka.shaded.org.apache.kafka.common.security.oauthbearer"
    assert kafka.jvm_properties() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": f'{shaded}.OAuthBearerLoginModule required clientId="pwevent-job" '
                            f'clientSecret="{OAUTH_SECRET}" scope="kafka";',
        "sasl.login.callback.handler.class": f"{shaded}.OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert kafka.security.jvm_system_properties() == {
        "org.apache.flink.kafka.shaded.org.apache.kafka.sasl.oauthbearer.allowed.urls":
            "https://idp.example/oauth2/token"}  # Kafka 4 refuses token endpoints not listed there
    options = kafka.client_options()
    provider = options.pop("sasl_oauth_token_provider")
    assert isinstance(provider, ClientCredentialsTokens) and OAUTH_SECRET not in repr(provider)
    assert options == {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "ssl_check_hostname": True}


def test_oauthbearer_unsecured_tokens_are_unsigned_jws_of_the_subject() -> None:
    oauth = {"unsecured_subject": "pwevent-job"}
    kafka = settings({"security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
                                   "oauth": oauth}}).kafka
    assert kafka.jvm_properties()["sasl.jaas.config"] == (
        "org.apache.flink.kafka.shaded.org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        'required unsecuredLoginStringClaim_sub="pwevent-job";')
    assert "sasl.login.callback.handler.class" not in kafka.jvm_properties()  # Kafka's unsecured default
    assert kafka.security.jvm_system_properties() == {}
    provider = kafka.client_options()["sasl_oauth_token_provider"]
    assert isinstance(provider, UnsecuredTokens)
    header, claims, signature = unsecured_jws("pwevent-job", 1_700_000_000.5).split(".")
    decode = lambda part: json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))  # noqa: E731
    assert decode(header) == {"alg": "none"} and signature == ""
    assert decode(claims) == {"sub": "pwevent-job", "iat": 1_700_000_000, "exp": 1_700_003_600}
    assert provider.token().count(".") == 2


def test_gssapi_logs_the_java_clients_in_from_the_keytab(tls_files: Path) -> None:
    kerberos = {"principal": "pwevent-job@EXAMPLE.COM", "keytab": "job.keytab"}
    kafka = settings({"security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
                                   "kerberos": kerberos}}, str(tls_files)).kafka
    assert kafka.jvm_properties() == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
        "sasl.jaas.config": 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab="true" '
                            f'storeKey="true" keyTab="{tls_files / "job.keytab"}" '
                            'principal="pwevent-job@EXAMPLE.COM";',
    }
    assert kafka.security.jvm_system_properties() == {}
    (tls_files / "krb5.conf").write_text("[libdefaults]\n default_realm = EXAMPLE.COM\n")
    with_conf = settings({"security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
                                       "kerberos": {**kerberos, "krb5_conf": "krb5.conf"}}}, str(tls_files)).kafka
    assert with_conf.security.jvm_system_properties() == {"java.security.krb5.conf": str(tls_files / "krb5.conf")}


def test_a_krb5_conf_path_that_jvm_args_cannot_carry_is_refused(tls_files: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A local run passes `krb5_conf` to its JVM in JVM_ARGS, which the launcher splits at white
    space: such a path is a configuration error naming the key, raised before the environment is
    touched (and before any JVM starts)."""
    spaced = tls_files / "with space"
    spaced.mkdir()
    (spaced / "krb5.conf").write_text("[libdefaults]\n")
    kerberos = {"principal": "pwevent-job@EXAMPLE.COM", "keytab": "job.keytab", "krb5_conf": "with space/krb5.conf"}
    stream = settings({"security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
                                    "kerberos": kerberos}}, str(tls_files))
    monkeypatch.setenv("JVM_ARGS", "-Xmx1g")
    with pytest.raises(ConfigError, match=r"^kafka\.security: a local run passes '-Djava\.security\.krb5\.conf=.*"
                                          r"with space/krb5\.conf' holds white space"):
        make_environment(stream, None)
    assert os.environ["JVM_ARGS"] == "-Xmx1g"
    assert with_jvm_args("-Xmx1g", "-Da=b", "-Dc=d") == "-Xmx1g -Da=b -Dc=d"
    assert with_jvm_args(None) == ""
    with pytest.raises(ValueError, match="holds white space"):
        with_jvm_args(None, "-Djava.io.tmpdir=/tmp/a\tb")


def test_gssapi_python_clients_need_the_gssapi_package(tls_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the extra `kerberos` (the `gssapi` package) a Python client of a GSSAPI configuration
    stops with the extra to install (exit 2 in the CLI), before it touches the process's Kerberos
    settings; the login itself is tests/integration/test_security.py's (a real KDC)."""
    kafka = settings({"security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI", "kerberos": {
        "principal": "pwevent-job@EXAMPLE.COM", "keytab": "job.keytab"}}}, str(tls_files)).kafka
    monkeypatch.setitem(sys.modules, "gssapi", None)
    for name in ("KRB5_CONFIG", "KRB5_CLIENT_KTNAME", "KRB5CCNAME"):
        monkeypatch.delenv(name, raising=False)
    expected = r"(?s)GSSAPI: .*package gssapi.*install the optional extra `kerberos`.*gssapi>=1\.8"
    with pytest.raises(MissingExtraError, match=expected):
        kafka.client_options()
    assert not {"KRB5_CONFIG", "KRB5_CLIENT_KTNAME", "KRB5CCNAME"} & set(os.environ)


def test_a_password_from_a_mounted_file(tls_files: Path) -> None:
    security = {"protocol": "SASL_SSL", "username": "pwevent-job", "password": {"file": "store-secret"}}
    kafka = settings({"security": security}, str(tls_files)).kafka
    assert kafka.client_options()["sasl_plain_password"] == STORE_SECRET
    with pytest.raises(ConfigError, match=r"^kafka\.security\.password: cannot read the secret file .*missing"):
        settings({"security": {**security, "password": {"file": "missing"}}}, str(tls_files))


@pytest.mark.parametrize(("security", "message"), [
    ({"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"}, "kafka.security.oauth is required"),
    ({"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth": {}}, "kafka.security.oauth needs"),
    ({"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
      "oauth": {"token_endpoint": "https://i/t", "client_id": "c"}}, "kafka.security.oauth.client_secret"),
    ({"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
      "oauth": {"token_endpoint": "idp/token", "client_id": "c", "client_secret": "s"}},
     "kafka.security.oauth.token_endpoint"),
    ({"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
      "oauth": {"unsecured_subject": "u", "client_id": "c"}}, "kafka.security.oauth.unsecured_subject"),
    ({"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth": {"unsecured_subject": "u"},
      "username": "u"}, "kafka.security.username does not apply"),
    ({"protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI", "kerberos": {"principal": "p", "keytab": "none.keytab"}},
     "kafka.security.kerberos.keytab"),
    ({"protocol": "SSL", "oauth": {"unsecured_subject": "u"}}, "kafka.security.oauth needs a SASL protocol"),
    ({"protocol": "SASL_PLAINTEXT", "username": "u", "password": "p",
      "client_cert": {"cert_file": "c", "key_file": "k", "keystore": {"location": "s"}}},
     "kafka.security.client_cert.cert_file"),
    ({"protocol": "SSL", "client_cert": {"cert_file": "client.pem", "key_file": "client.key"}},
     "missing key kafka.security.client_cert.keystore"),
    ({"protocol": "SSL", "client_cert": {"cert_file": "client.pem", "key_file": "client.key",
                                         "keystore": {"location": "client.p12", "type": "P12"}}},
     "kafka.security.client_cert.keystore.type"),
    ({"protocol": "PLAINTEXT", "truststore": {"location": "truststore.jks"}},
     "kafka.security.truststore needs protocol SSL"),
])
def test_every_mode_names_the_key_of_its_error(tls_files: Path, security: dict, message: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        settings({"security": security}, str(tls_files))


@pytest.mark.parametrize("key", ["oauth.client_secret", "client_cert.key_password",
                                 "client_cert.keystore.password", "truststore.password"])
def test_a_secret_of_another_type_is_named_not_shown(tls_files: Path, key: str) -> None:
    security = {**mtls(key_password="k")["security"], "protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
                "oauth": {"token_endpoint": "https://i/t", "client_id": "c", "client_secret": "s"},
                "truststore": {"location": "truststore.jks"}}
    *parents, field = key.split(".")
    where = security
    for part in parents:
        where = where[part]
    where[field] = [OAUTH_SECRET]  # no character a repr would escape: shown, it would be found
    with pytest.raises(ConfigError, match=rf"^kafka\.security\.{re.escape(key)}: must be a string") as err:
        settings({"security": security}, str(tls_files))
    assert OAUTH_SECRET not in str(err.value)


def test_print_submit_shows_no_secret_of_any_mode(tls_files: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    jar = tls_files / "connector.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("PWEVENT_KAFKA_CONNECTOR_JAR", str(jar))
    monkeypatch.setenv("PWEVENT_T_KEY", KEY_SECRET)
    monkeypatch.setenv("PWEVENT_T_OAUTH", OAUTH_SECRET)
    security = {**mtls()["security"], "protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
                "oauth": {"token_endpoint": "https://idp.example/t", "client_id": "c",
                          "client_secret": "${PWEVENT_T_OAUTH}"}}
    path = tls_files / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, "kafka": {"bootstrap": "127.0.0.1:1", "security": security}}))
    assert cli_main(["run", "--config", str(path), "--print-submit"]) == 0
    out = capsys.readouterr()
    assert str(path) in out.out
    for secret in (KEY_SECRET, STORE_SECRET, OAUTH_SECRET):
        assert secret not in out.out + out.err


def test_the_python_tools_fetch_a_client_credentials_token_and_reuse_it() -> None:
    now = [0.0]
    with TokenEndpoint({"pwevent-job": OAUTH_SECRET}, lambda n: f"token-{n}") as endpoint:
        tokens = ClientCredentialsTokens(endpoint.url, "pwevent-job", lambda: OAUTH_SECRET, "kafka",
                                         clock=lambda: now[0])
        assert tokens.token() == "token-1"
        assert tokens.token() == "token-1"  # reused while valid
        now[0] = 3600.0 - 59  # within the refresh margin: fetched again
        assert tokens.token() == "token-2"
        assert endpoint.requests == [{"grant_type": ["client_credentials"], "scope": ["kafka"]}] * 2
        refused = ClientCredentialsTokens(endpoint.url, "pwevent-job", lambda: "wrong")
        with pytest.raises(TokenEndpointError, match="401") as err:
            refused.token()
    assert "wrong" not in str(err.value)


def test_the_test_identity_provider_signs_rs256_tokens_with_the_key_it_publishes() -> None:
    """deploy/local/token-endpoint.py (the identity provider of kafka.sh's `--secure oauth-jwks`):
    the grant gives a JWT signed with RS256 by the key the JWKS publishes, with the client as `sub`,
    `kafka` as `aud` and the endpoint as `iss`; a wrong secret and an unknown client get 401."""
    with TokenEndpoint({"pwevent-job": OAUTH_SECRET}) as endpoint:
        token = ClientCredentialsTokens(endpoint.url, "pwevent-job", lambda: OAUTH_SECRET).token()
        with urllib.request.urlopen(endpoint.jwks_url, timeout=10) as answer:
            (key,) = json.loads(answer.read())["keys"]
        assert (key["kty"], key["alg"], key["use"]) == ("RSA", "RS256", "sig")
        assert jwt.get_unverified_header(token) == {"alg": "RS256", "typ": "JWT", "kid": key["kid"]}
        claims = jwt.decode(token, jwt.PyJWK(key).key, algorithms=["RS256"], audience=AUDIENCE,
                            issuer=endpoint.issuer)
        assert claims["sub"] == "pwevent-job" and claims["exp"] - claims["iat"] == 3600
        with pytest.raises(jwt.InvalidSignatureError):  # another key's signature does not verify
            jwt.decode(Signer().sign(claims), jwt.PyJWK(key).key, algorithms=["RS256"], audience=AUDIENCE)
        for client, secret in (("pwevent-job", "wrong"), ("intruder", OAUTH_SECRET)):
            with pytest.raises(TokenEndpointError, match="401"):
                ClientCredentialsTokens(endpoint.url, client, lambda s=secret: s).token()
    assert endpoint.log == ["granted pwevent-job", "refused pwevent-job: wrong secret",
                            "refused intruder: unknown client"]


def test_oauthbearer_sasl_extensions_reach_the_java_and_the_python_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    """Confluent Cloud's logicalCluster and identityPoolId: JAAS `extension_` options of the Java
    clients' login handler, and the Python token provider's `extensions()`; names and values under
    Kafka's rules."""
    monkeypatch.setenv("PWEVENT_T_OAUTH", OAUTH_SECRET)
    extensions = {"logicalCluster": "lkc-abc123", "identityPoolId": "pool-Xy9"}
    oauth = {"token_endpoint": "https://idp.example/oauth2/token", "client_id": "pwevent-job",
             "client_secret": "${PWEVENT_T_OAUTH}", "extensions": extensions}
    kafka = settings({"security": {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth": oauth}}).kafka
    assert kafka.jvm_properties()["sasl.jaas.config"].endswith(
        f'clientSecret="{OAUTH_SECRET}" extension_logicalCluster="lkc-abc123" extension_identityPoolId="pool-Xy9";')
    assert kafka.client_options()["sasl_oauth_token_provider"].extensions() == extensions
    unsecured = settings({"security": {"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER", "oauth": {
        "unsecured_subject": "job", "extensions": {"traceId": "t1"}}}}).kafka
    assert unsecured.jvm_properties()["sasl.jaas.config"].endswith('extension_traceId="t1";')
    assert unsecured.client_options()["sasl_oauth_token_provider"].extensions() == {"traceId": "t1"}
    for bad, message in [({"auth": "x"}, "'auth' is not a SASL extension name"),
                         ({"logical_cluster": "x"}, "'logical_cluster' is not a SASL extension name"),
                         ({"logicalCluster": "é"}, "extensions.logicalCluster: the value must be printable ASCII")]:
        with pytest.raises(ConfigError, match=message):
            settings({"security": {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER",
                                   "oauth": {**oauth, "extensions": bad}}})


def test_other_sasl_and_ssl_properties_pass_through_with_secrets_from_the_environment_or_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka.security.properties: any sasl.* / ssl.* Java client property the section does not set,
    as it is, its value from the environment or a mounted file and shown in no repr; one the section
    sets, or another prefix, is refused naming the key."""
    monkeypatch.setenv("PWEVENT_T_PROVIDER_SECRET", "pr0vider-secret")
    (tmp_path / "login-secret").write_text("f1le-secret\n")
    passed = {"ssl.enabled.protocols": "TLSv1.3", "sasl.login.refresh.buffer.seconds": 120,
              "ssl.engine.factory.class": "${PWEVENT_T_PROVIDER_SECRET}",
              "sasl.oauthbearer.assertion.private.key.passphrase": {"file": "login-secret"}}
    security = {"protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "username": "job", "password": "p",
                "properties": passed}
    kafka = settings({"security": security}, str(tmp_path)).kafka
    props = kafka.jvm_properties()
    assert props["ssl.enabled.protocols"] == "TLSv1.3" and props["sasl.login.refresh.buffer.seconds"] == "120"
    assert props["ssl.engine.factory.class"] == "pr0vider-secret"
    assert props["sasl.oauthbearer.assertion.private.key.passphrase"] == "f1le-secret"
    assert props["sasl.mechanism"] == "PLAIN"  # the section's own stay
    assert "pr0vider-secret" not in repr(kafka) and "f1le-secret" not in repr(kafka)
    for properties, message in [
            ({"sasl.jaas.config": "x"}, r"kafka.security.properties.sasl.jaas.config is set by kafka.security itself"),
            ({"ssl.endpoint.identification.algorithm": ""}, "ssl.endpoint.identification.algorithm is set by"),
            ({"security.protocol": "SSL"}, r"only sasl\.\* and ssl\.\* properties pass through"),
            ({"ssl.keystore.password": {"file": "missing"}}, "ssl.keystore.password: cannot read the secret file")]:
        with pytest.raises(ConfigError, match=message):
            settings({"security": {**security, "properties": properties}}, str(tmp_path))
    with pytest.raises(ConfigError, match="kafka.security.properties"):  # kafka.properties points there
        settings({"properties": {"ssl.enabled.protocols": "TLSv1.3"}})


def test_a_login_callback_handler_of_ones_own_for_the_java_clients(
        tls_files: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`kafka.security.oauth.login_callback_handler`: the class is the Java clients'
    `sasl.login.callback.handler.class`, its JAAS options (secrets from the environment or files) go
    in the login module's line, its jars after Jackson and jose4j on the job's class path. The Python
    tools cannot run it: they use the client-credentials grant given beside it, and without one a
    Python client (here `pwevent tail`) stops with exit 2 and the key."""
    monkeypatch.setenv("PWEVENT_T_OAUTH", OAUTH_SECRET)
    (tls_files / "handler.jar").write_bytes(b"")
    handler = {"class": "com.example.kafka.TokenFileLoginHandler", "jars": ["handler.jar"],
               "options": {"tokenFile": "/var/run/token", "audience": "${PWEVENT_T_OAUTH}"}}
    alone = {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth": {
        "login_callback_handler": handler, "extensions": {"logicalCluster": "lkc-1"}}}
    kafka = settings({"security": alone}, str(tls_files)).kafka
    shaded = "org.apache.flink.kafka.shaded.org.apache.kafka.common.security.oauthbearer"
    assert kafka.jvm_properties() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": f'{shaded}.OAuthBearerLoginModule required tokenFile="/var/run/token" '
                            f'audience="{OAUTH_SECRET}" extension_logicalCluster="lkc-1";',
        "sasl.login.callback.handler.class": "com.example.kafka.TokenFileLoginHandler",
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert kafka.security.jvm_system_properties() == {}
    assert OAUTH_SECRET not in repr(kafka)
    jars = security_jars(kafka.security)
    assert [jar.name for jar in jars[:-1]] == [jar.file_name for jar in OAUTHBEARER_JARS]
    assert jars[-1] == tls_files / "handler.jar"
    python_refused = r"^kafka\.security\.oauth\.login_callback_handler: the Python clients .* cannot run a Java"
    with pytest.raises(ConfigError, match=python_refused):
        kafka.client_options()
    path = tls_files / "job.yaml"
    path.write_text(yaml.safe_dump({**BASE, "kafka": {"bootstrap": "127.0.0.1:1", "security": alone}}))
    assert cli_main(["tail", "--config", str(path), "--timeout", "1s"]) == 2
    assert "kafka.security.oauth.login_callback_handler: the Python clients" in capsys.readouterr().err

    with_grant = {**alone, "oauth": {**alone["oauth"], "token_endpoint": "https://idp.example/oauth2/token",
                                     "client_id": "pwevent-job", "client_secret": "${PWEVENT_T_OAUTH}"}}
    both = settings({"security": with_grant}, str(tls_files)).kafka
    props = both.jvm_properties()
    assert props["sasl.login.callback.handler.class"] == "com.example.kafka.TokenFileLoginHandler"
    assert props["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/oauth2/token"
    assert props["sasl.jaas.config"].startswith(
        f'{shaded}.OAuthBearerLoginModule required clientId="pwevent-job" clientSecret="{OAUTH_SECRET}" '
        'tokenFile="/var/run/token"')
    assert isinstance(both.client_options()["sasl_oauth_token_provider"], ClientCredentialsTokens)


@pytest.mark.parametrize(("handler", "message"), [
    ({"jars": ["handler.jar"]}, "missing key kafka.security.oauth.login_callback_handler.class"),
    ({"class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"},
     "kafka.security.oauth.login_callback_handler.class: org.apache.kafka.common.security.oauthbearer."
     "OAuthBearerLoginCallbackHandler is in Kafka's own package, which the job's Kafka client relocates: name "
     "org.apache.flink.kafka.shaded.org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"),
    ({"class": "com.example.1Handler"}, "kafka.security.oauth.login_callback_handler.class: 'com.example.1Handler' "
                                        "is not a Java class name"),
    ({"class": "com.example.H", "jars": ["missing.jar"]}, "kafka.security.oauth.login_callback_handler.jars[0]: "),
    ({"class": "com.example.H", "options": {"clientSecret": "s"}},
     "kafka.security.oauth.login_callback_handler.options: clientSecret is written by kafka.security.oauth itself"),
    ({"class": "com.example.H", "options": {"extension_x": "s"}},
     "kafka.security.oauth.login_callback_handler.options: extension_x is written by"),
    ({"class": "com.example.H", "klass": "x"}, "unknown key kafka.security.oauth.login_callback_handler.klass"),
])
def test_a_login_callback_handler_error_names_its_key(tls_files: Path, handler: dict, message: str) -> None:
    (tls_files / "handler.jar").write_bytes(b"")
    security = {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth": {"login_callback_handler": handler}}
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        settings({"security": security}, str(tls_files))


def test_a_login_callback_handler_does_not_go_with_an_unsecured_subject_or_in_the_pass_through(
        tls_files: Path) -> None:
    handler = {"class": "com.example.H"}
    for oauth, message in [
            ({"unsecured_subject": "u", "login_callback_handler": handler},
             "kafka.security.oauth.unsecured_subject takes no token_endpoint, client_id, client_secret, scope or "
             "login_callback_handler"),
            ({"login_callback_handler": handler, "client_id": "c"}, "kafka.security.oauth needs token_endpoint")]:
        with pytest.raises(ConfigError, match="^" + re.escape(message)):
            settings({"security": {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth": oauth}})
    with pytest.raises(ConfigError, match=r"properties\.sasl\.login\.callback\.handler\.class is set by"):
        settings({"security": {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "oauth": {
            "login_callback_handler": handler}, "properties": {"sasl.login.callback.handler.class": "x.Y"}}})


def test_aws_msk_iam_takes_aws_s_login_module_built_relocated_and_botocore_in_python(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sasl_mechanism: AWS_MSK_IAM` (SASL_SSL only, no credentials in the section: AWS's default
    chain on each side): the Java clients get AWS's IAMLoginModule and IAMClientCallbackHandler (in
    the jar of deploy/local/build-msk-iam.sh, or $PWEVENT_MSK_IAM_JAR), loaded parent-first in a local
    run; kafka-python its own AWS_MSK_IAM, which needs botocore (the extra `aws`)."""
    jar = tmp_path / "msk-iam.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("PWEVENT_MSK_IAM_JAR", str(jar))
    kafka = settings({"security": {"protocol": "SASL_SSL", "sasl_mechanism": "AWS_MSK_IAM"}}).kafka
    assert kafka.jvm_properties() == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM",
        "sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
        "sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
        "ssl.endpoint.identification.algorithm": "https",
    }
    assert kafka.client_options() == {"security_protocol": "SASL_SSL", "sasl_mechanism": "AWS_MSK_IAM",
                                      "ssl_check_hostname": True}
    assert security_jars(kafka.security) == [jar]
    assert parent_first_patterns(kafka.security) == ("org.apache.flink.kafka.shaded.org.apache.kafka.;"
                                                     "software.amazon.msk.")
    assert local_configuration(stream_settings(parse_config({**BASE, "kafka": {
        "bootstrap": "127.0.0.1:1", "security": {"protocol": "SASL_SSL", "sasl_mechanism": "AWS_MSK_IAM"}}}),
        "/tmp"), None)["classloader.parent-first-patterns.additional"].endswith("software.amazon.msk.")
    monkeypatch.setitem(sys.modules, "botocore", None)
    with pytest.raises(MissingExtraError, match=r"(?s)AWS_MSK_IAM: .*botocore.*install the optional extra `aws`"):
        kafka.client_options()
    monkeypatch.delenv("PWEVENT_MSK_IAM_JAR")
    monkeypatch.setattr("pwevent.jobs.streaming.jars.checkout", lambda: None)
    with pytest.raises(JarError, match=r"AWS_MSK_IAM needs aws-msk-iam-auth 2\.4\.0 relocated .*build-msk-iam\.sh"):
        security_jars(kafka.security)


@pytest.mark.parametrize(("security", "message"), [
    ({"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "AWS_MSK_IAM"},
     "kafka.security.sasl_mechanism AWS_MSK_IAM needs protocol SASL_SSL, not SASL_PLAINTEXT"),
    ({"protocol": "SASL_SSL", "sasl_mechanism": "AWS_MSK_IAM", "username": "u", "password": "p"},
     "kafka.security.password does not apply to sasl_mechanism AWS_MSK_IAM"),
    ({"protocol": "SASL_SSL", "sasl_mechanism": "AWS_MSK_IAM", "properties": {"sasl.jaas.config": "x"}},
     "kafka.security.properties.sasl.jaas.config is set by kafka.security itself"),
])
def test_aws_msk_iam_errors_name_the_key(security: dict, message: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        settings({"security": security})


def test_the_msk_iam_build_names_the_pinned_version() -> None:
    """jobs/streaming/jvm-msk-iam/pom.xml builds the version maven_jars.AWS_MSK_IAM pins (whose
    SHA-256 deploy/local/build-msk-iam.sh checks), and relocates Kafka into the connector's namespace."""
    pom = (Path(__file__).resolve().parents[2] / "jobs" / "streaming" / "jvm-msk-iam" / "pom.xml").read_text()
    assert (f"<groupId>{AWS_MSK_IAM.group}</groupId>\n      <artifactId>{AWS_MSK_IAM.artifact}</artifactId>\n"
            f"      <version>{AWS_MSK_IAM.version}</version>") in pom
    assert "<shadedPattern>org.apache.flink.kafka.shaded.org.apache.kafka</shadedPattern>" in pom
