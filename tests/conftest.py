"""Fixtures shared by the test folders."""

from __future__ import annotations

import pytest

from tests.corpus import poison_records


@pytest.fixture(scope="session")
def poison() -> list[tuple[str, bytes]]:
    """The poison corpus (tests/corpus), the big records generated once per session."""
    return poison_records()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs the broker or a mini-cluster is slow as well, so that `-m "not slow"`
    selects exactly the unit tests and `-m slow` everything else, whatever a file's own marks say."""
    for item in items:
        if item.get_closest_marker("kafka") or item.get_closest_marker("flink"):
            if not item.get_closest_marker("slow"):
                item.add_marker(pytest.mark.slow)
