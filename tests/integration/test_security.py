"""The job against secured brokers of `deploy/local/kafka.sh start --secure MODE`: scram (SASL_SSL,
SCRAM-SHA-512, the StandardAuthorizer), mtls (client certificates required), oauth (OAUTHBEARER,
Kafka's unsecured JWS validator) and kerberos (GSSAPI, with a KDC of deploy/local/kdc.sh); clients
without the credentials of the mode are refused; and the broker's port across a stop and a start
(docs/operations.md, "Security" and "Runbook")."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, TopicAuthorizationFailedError
from kafka.net.sasl.oauth import AbstractTokenProvider

from pwevent.jobs.streaming.jars import connector_jar, maven_repository, parent_first_patterns, security_jars
from pwevent.jobs.streaming.kafka_acls import acl_plan
from pwevent.jobs.streaming.kafka_io import producer
from pwevent.jobs.streaming.kafka_kerberos import KerberosLoginError
from pwevent.jobs.streaming.kafka_oauth import ClientCredentialsTokens, UnsecuredTokens
from pwevent.jobs.streaming.kafka_security import KafkaSecurity, parse_security
from pwevent.jobs.streaming.locations import jar_cache
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.maven_jars import AWS_MSK_IAM, download
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    KAFKA_SH,
    PWEVENT,
    SEED,
    StreamingJob,
    check_equals_replay,
    generate,
    load_script,
)
from tests.streaming.token_endpoint import Signer, claims_of

pytestmark = [pytest.mark.kafka]


class SecureBroker:
    def __init__(self, run_dir: Path, bootstrap: str) -> None:
        self.run_dir = run_dir
        self.bootstrap = bootstrap
        self.ca = str(run_dir / "tls" / "ca.pem")

    def password(self, user: str) -> str:
        return (self.run_dir / "secrets" / user).read_text().strip()

    def python(self, user: str) -> dict[str, Any]:
        """kafka-python arguments of `user`."""
        return {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": user,
                "sasl_plain_password": self.password(user), "ssl_cafile": self.ca}

    def security(self, user: str, password: str | None = None) -> dict[str, Any]:
        """The `kafka.security` section of `user`."""
        return {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": user,
                "password": password or self.password(user), "ca_file": self.ca}


def _start_broker(tmp_path_factory: pytest.TempPathFactory, *mode: str) -> Iterator[SecureBroker]:
    """A broker of `kafka.sh start --secure MODE` in a fresh run folder, stopped by kafka.sh (its pid)."""
    run_dir = tmp_path_factory.mktemp(f"kafka-{'-'.join(mode) or 'scram'}")
    started = subprocess.run([str(KAFKA_SH), "start", "--secure", *mode, "--run-dir", str(run_dir),
                              "--port", str(free_loopback_port()), "--owner", str(os.getpid())],
                             capture_output=True, text=True, timeout=480)
    assert started.returncode == 0, started.stderr
    try:
        yield SecureBroker(run_dir, started.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    yield from _start_broker(tmp_path_factory)


#: How long a client the broker should refuse tries before it gives up (kafka-python retries a closed
#: connection until its timeouts end); each refusal is then also found in the broker's log.
REFUSED_MS = 4_000


def _write(bootstrap: str, topic: str, timeout_ms: int = 20_000, **security: Any) -> None:
    client = KafkaProducer(bootstrap_servers=bootstrap, max_block_ms=timeout_ms, request_timeout_ms=timeout_ms,
                           bootstrap_timeout_ms=timeout_ms, **security)
    try:
        client.send(topic, b'{"user": "intruder"}').get(timeout=timeout_ms / 1000)
    finally:
        client.close()


def _end_offsets(bootstrap: str, topic: str, timeout_ms: int = 20_000,
                 **security: Any) -> dict[TopicPartition, int]:
    client = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=timeout_ms,
                           bootstrap_timeout_ms=timeout_ms, **security)
    try:
        return client.end_offsets([TopicPartition(topic, 0)])
    finally:
        client.close()


@pytest.mark.flink
def test_the_job_runs_with_credentials_and_others_are_kept_out(
        secure_broker: SecureBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job's password comes from the environment and shows in neither its output nor Flink's
    logs; producers and analysts use their own users; a client without credentials, or with a user
    the ACLs do not name, can neither write the requirements topic nor read the events topic."""
    broker = secure_broker
    password = broker.password("pwevent-job")
    monkeypatch.setenv("PWEVENT_TEST_JOB_PASSWORD", password)
    slots = 4
    job = StreamingJob(broker.bootstrap, tmp_path, "PBD", {
        "kafka": {"security": broker.security("pwevent-job", "${PWEVENT_TEST_JOB_PASSWORD}")},
    }, admin=broker.python("admin"))
    assert password not in job.config_path.read_text()
    failed = load_script("kafka-acls.py").apply_grants(broker.bootstrap, broker.python("admin"), acl_plan(job.kafka))
    assert failed == []
    events, requirements = generate(job.folder, users=20, slots=slots)
    producer_settings = job.kafka.model_copy(update={"security": _security(broker, "pwevent-producer")})
    produce_files(producer_settings, job.config, events, requirements, 0.0)
    try:
        job.start(seed=SEED)
        # Releases and the spend log read as the auditor (pwevent-analyst: releases and audit only).
        job.kafka = job.kafka.model_copy(update={"security": _security(broker, "pwevent-analyst")})
        check_equals_replay(job, events, requirements, slots)
    finally:
        job.stop()

    # Kept out: no credentials (plaintext, or TLS without SASL) and an authenticated user without the ACL.
    topics = job.topics
    before = _log_length(broker)
    with pytest.raises(KafkaError):
        _write(broker.bootstrap, topics["requirements"], REFUSED_MS)
    assert _logged_since(broker, before, "(SSL handshake failed)")
    before = _log_length(broker)
    with pytest.raises(KafkaError):
        _write(broker.bootstrap, topics["requirements"], REFUSED_MS, security_protocol="SSL", ssl_cafile=broker.ca)
    with pytest.raises(KafkaError):
        _end_offsets(broker.bootstrap, topics["events"], REFUSED_MS, security_protocol="SSL", ssl_cafile=broker.ca)
    assert _logged_since(broker, before, "Unexpected Kafka request of type METADATA during SASL handshake")
    with pytest.raises(TopicAuthorizationFailedError):
        _write(broker.bootstrap, topics["requirements"], **broker.python("pwevent-analyst"))
    with pytest.raises(TopicAuthorizationFailedError):
        _end_offsets(broker.bootstrap, topics["events"], **broker.python("pwevent-analyst"))
    # ... while the same calls succeed for the users the ACLs name (so the refusals are the ACLs').
    assert _end_offsets(broker.bootstrap, topics["events"], **broker.python("pwevent-job"))
    client = producer(producer_settings)
    client.send(topics["requirements"], b"{}").get(timeout=20)
    client.close()

    _check_secrets_not_logged(job, password)


