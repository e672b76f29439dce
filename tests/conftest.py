"""Fixtures shared by the test folders."""

from __future__ import annotations

import pytest

from tests.corpus import poison_records


@pytest.fixture(scope="session")
def poison() -> list[tuple[str, bytes]]:
    """The poison corpus (tests/corpus), the big records generated once per session."""
    return poison_records()
