"""The release topic's formats against a real broker, a real Schema Registry (Rivven's rivven-schema,
tests/schema_registry.py) and Flink's mini-cluster (docs/formats.md, "Release"; docs/consuming.md).

- Every format: a seeded replay's releases, encoded as the job encodes them (their schema registered
  under `<topic>-value`) and written in committed transactions, with a byte-identical copy of one
  slot in an aborted one (what a failover leaves): `pwevent tail` prints every slot,
  `pwevent audit --release-topic` passes the full audit; a second, different draw of one slot in an
  aborted transaction fails it with `release_redrawn`.
- The consumer guide's snippets, run as written (only the addresses and the topic replaced): pandas
  reads the `json` topic; Flink SQL reads the `avro-confluent` topic typed, through the registry, and
  in its long form; `upsert-kafka` sees one row per slot although the topic holds a slot twice.
- The job itself in `avro-confluent`: its releases equal the replay's, pass the full audit, and
  Flink SQL reads them typed through the registry; across kills and restores every slot's records
  are byte-identical.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka import KafkaProducer

from pwevent.jobs.common.files import iso
from pwevent.jobs.offline.replay import run_replay
from pwevent.jobs.streaming.jars import connector_jar, maven_repository
from pwevent.jobs.streaming.kafka_io import producer, read_topic
from pwevent.jobs.streaming.locations import jar_cache
from pwevent.jobs.streaming.maven_jars import MavenJar, download
from pwevent.jobs.streaming.produce import produce_files
from pwevent.jobs.streaming.release_format import release_decoder, release_encoder, value_subject
from pwevent.jobs.streaming.settings import load_settings
from tests.integration.conftest import (
    PWEVENT,
    REPO,
    SEED,
    TEST_ORIGIN_MS,
    check_equals_replay,
    generate,
    load_script,
    make_job,
    replay,
)
from tests.integration.released_once import SEED_KILLS, kill_and_restore, kill_delays, released_once
from tests.schema_registry import LocalSchemaRegistry

pytestmark = [pytest.mark.kafka, pytest.mark.registry, pytest.mark.slow]

#: Flink's Avro format with the Confluent Schema Registry client, for the guide's Flink SQL (not a jar
#: the job uses): the release of the Flink of `pwevent[stream]`'s minor version.
FLINK_AVRO_CONFLUENT = MavenJar("org.apache.flink", "flink-sql-avro-confluent-registry", "2.2.0",
                                "dc331e14107ded6e07f5f77321aa06d8019aa9f33654d0658e49648409b5b80d")
GUIDE = REPO / "docs" / "consuming.md"
FORMATS = ("json", "json-confluent", "avro-confluent")
SLOTS = 10


def snippets() -> dict[str, str]:
    """The guide's snippets that run in the tests, by name (`<!-- snippet: NAME -->` before a fence)."""
    return dict(re.findall(r"<!-- snippet: ([\w-]+) -->\n```\w+\n(.*?)```", GUIDE.read_text(), re.S))


def placed(snippet: str, bootstrap: str, topic: str, registry: str) -> str:
    """A snippet with this test's broker, topic and registry in place of the guide's."""
    return snippet.replace("localhost:9092", bootstrap).replace("pwevent.releases", topic) \
        .replace("http://localhost:8081", registry)


def test_the_guide_has_the_snippets_this_file_runs() -> None:
    assert set(snippets()) == {"pandas-json", "flink-sql-avro", "flink-sql-long", "flink-sql-upsert"}


class FormatRun:
    """A replay's releases and spend log, and a release topic of its own in `release_format`."""

    def __init__(self, bootstrap: str, registry: str, folder: Path, release_format: str) -> None:
        name = f"t{uuid.uuid4().hex[:8]}"
        roles = ("events", "requirements", "releases", "dead_letters", "audit")
        release: dict[str, Any] = {"format": release_format}
        if release_format != "json":
            release["schema_registry"] = {"url": registry, "retry_for": "60s"}
        self.config_path = folder / "config.yaml"
        self.config_path.write_text(yaml.safe_dump({
            "mechanism": "PBD", "slot": "60s", "origin": iso(TEST_ORIGIN_MS), "domain": {"type": "binary"},
            "noise": "numpy-fast", "caps": {"max_w": 200}, "release": release,
            "kafka": {"bootstrap": bootstrap, "topics": {role: f"{name}.{role}" for role in roles}}}))
        self.bootstrap, self.registry = bootstrap, registry
        self.config, settings = load_settings(str(self.config_path))
        self.kafka, self.topic = settings.kafka, settings.kafka.topics["releases"]
        assert load_script("create-topics.py").create_topics(bootstrap, {self.topic: 1}) == {self.topic: "created"}
        events, self.requirements = generate(folder, users=20, slots=SLOTS, w=5)
        self.spend = str(folder / "spend.jsonl")
        run_replay(self.config, events, self.requirements, str(folder / "releases.jsonl"), self.spend, seed=SEED,
                   through=SLOTS)
        self.releases = [json.loads(line) for line in (folder / "releases.jsonl").read_text().splitlines()]
        self.encoder = release_encoder(settings.release, self.topic)  # registers the schema, as the job does
        self.transactional: KafkaProducer = producer(self.kafka, transactional_id=f"{name}-writer")
        self.transactional.init_transactions()

    def write(self, releases: list[dict[str, Any]], commit: bool = True) -> None:
        """`releases`, encoded, each keyed by its slot, in one transaction, committed or aborted."""
        self.transactional.begin_transaction()
        for release in releases:
            self.transactional.send(self.topic, key=str(release["slot"]).encode(), value=self.encoder.encode(release))
        self.transactional.flush()
        if commit:
            self.transactional.commit_transaction()
        else:
            self.transactional.abort_transaction()

    def pwevent(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*PWEVENT, *args, "--config", str(self.config_path)], capture_output=True, text=True,
                              timeout=300)

    def full_audit(self) -> subprocess.CompletedProcess[str]:
        return self.pwevent("audit", "--release-topic", "--spend-log", self.spend, "--requirements", self.requirements)