def _check_secrets_not_logged(job: StreamingJob, *secrets: str) -> None:
    """No secret is in what the job printed or Flink logged during the run."""
    (run_logs,) = job.run_folders()  # each run logs into its own folder
    flink_logs = [log for log in run_logs.glob("flink-*.log") if log.stat().st_size > 0]
    assert flink_logs, f"no Flink log written during the run in {run_logs}: {list(run_logs.iterdir())}"
    for log in [job.folder / "job-1.log", *(path for path in run_logs.glob("*") if path.is_file())]:
        text = log.read_text(errors="replace")
        for secret in secrets:
            assert secret not in text, f"a secret of the job is in {log}"


def _security(broker: SecureBroker, user: str) -> KafkaSecurity:
    return parse_security(broker.security(user), None)


def _run_job(broker: SecureBroker, tmp_path: Path, security: dict[str, Any], admin: dict[str, Any],
             slots: int = 3) -> StreamingJob:
    """The job, `pwevent produce`'s sender and the release reader all with `security` (the one
    `kafka.security` section); topics made by create-topics.py with `admin`'s section. The job has
    stopped when this returns, its releases and spend log checked against the replay."""
    job = StreamingJob(broker.bootstrap, tmp_path, "PBD", {
        "kafka": {"security": security},
    }, admin=parse_security(admin, str(broker.run_dir)).python_options())
    events, requirements = generate(job.folder, users=20, slots=slots)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    try:
        job.start(seed=SEED)
        check_equals_replay(job, events, requirements, slots)
    finally:
        job.stop()
    return job


