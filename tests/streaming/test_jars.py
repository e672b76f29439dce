"""Finding and fetching the job's jars and Python files outside a checkout (jobs/streaming/jars.py,
jobs/streaming/locations.py). The downloads come from a Maven-layout folder (a file:// repository),
so these tests need no network; the wheel test (tests/integration/test_wheel_install.py) runs the
whole path in a fresh venv."""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path

import pytest

from pwevent.jobs.streaming.jars import (
    FLINK_AVRO,
    KAFKA_CONNECTOR,
    OAUTHBEARER_JARS,
    JarError,
    MavenJar,
    download,
    prebuilt_jar,
    security_jars,
)
from pwevent.jobs.streaming.kafka_security import KafkaSecurity, OAuth, Secret
from pwevent.jobs.streaming.locations import JVM_JAR_IN_PACKAGE, PACKAGE_ROOT, python_root

JAR = b"PK\x03\x04 not really a jar, but bytes with a known digest"
PINNED = MavenJar("org.example", "thing", "1.0", hashlib.sha256(JAR).hexdigest())


def repository(tmp_path: Path, content: bytes) -> str:
    folder = tmp_path / "maven"
    path = Path(PINNED.url(folder.as_uri()).removeprefix("file://"))
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    return folder.as_uri()


def test_a_download_with_the_pinned_digest_is_kept_and_reused(tmp_path: Path) -> None:
    repo = repository(tmp_path, JAR)
    jar = download(PINNED, tmp_path / "cache", repo)
    assert jar.read_bytes() == JAR and jar.name == "thing-1.0.jar"
    Path(repo.removeprefix("file://"), "org/example/thing/1.0/thing-1.0.jar").unlink()
    assert download(PINNED, tmp_path / "cache", repo) == jar  # from the cache, not the repository


def test_a_download_with_another_digest_is_refused_and_not_kept(tmp_path: Path) -> None:
    repo = repository(tmp_path, JAR + b"tampered")
    with pytest.raises(JarError, match="SHA-256 .* is not the pinned"):
        download(PINNED, tmp_path / "cache", repo)
    assert list((tmp_path / "cache").iterdir()) == []


def test_an_unreachable_repository_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(JarError, match="PWEVENT_KAFKA_CONNECTOR_JAR"):
        download(replace(PINNED, version="2.0"), tmp_path / "cache", repository(tmp_path, JAR))


@pytest.mark.parametrize(("variable", "pinned"), [("FLINK_CONNECTOR", KAFKA_CONNECTOR), ("FLINK_AVRO", FLINK_AVRO)])
def test_the_pinned_jars_are_the_ones_the_scripts_fetch(variable: str, pinned: MavenJar) -> None:
    script = (PACKAGE_ROOT / "deploy" / "local" / "fetch-jars.sh").read_text()
    coordinate = re.search(rf'{variable}="([^"]+)"', script)
    assert coordinate is not None
    assert coordinate.group(1) == f"{pinned.group}:{pinned.artifact}:{pinned.version}"


def test_the_workers_get_a_complete_copy_of_real_files_named_by_their_digest(tmp_path: Path) -> None:
    """The copy is a package as installed: sources and the JVM classes (`flink run -py` imports the
    job from it and must find them there, tests/integration/test_cluster_submit.py)."""
    classes = tmp_path / "classes.jar"
    classes.write_bytes(JAR)
    root = python_root(classes)
    assert not any(p.is_symlink() for p in root.rglob("*"))
    assert (root / "pwevent" / "jobs" / "streaming" / "hosts.py").read_bytes() == \
        (PACKAGE_ROOT / "jobs" / "streaming" / "hosts.py").read_bytes()
    assert (root / "pwevent" / JVM_JAR_IN_PACKAGE).read_bytes() == JAR
    assert python_root(classes) == root  # unchanged content: the same folder, not a new copy
    classes.write_bytes(JAR + b"changed")
    assert python_root(classes) != root


def test_only_oauthbearer_adds_jars_and_they_come_pinned_from_the_repository(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jackson for the connector's OAUTHBEARER login (docs/operations.md, "Security"), fetched
    into the jar cache from $PWEVENT_MAVEN_REPOSITORY and checked against the pins."""
    maven = tmp_path / "maven"
    pinned = []
    for jar in OAUTHBEARER_JARS:
        content = f"{jar.artifact} stand-in".encode()
        path = Path(jar.url(maven.as_uri()).removeprefix("file://"))
        path.parent.mkdir(parents=True)
        path.write_bytes(content)
        pinned.append(replace(jar, sha256=hashlib.sha256(content).hexdigest()))
    monkeypatch.setattr("pwevent.jobs.streaming.jars.OAUTHBEARER_JARS", tuple(pinned))
    monkeypatch.setenv("PWEVENT_MAVEN_REPOSITORY", maven.as_uri())
    monkeypatch.setenv("PWEVENT_CACHE", str(tmp_path / "cache"))
    scram = KafkaSecurity(protocol="SASL_SSL", username="u", password=Secret("p"))
    assert security_jars(scram) == [] and security_jars(KafkaSecurity()) == []
    oauth = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", oauth=OAuth(unsecured_subject="u"))
    assert [jar.name for jar in security_jars(oauth)] == [jar.file_name for jar in OAUTHBEARER_JARS]
    assert all((tmp_path / "cache" / "flink" / jar.file_name).is_file() for jar in OAUTHBEARER_JARS)


def test_a_prebuilt_jar_named_by_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """$PWEVENT_JVM_JAR and $PWEVENT_MSK_IAM_JAR: unset or empty is no jar, a missing file an error
    naming the variable, a file that jar."""
    for variable in ("PWEVENT_JVM_JAR", "PWEVENT_MSK_IAM_JAR"):
        monkeypatch.delenv(variable, raising=False)
        assert prebuilt_jar(variable) is None
        monkeypatch.setenv(variable, "")
        assert prebuilt_jar(variable) is None
        monkeypatch.setenv(variable, str(tmp_path / "absent.jar"))
        with pytest.raises(JarError, match=rf"\${variable}: no file .*absent\.jar"):
            prebuilt_jar(variable)
        jar = tmp_path / "built.jar"
        jar.write_bytes(b"PK")
        monkeypatch.setenv(variable, str(jar))
        assert prebuilt_jar(variable) == jar