@pytest.mark.parametrize("release_format", FORMATS)
def test_tail_and_the_topic_audit_read_every_format(kafka_bootstrap: str, schema_registry: LocalSchemaRegistry,
                                                    tmp_path: Path, release_format: str) -> None:
    run = FormatRun(kafka_bootstrap, schema_registry.url, tmp_path, release_format)
    try:
        run.write(run.releases)
        run.write([run.releases[3]], commit=False)  # an aborted byte-identical copy, as a failover leaves
        values = [m.value for m in read_topic(run.kafka, run.topic)]
        assert values == [run.encoder.encode(r) for r in run.releases]
        if release_format == "json":
            assert values[0][:1] == b"{"
        else:  # the Confluent frame, with the id the registry gives the release's schema under <topic>-value
            assert values[0][:5] == b"\x00" + run.encoder.schema_id.to_bytes(4, "big")  # type: ignore[union-attr]
            latest = schema_registry._call("GET", f"/subjects/{value_subject(run.topic)}/versions/latest")
            assert latest["id"] == run.encoder.schema_id
        assert [release_decoder(load_settings(str(run.config_path))[1].release).decode(v) for v in values] \
            == run.releases

        shown = run.pwevent("tail", "--max-slots", str(SLOTS), "--timeout", "120")
        assert shown.returncode == 0, shown.stderr
        rows = shown.stdout.splitlines()[1:]
        assert [int(row.split()[0]) for row in rows] == list(range(1, SLOTS + 1)), shown.stdout
        assert all(row.split()[2] == r["kind"] for row, r in zip(rows, run.releases, strict=True))

        clean = run.full_audit()
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert f"{SLOTS + 1} records read_uncommitted ({SLOTS} committed) for {SLOTS} slots" in clean.stdout

        slot = run.releases[6]
        run.write([{**slot, "counts": [c + 3 for c in slot["counts"]]}], commit=False)  # a second draw, aborted
        redrawn = run.full_audit()
        assert redrawn.returncode == 1, redrawn.stdout + redrawn.stderr
        assert f"slot {slot['slot']}: release_redrawn: 2 different records" in redrawn.stdout, redrawn.stdout
    finally:
        run.transactional.close()