def _logged_since(broker: SecureBroker, before: int, text: str) -> bool:
    """Whether the broker logged `text` after the first `before` lines of its log (why it refused)."""
    lines = (broker.run_dir / "logs" / "server.log").read_text(errors="replace").splitlines()[before:]
    return any(text in line for line in lines)


def _log_length(broker: SecureBroker) -> int:
    return len((broker.run_dir / "logs" / "server.log").read_text(errors="replace").splitlines())


@pytest.fixture(scope="module")
def mtls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    yield from _start_broker(tmp_path_factory, "mtls")


def _mtls(broker: SecureBroker, user: str, key_password: str) -> dict[str, Any]:
    """The `kafka.security` section of `user`'s certificate (paths relative to the run folder)."""
    return {"protocol": "SSL", "ca_file": "tls/ca.pem", "client_cert": {
        "cert_file": f"tls/{user}.pem", "key_file": f"tls/{user}.key", "key_password": key_password,
        "keystore": {"location": f"tls/{user}.p12", "password": {"file": f"secrets/{user}"}}}}


@pytest.mark.flink
def test_the_job_runs_with_a_client_certificate_and_clients_without_one_are_refused(
        mtls_broker: SecureBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mTLS (ssl.client.auth=required): the job's Java clients use its PKCS12 keystore (password
    from a mounted file), the producer, the topic creation and the readers its PEM key (password
    from the environment); releases equal the replay's and the key password is in no log. A
    property the section does not name passes through to the Java clients, its value from the
    environment (`kafka.security.properties`: only TLSv1.3, as their logged configuration shows). A
    TLS client without a certificate fails the handshake, which the broker logs as a failed
    authentication, while the same call with the certificate succeeds."""
    broker = mtls_broker
    password = broker.password("pwevent-job")
    monkeypatch.setenv("PWEVENT_TEST_KEY_PASSWORD", password)
    monkeypatch.setenv("PWEVENT_TEST_TLS_PROTOCOLS", "TLSv1.3")
    security = {**_mtls(broker, "pwevent-job", "${PWEVENT_TEST_KEY_PASSWORD}"),
                "properties": {"ssl.enabled.protocols": "${PWEVENT_TEST_TLS_PROTOCOLS}"}}
    (tmp_path / "tls").symlink_to(broker.run_dir / "tls")  # relative paths: the job's folder
    (tmp_path / "secrets").symlink_to(broker.run_dir / "secrets")
    job = _run_job(broker, tmp_path, security, _mtls(broker, "admin", broker.password("admin")))
    assert password not in job.config_path.read_text()
    _check_secrets_not_logged(job, password)
    logs = job.flink_logs()
    assert "ssl.enabled.protocols = [TLSv1.3]" in logs and "ssl.enabled.protocols = [TLSv1.2" not in logs

    before = _log_length(broker)
    with pytest.raises(KafkaError):
        _end_offsets(broker.bootstrap, job.topics["events"], REFUSED_MS, security_protocol="SSL", ssl_cafile=broker.ca)
    with pytest.raises(KafkaError):
        _write(broker.bootstrap, job.topics["requirements"], REFUSED_MS, security_protocol="SSL", ssl_cafile=broker.ca)
    assert _logged_since(broker, before, "(SSL handshake failed)")
    assert _end_offsets(broker.bootstrap, job.topics["events"], **job.kafka.client_options())


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    yield from _start_broker(tmp_path_factory, "oauth")


@pytest.mark.flink
def test_the_job_runs_with_oauthbearer_tokens_and_clients_without_a_valid_token_are_refused(
        oauth_broker: SecureBroker, tmp_path: Path) -> None:
    """OAUTHBEARER (unsecured JWS): the job's Java clients log in with Kafka's unsecured login, the
    Python tools with pwevent's token provider; releases equal the replay's. A client without SASL,
    and one whose token has expired, are refused; a fresh token of the same subject is accepted."""
    broker = oauth_broker
    security = {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "ca_file": broker.ca,
                "oauth": {"unsecured_subject": "pwevent-job"}}
    admin = {**security, "oauth": {"unsecured_subject": "admin"}}
    job = _run_job(broker, tmp_path, security, admin)

    topic = job.topics["events"]
    before = _log_length(broker)
    with pytest.raises(KafkaError):
        _end_offsets(broker.bootstrap, topic, REFUSED_MS, security_protocol="SSL", ssl_cafile=broker.ca)
    assert _logged_since(broker, before, "during SASL handshake")
    oauth = {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "ssl_cafile": broker.ca}
    expired = UnsecuredTokens("pwevent-job", clock=lambda: 1_000_000_000.0)  # exp in 2001
    before = _log_length(broker)
    with pytest.raises(KafkaError):
        _end_offsets(broker.bootstrap, topic, REFUSED_MS, **oauth, sasl_oauth_token_provider=expired)
    assert _logged_since(broker, before, '{"status":"invalid_token"}')
    assert _end_offsets(broker.bootstrap, topic, **oauth, sasl_oauth_token_provider=UnsecuredTokens("pwevent-job"))


@pytest.fixture(scope="module")
def jwks_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    yield from _start_broker(tmp_path_factory, "oauth-jwks")


def _idp(broker: SecureBroker) -> str:
    """The base URL of the oauth-jwks broker's identity provider (deploy/local/token-endpoint.sh)."""
    return (broker.run_dir / "idp" / "endpoint").read_text().strip()


