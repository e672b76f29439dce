"""The Schema Registry client as teams run the registry (jobs/common/config.py, `SchemaRegistrySection`;
jobs/common/avro_format.py, `SchemaRegistry`; docs/operations.md, "Security"): over HTTPS with a CA
file and a client certificate, with HTTP basic or bearer authentication, and refused without them.
The registry is the tests' real one behind tests/registry_gateway.py, which adds the TLS and the
authentication the local server does not offer."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

from pwevent.jobs.common.avro_format import RegistryUnavailable, encode_datum, frame
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.common.records import parse_event
from tests.registry_gateway import RegistryGateway, TlsFiles
from tests.schema_registry import LocalSchemaRegistry

EVENT = {"type": "record", "name": "Event", "fields": [
    {"name": "user", "type": "string"}, {"name": "time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "value", "type": "int"}]}
T0_MS = 1_704_067_200_000
BASIC = "Basic " + base64.b64encode(b"pwevent:s3cret-pass").decode()


def _config(registry: dict[str, Any]) -> Any:
    return parse_config({"mechanism": "PBD", "slot": "60s", "origin": T0_MS, "domain": {"type": "cells", "d": 4},
                         "events": {"format": "avro-confluent", "schema_registry": {"retry_for": "1s", **registry}}})


def _tls(tls: TlsFiles, cert: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"ca_file": tls.path("ca.pem")}
    if cert:
        out["client_cert"] = {"cert_file": tls.path("client.pem"), "key_file": tls.path("client.key"),
                              "key_password": "${PWEVENT_T_REGISTRY_KEY}",
                              "keystore": {"location": tls.path("client.p12"),
                                           "password": {"file": tls.path("store-secret")}}}
    return out


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return TlsFiles.make(tmp_path_factory.mktemp("registry-tls"))


@pytest.fixture
def gateway(schema_registry: LocalSchemaRegistry, tls: TlsFiles) -> Iterator[RegistryGateway]:
    gateway = RegistryGateway(schema_registry.url, tls, BASIC, require_client_cert=True)
    gateway.start()
    yield gateway
    gateway.stop()


@pytest.mark.registry
def test_https_with_a_client_certificate_and_basic_auth_and_refusals_without_them(
        schema_registry: LocalSchemaRegistry, gateway: RegistryGateway, tls: TlsFiles,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWEVENT_T_REGISTRY_KEY", tls.key_password)
    monkeypatch.setenv("PWEVENT_T_REGISTRY_PASSWORD", "s3cret-pass")
    url = gateway.url
    schema_id = schema_registry.add("tls-events-value", EVENT)
    raw = frame(schema_id, encode_datum({"user": "u1", "time": T0_MS, "value": 2}, fastavro.parse_schema(EVENT)))
    basic = {"url": url, "username": "pwevent", "password": "${PWEVENT_T_REGISTRY_PASSWORD}"}
    config = _config({**basic, **_tls(tls)})
    assert parse_event(raw, config.events, config.domain).user == "u1"
    assert gateway.forwarded == [f"GET /schemas/ids/{schema_id}"] and not gateway.refused
    shown = repr(config.events.schema_registry)
    assert "s3cret-pass" not in shown and tls.key_password not in shown
    # refused: a wrong password (401), no client certificate (the handshake fails), a CA not given
    # (the gateway's certificate does not verify against the system's CAs)
    monkeypatch.setenv("PWEVENT_T_REGISTRY_PASSWORD", "wrong")
    for registry, message in [({**basic, **_tls(tls)}, "HTTP 401"),
                              ({**basic, **_tls(tls, cert=False)}, "did not answer"),
                              ({**basic}, "CERTIFICATE_VERIFY_FAILED")]:
        refused = _config(registry)
        with pytest.raises(RegistryUnavailable, match=message):
            parse_event(raw, refused.events, refused.domain)
    assert gateway.refused == [f"GET /schemas/ids/{schema_id}"]


@pytest.mark.registry
def test_a_bearer_token_from_a_file(schema_registry: LocalSchemaRegistry, tls: TlsFiles, tmp_path: Path) -> None:
    gateway = RegistryGateway(schema_registry.url, tls, "Bearer eyJ.t0ken.sig")
    url = gateway.start()
    try:
        schema_id = schema_registry.add("bearer-events-value", EVENT)
        raw = frame(schema_id, encode_datum({"user": "u2", "time": T0_MS, "value": 1}, fastavro.parse_schema(EVENT)))
        (tmp_path / "token").write_text("eyJ.t0ken.sig\n")
        config = _config({"url": url, "token": {"file": str(tmp_path / "token")}, **_tls(tls, cert=False)})
        assert parse_event(raw, config.events, config.domain).user == "u2"
        assert "t0ken" not in repr(config.events.schema_registry)
        anonymous = _config({"url": url, **_tls(tls, cert=False)})
        with pytest.raises(RegistryUnavailable, match="HTTP 401"):
            parse_event(raw, anonymous.events, anonymous.domain)
        assert gateway.refused == [f"GET /schemas/ids/{schema_id}"]
    finally:
        gateway.stop()


def test_registry_security_settings_are_checked(tls: TlsFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWEVENT_T_REGISTRY_KEY", "not-the-key's")
    cases = [
        ({"url": "https://r", "username": "u", "password": "p", "token": "t"}, "exclude each other"),
        ({"url": "http://r", **_tls(tls, cert=False)}, "schema_registry.ca_file needs an https:// url"),
        ({"url": "https://r", "ca_file": "/nonexistent.pem"}, "schema_registry.ca_file"),
        ({"url": "https://r", **_tls(tls)}, "the CA file or client certificate does not load"),
    ]
    pem = _tls(tls)
    pem["client_cert"]["keystore"]["type"] = "PEM"
    cases.append(({"url": "https://r", **pem}, "reads PKCS12 or JKS, not PEM"))
    for registry, message in cases:
        with pytest.raises(ConfigError, match=message):
            _config(registry)
