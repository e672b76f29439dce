"""Every vector file the Python reference and the JVM share (tests/streaming/data/) is what the
reference writes now (tests/streaming/write_vectors.py): a change of a rule without its files
rewritten, or a file edited by hand, fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.streaming import write_vectors


@pytest.mark.parametrize("path", sorted(write_vectors.files()), ids=lambda path: path.name)
def test_the_file_is_what_the_reference_writes(path: Path) -> None:
    assert path.read_text() == write_vectors.files()[path](), \
        f"{path.name}: run .venv/bin/python -m tests.streaming.write_vectors"


def test_every_file_of_the_data_folder_is_written() -> None:
    assert sorted(write_vectors.DATA.iterdir()) == sorted(write_vectors.files())


def test_check_exits_0_on_the_checked_in_files() -> None:
    assert write_vectors.main(["--check"]) == 0