def _grants(broker: SecureBroker) -> list[str]:
    """The identity provider's log: `granted <client>` / `refused <client>: <why>`, one line each."""
    lines = (broker.run_dir / "idp" / "token-endpoint.out").read_text(errors="replace").splitlines()
    return [line for line in lines if line.startswith(("granted ", "refused "))]


def _client_credentials(broker: SecureBroker, user: str) -> dict[str, Any]:
    """The `kafka.security` section of `user` by the client-credentials grant (secret from its file)."""
    return {"protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "ca_file": broker.ca, "oauth": {
        "token_endpoint": f"{_idp(broker)}/oauth2/token", "client_id": user,
        "client_secret": {"file": str(broker.run_dir / "secrets" / user)}}}


class _FixedToken(AbstractTokenProvider):  # type: ignore[misc]
    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def token(self) -> str:
        return self._token


@pytest.mark.flink
def test_the_job_runs_with_signed_tokens_of_the_client_credentials_grant_and_other_tokens_are_refused(
        jwks_broker: SecureBroker, tmp_path: Path) -> None:
    """OAUTHBEARER against a broker that validates signed tokens (Kafka's
    OAuthBearerValidatorCallbackHandler with the JWKS of a local identity provider, RS256, audience
    and issuer checked): the job's Java clients get their tokens by the client-credentials grant
    (Kafka's OAuthBearerLoginCallbackHandler, relocated), the Python tools by the same grant (the
    job's start-up check, `pwevent produce`'s sender, the release reader, `pwevent tail`), all with
    SASL extensions as Confluent Cloud wants them (the broker accepts any; it checks the token); releases
    and the spend log equal the replay's, and the client secret (from a file) is in no log. Refused
    by the broker: a client without SASL, an unsigned token, a token signed by another key, an
    expired one; a wrong secret gets no token from the provider, so no connection either."""
    broker = jwks_broker
    job_security = _client_credentials(broker, "pwevent-job")
    job_security["oauth"]["extensions"] = {"logicalCluster": "lkc-local1", "identityPoolId": "pool-Test9"}
    job = _run_job(broker, tmp_path, job_security, _client_credentials(broker, "admin"))
    shown = subprocess.run([*PWEVENT, "tail", "--config", str(job.config_path), "--max-slots", "3",
                            "--timeout", "60"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout.splitlines()) == 4, shown.stdout  # the header and slots 1-3
    assert "granted pwevent-job" in _grants(broker) and not [g for g in _grants(broker) if g.startswith("refused")]
    _check_secrets_not_logged(job, broker.password("pwevent-job"))

    topic = job.topics["events"]
    oauth: dict[str, Any] = {"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER", "ssl_cafile": broker.ca}
    before = _log_length(broker)
    with pytest.raises(KafkaError):
        _end_offsets(broker.bootstrap, topic, REFUSED_MS, security_protocol="SSL", ssl_cafile=broker.ca)
    assert _logged_since(broker, before, "during SASL handshake")
    base = _idp(broker)
    key = broker.run_dir / "idp" / "signing-key.pem"
    forged: dict[str, AbstractTokenProvider] = {
        "unsigned": UnsecuredTokens("pwevent-job"),
        "signed by another key": _FixedToken(Signer().sign(claims_of(base, "pwevent-job", "kafka", 3600))),
        "expired": _FixedToken(Signer.from_file(key).sign(
            claims_of(base, "pwevent-job", "kafka", 600, now_s=time.time() - 3600))),
    }
    for why, provider in forged.items():
        before = _log_length(broker)
        with pytest.raises(KafkaError):
            _end_offsets(broker.bootstrap, topic, REFUSED_MS, **oauth, sasl_oauth_token_provider=provider)
        assert _logged_since(broker, before, '{"status":"invalid_token"}'), why
    # ... while a token the provider signed now is accepted (so the refusals are the tokens').
    assert _end_offsets(broker.bootstrap, topic, **oauth, sasl_oauth_token_provider=_FixedToken(
        Signer.from_file(key).sign(claims_of(base, "pwevent-job", "kafka", 600))))
    wrong = ClientCredentialsTokens(f"{base}/oauth2/token", "pwevent-job", lambda: "not-the-secret")
    with pytest.raises(KafkaError):
        _end_offsets(broker.bootstrap, topic, REFUSED_MS, **oauth, sasl_oauth_token_provider=wrong)
    assert "refused pwevent-job: wrong secret" in _grants(broker)


#: A login callback handler of the job's own (`kafka.security.oauth.login_callback_handler`), built
#: against the connector's relocated Kafka client: it hands the login module the signed JWT of file
#: `tokenFile` (a JAAS option, as a workload-identity sidecar writes one) and notes each token it hands
#: out in file `logFile`.
TOKEN_FILE_HANDLER = """\
package pwevent.test;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;

public class TokenFileLoginHandler implements AuthenticateCallbackHandler {
    private Path tokenFile;
    private Path logFile;

    @Override
    public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) {
        Map<String, ?> options = entries.get(0).getOptions();
        tokenFile = Path.of((String) options.get("tokenFile"));
        logFile = Path.of((String) options.get("logFile"));
    }

    @Override
    public void handle(Callback[] callbacks) throws IOException, UnsupportedCallbackException {
        for (Callback callback : callbacks) {
            if (!(callback instanceof OAuthBearerTokenCallback)) {
                throw new UnsupportedCallbackException(callback);
            }
            String jwt = Files.readString(tokenFile).trim();
            String claims = new String(Base64.getUrlDecoder().decode(jwt.split("\\\\.")[1]), StandardCharsets.UTF_8);
            String subject = claim(claims, "\\"sub\\":\\"([^\\"]+)\\"");
            long issued = Long.parseLong(claim(claims, "\\"iat\\":(\\\\d+)")) * 1000;
            long expires = Long.parseLong(claim(claims, "\\"exp\\":(\\\\d+)")) * 1000;
            ((OAuthBearerTokenCallback) callback).token(new OAuthBearerToken() {
                public String value() { return jwt; }
                public Set<String> scope() { return Set.of(); }
                public long lifetimeMs() { return expires; }
                public String principalName() { return subject; }
                public Long startTimeMs() { return issued; }
            });
            Files.writeString(logFile, "token of " + subject + "\\n", StandardOpenOption.CREATE,
                              StandardOpenOption.APPEND);
        }
    }

    private static String claim(String claims, String pattern) {
        Matcher found = Pattern.compile(pattern).matcher(claims);
        if (!found.find()) {
            throw new IllegalArgumentException("no claim " + pattern);
        }
        return found.group(1);
    }

    @Override
    public void close() {
    }
}
"""


def _handler_jar(folder: Path) -> Path:
    """TOKEN_FILE_HANDLER compiled against the connector jar (the project's jar cache) into a jar."""
    source = folder / "handler-src" / "pwevent" / "test" / "TokenFileLoginHandler.java"
    source.parent.mkdir(parents=True)
    source.write_text(TOKEN_FILE_HANDLER)
    classes, jar = folder / "handler-classes", folder / "token-file-handler.jar"
    subprocess.run(["javac", "--release", "17", "-cp", str(connector_jar()), "-d", str(classes), str(source)],
                   check=True, capture_output=True, timeout=120)
    subprocess.run(["jar", "--create", "--file", str(jar), "-C", str(classes), "."], check=True, timeout=60)
    return jar


@pytest.mark.flink
def test_the_job_logs_in_with_a_login_callback_handler_of_its_own(jwks_broker: SecureBroker, tmp_path: Path) -> None:
    """`kafka.security.oauth.login_callback_handler`: a handler compiled here against the relocated
    Kafka client, in a jar the job puts on its class path, hands the job's Java clients a signed JWT
    from a file (its JAAS options name the file); the broker validating signed tokens accepts them
    and releases equal the replay's. The Python tools, which cannot run a Java handler, use the
    client-credentials grant given beside it."""
    broker = jwks_broker
    jar = _handler_jar(tmp_path)
    token_file, handed = tmp_path / "token", tmp_path / "handed-out.log"
    token_file.write_text(ClientCredentialsTokens(f"{_idp(broker)}/oauth2/token", "pwevent-job",
                                                  lambda: broker.password("pwevent-job")).token())
    security = _client_credentials(broker, "pwevent-job")
    security["oauth"]["login_callback_handler"] = {
        "class": "pwevent.test.TokenFileLoginHandler", "jars": [jar.name],
        "options": {"tokenFile": str(token_file), "logFile": str(handed)}}
    job = _run_job(broker, tmp_path, security, _client_credentials(broker, "admin"))
    assert handed.read_text().splitlines()[0] == "token of pwevent-job"
    assert "sasl.login.callback.handler.class = class pwevent.test.TokenFileLoginHandler" in job.flink_logs()


#: The job's Java clients as a local run loads them, outside Flink: the class path of PyFlink's gateway
#: (PyFlink's lib, the connector and the section's jars), a Flink user-code class loader over the job's
#: jars (`FlinkUserCodeClassLoaders.create` with the run's `classloader.parent-first-patterns.additional`)
#: as the thread's context class loader, and an Admin client of the section's Java properties asking
#: for the cluster's nodes. Prints where the Kafka client and the login module were loaded, and the
#: failure's causes, one per line.
CLIENT_PROBE = """\
import java.io.FileReader;
import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.util.FlinkUserCodeClassLoaders;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.Admin;

public class ClientProbe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileReader in = new FileReader(args[0])) {
            props.load(in);
        }
        props.put("bootstrap.servers", args[1]);
        props.put("request.timeout.ms", "5000");
        props.put("default.api.timeout.ms", "10000");
        Configuration conf = new Configuration();
        if (!args[2].isEmpty()) {
            conf.setString("classloader.parent-first-patterns.additional", args[2]);
        }
        List<URL> jars = new ArrayList<>();
        for (int n = 3; n < args.length; n++) {
            jars.add(new java.io.File(args[n]).toURI().toURL());
        }
        ClassLoader user = FlinkUserCodeClassLoaders.create(jars.toArray(new URL[0]),
                ClientProbe.class.getClassLoader(), conf);
        Thread.currentThread().setContextClassLoader(user);
        Class<?> client = Class.forName(Admin.class.getName(), true, user);
        System.out.println("kafka client from the " + (client == Admin.class ? "parent" : "user") + " class loader");
        try (Admin admin = Admin.create(props)) {
            System.out.println("nodes " + admin.describeCluster().nodes().get(20, TimeUnit.SECONDS));
        } catch (Throwable error) {
            for (Throwable cause = error; cause != null; cause = cause.getCause()) {
                System.out.println("cause " + cause.getClass().getName() + ": " + cause.getMessage());
            }
        }
    }
}
"""

#: AWS credentials of nobody, in the environment where both sides' default chains find them first
#: (and the instance metadata service off, so that nothing looks beyond loopback).
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
            "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "AWS_REGION": "eu-west-1",
            "AWS_DEFAULT_REGION": "eu-west-1", "AWS_EC2_METADATA_DISABLED": "true"}