def test_pandas_reads_the_json_topic_as_the_guide_says(kafka_bootstrap: str, schema_registry: LocalSchemaRegistry,
                                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = FormatRun(kafka_bootstrap, schema_registry.url, tmp_path, "json")
    try:
        run.write(run.releases)
        run.write([run.releases[3]], commit=False)
        namespace: dict[str, Any] = {}
        exec(placed(snippets()["pandas-json"], kafka_bootstrap, run.topic, schema_registry.url), namespace)
    finally:
        run.transactional.close()
    releases, cells = namespace["releases"], namespace["cells"]
    assert list(releases["slot"]) == list(range(1, SLOTS + 1))
    assert list(releases["kind"]) == [r["kind"] for r in run.releases]
    assert len(cells) == 2 * SLOTS and list(cells["cell"]) == [0, 1] * SLOTS
    assert [int(n) for n in cells["counts"]] == [c for r in run.releases for c in r["counts"]]
    assert list(cells["low"]) == [low for r in run.releases for low, _ in r["interval"]]
    assert "cell" in capsys.readouterr().out


def flink_sql(bootstrap: str, topic: str, registry: str, names: tuple[str, ...]) -> list[list[Any]]:
    """The rows of each SELECT of the guide's snippets `names`, run in order in one table environment
    (the Kafka connector and Flink's Avro format with the registry client on its class path); a
    changelog's rows materialised by their first column (the key)."""
    from pyflink.common import RowKind
    from pyflink.table import EnvironmentSettings, TableEnvironment

    confluent = download(FLINK_AVRO_CONFLUENT, jar_cache() / "flink", maven_repository())
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("parallelism.default", "1")
    t_env.get_config().set("pipeline.jars", f"{connector_jar().as_uri()};{confluent.as_uri()}")
    results = []
    for name in names:
        for statement in placed(snippets()[name], bootstrap, topic, registry).split(";\n"):
            if not statement.strip():
                continue
            if not statement.strip().startswith("SELECT"):
                t_env.execute_sql(statement).wait()
                continue
            table: dict[Any, list[Any]] = {}
            with t_env.execute_sql(statement).collect() as rows:
                for at, row in enumerate(rows):
                    key = row[0] if name == "flink-sql-upsert" else at
                    if row.get_row_kind() in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                        table[key] = list(row)
                    else:
                        del table[key]
            results.append(list(table.values()))
    return results


@pytest.mark.flink
def test_flink_sql_reads_the_avro_topic_typed_and_upsert_kafka_one_row_per_slot(
        kafka_bootstrap: str, schema_registry: LocalSchemaRegistry, tmp_path: Path) -> None:
    run = FormatRun(kafka_bootstrap, schema_registry.url, tmp_path, "avro-confluent")
    try:
        run.write(run.releases)
        run.write([run.releases[3]])  # a committed byte-identical copy: what a plain reader must deduplicate
    finally:
        run.transactional.close()
    typed, long, upsert = flink_sql(kafka_bootstrap, run.topic, schema_registry.url,
                                    ("flink-sql-avro", "flink-sql-long", "flink-sql-upsert"))
    check_typed(typed, run.releases, copies={4: 2})
    assert sorted(long) == sorted([r["slot"], cell, n] for r in (*run.releases, run.releases[3])
                                  for cell, n in enumerate(r["counts"]))
    assert sorted(upsert, key=lambda row: row[1]) == [[str(r["slot"]), r["slot"], r["kind"]] for r in run.releases]


def check_typed(rows: list[list[Any]], releases: list[dict[str, Any]], copies: dict[int, int] | None = None) -> None:
    """The guide's typed query's rows are the releases' fields, in their SQL types (a slot `copies` times)."""
    want = []
    for release in releases:
        start = datetime.fromisoformat(release["start"].replace("Z", "+00:00")).replace(tzinfo=None)
        row = [release["slot"], start, release["kind"], release["counts"], release["population"],
               release["domain"]["type"]]
        want += [row] * (copies or {}).get(release["slot"], 1)
    assert sorted(rows, key=lambda r: r[0]) == want


@pytest.mark.flink
def test_the_job_writes_avro_confluent_that_flink_sql_reads(streaming_job: Any,
                                                            schema_registry: LocalSchemaRegistry) -> None:
    """The job with `release.format: avro-confluent`: its releases (decoded) equal the replay's and pass
    the full audit, the guide's Flink SQL reads them typed through the registry, and `upsert-kafka`
    one row per slot by the job's keys."""
    job = make_job(streaming_job, "PBD", {"release": {"format": "avro-confluent", "schema_registry": {
        "url": schema_registry.url, "retry_for": "60s"}}})
    events, requirements = generate(job.folder, users=30, slots=SLOTS)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    expected = replay(job, events, requirements, SLOTS)
    releases = check_equals_replay(job, events, requirements, SLOTS, expected)
    raw = [m.value for m in job.read("releases")]
    assert all(value[:1] == b"\x00" and value[5:6] != b"{" for value in raw)  # framed Avro, not JSON
    typed, upsert = flink_sql(job.kafka.require_bootstrap(), job.topics["releases"], schema_registry.url,
                              ("flink-sql-avro", "flink-sql-upsert"))
    decided = sorted((r for r in releases if r["slot"] <= SLOTS), key=lambda r: r["slot"])
    check_typed([row for row in typed if row[0] <= SLOTS], decided)
    assert sorted((row for row in upsert if row[1] <= SLOTS), key=lambda row: row[1]) == \
        [[str(r["slot"]), r["slot"], r["kind"]] for r in decided]  # the job's keys: one row per slot


@pytest.mark.flink
def test_kills_over_a_backlog_in_avro_confluent(streaming_job: Any, schema_registry: LocalSchemaRegistry) -> None:
    """A slot's outcome is drawn once in the Avro format too: KILLS `kill -9` at random points of a
    backlog, each followed by `--restore latest` (as test_released_once_kills.py does in JSON); every
    slot read_uncommitted once or in byte-identical copies, the committed releases equal the replay,
    and `pwevent audit --release-topic` passes."""
    rng = random.Random(SEED_KILLS + 2)
    job = make_job(streaming_job, "PBD", {"flink": {"checkpoint_interval": "2s"}, "release": {
        "format": "avro-confluent", "schema_registry": {"url": schema_registry.url, "retry_for": "60s"}}})
    events, requirements = generate(job.folder, users=40, slots=30, w=5)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=SEED)
    for delay in kill_delays(rng, 3.0):
        kill_and_restore(job, delay, seed=SEED)
    released_once(job, events, requirements, 30)
