"""The release's fields declared once (jobs/common/release_schema.py): the committed JSON Schema and
Avro schema are its renderings, a field added to the declaration is in both and in every format, and
every release of every mechanism and domain goes through each release format
(jobs/streaming/release_format.py) and back unchanged, as the same bytes each time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import jsonschema
import pytest

from pwevent.jobs.common import release_schema
from pwevent.jobs.common.avro_format import CONFLUENT_FRAME_BYTES, RegistryUnavailable, SchemaRegistry, frame
from pwevent.jobs.common.avro_schema import writer_schema
from pwevent.jobs.common.config import ConfigError, SchemaRegistrySection, parse_config
from pwevent.jobs.common.files import DEMO_ORIGIN, write_synthetic
from pwevent.jobs.common.release_schema import Field, Presence, Text, avro_datum, avro_schema, json_schema
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.release_format import NotARelease, ReleaseDecoder, ReleaseEncoder
from pwevent.jobs.streaming.settings import stream_settings
from pwevent.operators.registry import REGISTRY

SCHEMA_ID = 7
DOMAINS = ({"type": "binary"}, {"type": "cells", "d": 3}, {"type": "categories", "values": ["a", "b", "c"]},
           {"type": "grid", "rows": 1, "cols": 3, "bbox": {"min_lat": 40.5, "max_lat": 41.0, "min_lon": -74.3,
                                                           "max_lon": -73.7}},
           {"type": "categories", "values": ["a", "b", "c"], "aliases": {"x": "a"}, "case": "fold", "other": "rest"},
           {"type": "ranges", "edges": [0, 1, 2, 3], "other": "rest"})


def test_the_committed_schemas_are_the_renderings() -> None:
    assert release_schema.main(["--check"]) == 0, "run python -m pwevent.jobs.common.release_schema --write"
    jsonschema.Draft202012Validator.check_schema(json_schema())
    fastavro.parse_schema(json.loads(release_schema.AVRO_SCHEMA_FILE.read_text()))


def test_a_record_of_either_version_with_these_fields_validates() -> None:
    """The job writes the newest version; a topic of a job upgraded from the one before holds both
    (the same fields), and the JSON Schema takes both and no other."""
    assert release_schema.SCHEMA_VERSIONS[-1] == release_schema.RELEASE_SCHEMA_VERSION
    field = jsonschema.Draft202012Validator(json_schema()["properties"]["schema_version"])
    for version in (*release_schema.SCHEMA_VERSIONS, 2, 5):
        assert field.is_valid(version) is (version in release_schema.SCHEMA_VERSIONS)


def test_check_fails_on_a_stale_committed_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "release.avsc"
    stale.write_text(release_schema.AVRO_SCHEMA_FILE.read_text().replace('"slot"', '"slots"'))
    monkeypatch.setattr(release_schema, "AVRO_SCHEMA_FILE", stale)
    assert release_schema.main(["--check"]) == 1
    assert release_schema.main(["--write"]) == 0 and release_schema.main(["--check"]) == 0


def test_a_field_added_once_is_in_both_schemas_and_every_format(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = release_schema.release_fields()
    added = Field("statistic", Text(), "which statistic this release is of", Presence.OPTIONAL)
    monkeypatch.setattr(release_schema, "release_fields", lambda: (*declared, added))
    assert json_schema()["properties"]["statistic"]["type"] == "string"
    assert avro_schema()["fields"][-1] == {"name": "statistic", "type": ["null", "string"], "default": None,
                                           "doc": "which statistic this release is of"}
    record = {**releases_of("PBD", DOMAINS[0])[0], "statistic": "cells"}
    for encoder in encoders():
        assert decoded(encoder, record) == record


def releases_of(mechanism: str, domain: dict[str, Any]) -> list[dict[str, Any]]:
    return RELEASES[(mechanism, json.dumps(domain))]


def _replayed(tmp: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out = {}
    for dynamic in (False, True):
        write_synthetic(SyntheticStream("Sin", 20, 30, seed=3), str(tmp / str(dynamic)), 0.6, 10, 60_000, dynamic,
                        types=3, change_every=10)
    for entry in REGISTRY:
        for domain in DOMAINS:
            d = {"binary": 2}.get(domain["type"], 3)
            folder = tmp / str(entry.dynamic)
            tag = f"{domain['type']}-{len(domain)}"
            events = tmp / f"{entry.name}-{tag}.jsonl"
            events.write_text("".join(  # the synthetic cells 0/1 mapped into the domain's values
                json.dumps({**r, "value": cell_value(domain, r["value"] % d)}) + "\n"
                for r in map(json.loads, (folder / "events.jsonl").read_text().splitlines())))
            config = parse_config({"mechanism": entry.name, "slot": "60s", "origin": DEMO_ORIGIN, "domain": domain,
                                   **entry.global_keys(10, 0.6), "caps": {"max_w": 200}, "noise": "numpy-fast"})
            path = tmp / f"{entry.name}-{tag}.releases.jsonl"
            run_replay(config, str(events), str(folder / "requirements.jsonl"), str(path), str(tmp / "spend.jsonl"),
                       seed=5)
            out[(entry.name, json.dumps(domain))] = [json.loads(line) for line in path.read_text().splitlines()]
    return out


def cell_value(domain: dict[str, Any], cell: int) -> Any:
    if domain["type"] == "categories":
        return domain["values"][cell]
    if domain["type"] == "grid":
        return {"lat": 40.75, "lon": -74.2 + 0.2 * cell}
    return cell


RELEASES: dict[tuple[str, str], list[dict[str, Any]]] = {}


@pytest.fixture(scope="module", autouse=True)
def replayed(tmp_path_factory: pytest.TempPathFactory) -> None:
    RELEASES.update(_replayed(tmp_path_factory.mktemp("replays")))


def encoders() -> list[ReleaseEncoder]:
    return [ReleaseEncoder(), ReleaseEncoder("json-confluent", SCHEMA_ID), ReleaseEncoder("avro-confluent", SCHEMA_ID)]


def registry_with_the_release_schema() -> SchemaRegistry:
    """A registry client whose cache holds the release's Avro schema as id SCHEMA_ID (the real registry
    serves it in tests/integration/test_release_formats.py)."""
    client = SchemaRegistry(SchemaRegistrySection(url="http://127.0.0.1:9", timeout="100ms", retry_for="100ms"))
    client._schemas[SCHEMA_ID] = writer_schema(fastavro.parse_schema(avro_schema()))
    return client


def decoded(encoder: ReleaseEncoder, record: dict[str, Any]) -> dict[str, Any]:
    return ReleaseDecoder(registry_with_the_release_schema()).decode(encoder.encode(record))


@pytest.mark.parametrize("mechanism", REGISTRY.names())
def test_every_release_goes_through_every_format_and_back(mechanism: str) -> None:
    validator = jsonschema.Draft202012Validator(json_schema())
    parsed = fastavro.parse_schema(avro_schema())
    for domain in DOMAINS:
        releases = releases_of(mechanism, domain)
        # with `other`, a categories release names the other cell last among its values
        named_other = "values" in domain and "other" in domain
        described = {**domain, "values": [*domain["values"], domain["other"]]} if named_other else domain
        assert {r["kind"] for r in releases} >= {"publish"} and releases[0]["domain"] == described
        for record in releases:
            validator.validate(record)
            assert fastavro.validation.validate(avro_datum(record), parsed, raise_errors=True)
            for encoder in encoders():
                raw = encoder.encode(record)
                assert raw == encoder.encode(json.loads(json.dumps(record))), "one record, one byte string"
                assert decoded(encoder, record) == record, (encoder.format, record)


def test_the_formats_frames() -> None:
    record = releases_of("Adaptive", DOMAINS[3])[5]
    plain, framed, avro = (encoder.encode(record) for encoder in encoders())
    assert json.loads(plain) == record and plain[:1] == b"{"
    assert framed == frame(SCHEMA_ID, plain)
    assert avro[:CONFLUENT_FRAME_BYTES] == frame(SCHEMA_ID, b"") and len(avro) < len(plain)
    # the Avro form holds the times as timestamp-millis, the JSON form as ISO text
    assert avro_datum(record)["start"].isoformat().replace("+00:00", "Z") == record["start"]


def test_the_decoder_reads_any_format_and_refuses_what_is_none() -> None:
    record = releases_of("PBD", DOMAINS[0])[0]
    plain, framed, avro = (encoder.encode(record) for encoder in encoders())
    without_registry = ReleaseDecoder()
    assert without_registry.decode(plain) == without_registry.decode(framed) == record
    with pytest.raises(RegistryUnavailable, match="release.schema_registry"):
        without_registry.decode(avro)  # fails closed: the start guard must not take the topic for empty
    for junk in (b"", b"\x00\x00", b"[1]", b"not json", frame(SCHEMA_ID, b"\x06garbage"), frame(99, b"\x06")):
        with pytest.raises((NotARelease, RegistryUnavailable)):
            ReleaseDecoder(registry_with_the_release_schema()).decode(junk)


def test_an_optional_field_is_left_out_and_a_nullable_one_kept_null() -> None:
    record = releases_of("PBD", DOMAINS[0])[0]
    assert "family" not in record and "smoothed" in record and record["kept_share"] is None
    back = decoded(encoders()[2], record)
    assert back["kept_share"] is None and "family" not in back and back == record


@pytest.mark.parametrize(("release", "message"), [
    ({"format": "avro"}, "release.format: Input should be 'json', 'json-confluent' or 'avro-confluent'"),
    ({"format": "avro-confluent"}, "release: format avro-confluent registers the release's schema: it needs "
                                   "schema_registry"),
    ({"schema_registry": {"url": "http://registry:8081"}}, "release: format json registers no schema"),
    ({"format": "json-confluent", "schema_registry": {"url": "registry:8081"}}, "release.schema_registry.url"),
])
def test_configuration_errors_name_the_field(release: dict[str, Any], message: str) -> None:
    config = parse_config({"mechanism": "PBD", "slot": "60s", "origin": DEMO_ORIGIN, "domain": {"type": "binary"},
                           "release": release})
    with pytest.raises(ConfigError) as raised:
        stream_settings(config)
    assert message in str(raised.value)