def _probe(folder: Path, broker: SecureBroker, props: dict[str, str], parent_first: str, jars: list[Path]) -> str:
    """CLIENT_PROBE's output for Java client properties `props` against `broker`, with `jars` (after
    the connector) on the gateway's class path and the user-code class loader's."""
    import pyflink

    source = folder / "ClientProbe.java"
    source.write_text(CLIENT_PROBE)
    (folder / "client.properties").write_text("".join(
        f"{key}={value.replace(chr(92), chr(92) * 2)}\n" for key, value in props.items()))
    user_jars = [str(connector_jar()), *map(str, jars)]
    class_path = os.pathsep.join([str(Path(pyflink.__file__).parent / "lib" / "*"), *user_jars])
    probed = subprocess.run(["java", "-cp", class_path, str(source), str(folder / "client.properties"),
                             broker.bootstrap, parent_first, *user_jars], capture_output=True, text=True,
                            timeout=180, env={**os.environ, **FAKE_AWS})
    assert probed.returncode == 0, probed.stderr[-3000:]
    return probed.stdout


@pytest.mark.flink
def test_aws_msk_iam_clients_start_their_sasl_exchange(jwks_broker: SecureBroker, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`sasl_mechanism: AWS_MSK_IAM` without AWS: the job's Java clients, loaded as a local run loads
    them (aws-msk-iam-auth relocated by deploy/local/build-msk-iam.sh, parent-first; fake credentials
    in the environment) load AWS's login module and callback handler, make its SASL client and ask a
    broker that has only OAUTHBEARER for AWS_MSK_IAM: its refusal, an unsupported SASL mechanism, is
    the client's error, not a class that fails to load or to cast; with the published jar, not
    relocated, its callback handler fails to load instead (it implements Kafka's own
    AuthenticateCallbackHandler). kafka-python (with botocore) asks the same and is refused the same."""
    broker = jwks_broker
    security = parse_security({"protocol": "SASL_SSL", "sasl_mechanism": "AWS_MSK_IAM", "ca_file": broker.ca}, None)
    jars = security_jars(security)
    before = _log_length(broker)
    out = _probe(tmp_path, broker, security.jvm_properties(), parent_first_patterns(security) or "", jars)
    assert "kafka client from the parent class loader" in out, out
    refused = ("cause org.apache.flink.kafka.shaded.org.apache.kafka.common.errors.UnsupportedSaslMechanismException: "
               "Client SASL mechanism 'AWS_MSK_IAM' not enabled in the server, enabled mechanisms are [OAUTHBEARER]")
    assert refused in out.splitlines(), out
    assert "ClassNotFound" not in out and "ClassCast" not in out and "NoClassDefFound" not in out, out
    assert _logged_since(broker, before, "Unsupported SASL mechanism AWS_MSK_IAM")

    published = download(AWS_MSK_IAM, jar_cache() / "msk-iam", maven_repository())
    unrelocated = _probe(tmp_path, broker, security.jvm_properties(), parent_first_patterns(security) or "",
                         [published])
    assert "UnsupportedSaslMechanismException" not in unrelocated, unrelocated
    assert ("cause java.lang.ClassNotFoundException: org.apache.kafka.common.security.auth.AuthenticateCallbackHandler"
            in unrelocated.splitlines()), unrelocated

    for name, value in FAKE_AWS.items():
        monkeypatch.setenv(name, value)
    before = _log_length(broker)
    with pytest.raises(KafkaError):
        _end_offsets(broker.bootstrap, "any", REFUSED_MS, **security.python_options())
    assert _logged_since(broker, before, "Unsupported SASL mechanism AWS_MSK_IAM")


@pytest.fixture(scope="module")
def kerberos_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    yield from _start_broker(tmp_path_factory, "kerberos")


def _kerberos(broker: SecureBroker, user: str, keytab: Path | None = None) -> dict[str, Any]:
    """The `kafka.security` section of `user` on the Kerberos broker (its KDC's krb5.conf)."""
    kdc = broker.run_dir / "kdc"
    return {"protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI", "ca_file": broker.ca, "kerberos": {
        "principal": f"{user}@PWEVENT.LOCAL", "keytab": str(keytab or kdc / "keytabs" / f"{user}.keytab"),
        "service_name": "kafka", "krb5_conf": str(kdc / "krb5.conf")}}


@pytest.mark.flink
def test_the_job_runs_with_kerberos_and_clients_without_a_ticket_are_refused(
        kerberos_broker: SecureBroker, tmp_path: Path) -> None:
    """GSSAPI against a real KDC: the job's Java clients log in from pwevent-job's keytab (the JDK's
    Krb5LoginModule, the KDC's krb5.conf as java.security.krb5.conf), its Python clients (the start
    check, the producer, the readers) as the same principal from the same keytab (`python_login`, the
    `gssapi` package); releases equal the replay's and the broker logs pwevent-job's logins. A TLS
    client without SASL is refused; a keytab whose key the KDC no longer has gets no ticket."""
    broker = kerberos_broker
    job = _run_job(broker, tmp_path, _kerberos(broker, "pwevent-job"), _kerberos(broker, "admin"))
    logins = [line for line in (broker.run_dir / "logs" / "server.log").read_text(errors="replace").splitlines()
              if "Successfully authenticated client: authenticationID=pwevent-job@PWEVENT.LOCAL" in line]
    assert logins

    before = _log_length(broker)
    with pytest.raises(KafkaError):
        _end_offsets(broker.bootstrap, job.topics["events"], REFUSED_MS, security_protocol="SSL", ssl_cafile=broker.ca)
    assert _logged_since(broker, before, "during SASL handshake")
    # pwevent-producer's key changes in the KDC: a copy of its keytab from before holds an old key
    stale = tmp_path / "stale.keytab"
    stale.write_bytes((broker.run_dir / "kdc" / "keytabs" / "pwevent-producer.keytab").read_bytes())
    kdc_env = {**os.environ, "KRB5_CONFIG": str(broker.run_dir / "kdc" / "krb5.conf"),
               "KRB5_KDC_PROFILE": str(broker.run_dir / "kdc" / "kdc.conf")}
    subprocess.run(["kadmin.local", "-r", "PWEVENT.LOCAL", "-q", "cpw -randkey pwevent-producer@PWEVENT.LOCAL"],
                   env=kdc_env, check=True, capture_output=True, timeout=60)
    logged_in = {name: os.environ.get(name) for name in ("KRB5_CONFIG", "KRB5_CLIENT_KTNAME", "KRB5CCNAME")}
    with pytest.raises(KerberosLoginError, match="pwevent-producer@PWEVENT.LOCAL could not log in"):
        parse_security(_kerberos(broker, "pwevent-producer", stale), None).python_options()
    assert {name: os.environ.get(name) for name in logged_in} == logged_in  # still pwevent-job's login
    assert "PREAUTH_FAILED" in (broker.run_dir / "kdc" / "kdc.log").read_text(errors="replace")


def test_a_restarted_broker_keeps_its_port_and_stops_when_its_owner_exits(tmp_path: Path) -> None:
    """The requested port is taken at the first start: the broker moves to a free one, and a later
    start without --port comes back on that one (clients configured with it find it again). That
    start names an owner (`--owner PID`): once the owner is killed, the broker stops by itself."""
    run_dir = tmp_path / "kafka"
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    busy = holder.getsockname()[1]
    try:
        first = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(run_dir), "--port", str(busy)],
                               capture_output=True, text=True, timeout=180)
        assert first.returncode == 0, first.stderr
        port = int(first.stdout.strip().splitlines()[-1].rsplit(":", 1)[1])
        assert port != busy
        subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], check=True, capture_output=True,
                       timeout=60)
        holder.close()
        owner = subprocess.Popen(["sleep", "600"])
        second = subprocess.run([str(KAFKA_SH), "start", "--run-dir", str(run_dir), "--owner", str(owner.pid)],
                                capture_output=True, text=True, timeout=180)
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip().splitlines()[-1] == f"127.0.0.1:{port}"
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 60  # a guard against a hang, not a measured duration
        while "not running" not in subprocess.run([str(KAFKA_SH), "status", "--run-dir", str(run_dir)],
                                                  capture_output=True, text=True, timeout=60).stdout:
            assert time.monotonic() < deadline, (run_dir / "owner.out").read_text()
            time.sleep(0.5)
        assert "owner" in (run_dir / "owner.out").read_text()
    finally:
        holder.close()
        subprocess.run([str(KAFKA_SH), "stop", "--run-dir", str(run_dir)], capture_output=True, timeout=60)
