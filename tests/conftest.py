"""Fixtures shared by the test folders."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import suppress

import pytest

from pwevent.jobs.streaming.local_run import with_jvm_args
from tests.corpus import poison_records
from tests.schema_registry import LocalSchemaRegistry

#: This pytest process's folder for the temporary files of the JVMs its tests start.
JVM_TMP = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """The JVMs the tests start that read `JVM_ARGS` (PyFlink's gateway, Flink's scripts) keep their
    temporary files (Flink's RPC jar, 21 MB, which a killed JVM leaves behind) in a folder of this
    process, removed when it ends, not in the machine's /tmp. A job run by `pwevent run` names its
    own folder after this one, which the JVM takes (the last -D wins)."""
    folder = tempfile.mkdtemp(prefix="pwevent-tests-jvm-")
    config.stash[JVM_TMP] = folder
    with suppress(ValueError):  # a $TMPDIR with white space: the JVMs keep their default
        os.environ["JVM_ARGS"] = with_jvm_args(os.environ.get("JVM_ARGS"), f"-Djava.io.tmpdir={folder}")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(config.stash.get(JVM_TMP, ""), ignore_errors=True)


@pytest.fixture(scope="session")
def poison() -> list[tuple[str, bytes]]:
    """The poison corpus (tests/corpus), the big records generated once per session."""
    return poison_records()


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSchemaRegistry]:
    """A real Schema Registry (deploy/local/schema-registry.sh) for the session, stopped by its pid."""
    server = LocalSchemaRegistry(tmp_path_factory.mktemp("schema-registry"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


#: The fixtures that start a resource, and the markers a test that uses one must carry.
RESOURCE_FIXTURES = {"kafka_bootstrap": ("kafka",), "streaming_job": ("kafka",), "schema_registry": ("registry",)}
#: The markers of tests that need a server or a mini-cluster: all of them are slow as well.
RESOURCE_MARKERS = ("kafka", "flink", "registry")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers by resource, enforced: a test that uses a fixture starting the broker or a job must
    carry that resource's markers (a collection error otherwise). Every test that needs the broker, a
    mini-cluster or the Schema Registry is slow as well, so that `-m "not slow"` selects exactly the unit tests and
    `-m slow` everything else, whatever a file's own marks say."""
    for item in items:
        for fixture, markers in RESOURCE_FIXTURES.items():
            used = fixture in getattr(item, "fixturenames", ())
            missing = [m for m in markers if used and not item.get_closest_marker(m)]
            if missing:
                raise pytest.UsageError(f"{item.nodeid} uses {fixture} but is not marked {', '.join(missing)}")
        if any(item.get_closest_marker(m) for m in RESOURCE_MARKERS):
            if not item.get_closest_marker("slow"):
                item.add_marker(pytest.mark.slow)
