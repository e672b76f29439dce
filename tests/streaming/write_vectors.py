"""Write the vector files the Python reference and the JVM share (tests/streaming/data/) from the
Python reference, or check that the checked-in ones are what it writes now.

    .venv/bin/python -m tests.streaming.write_vectors            # write every file
    .venv/bin/python -m tests.streaming.write_vectors --check    # exit 1 naming the files that differ

tests/streaming/test_vectors.py runs the check; the JUnit tests under jobs/streaming/jvm-test read
the files (each file's module in tests/streaming/vectors/ says which)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from tests.streaming.vectors import (
    avro_fields,
    event_time,
    first_presence,
    membership,
    pseudonyms,
    slot_rules,
    whole_records,
)

DATA = Path(__file__).parent / "data"
MODULES: list[ModuleType] = [avro_fields, event_time, first_presence, membership, pseudonyms, slot_rules,
                             whole_records]


def files() -> dict[Path, Callable[[], str]]:
    """Every shared vector file and the function that gives its text."""
    return {DATA / module.NAME: module.text for module in MODULES}


def stale() -> list[Path]:
    """The files whose checked-in text is not what the reference writes now."""
    return [path for path, text in files().items() if not path.exists() or path.read_text() != text()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.streaming.write_vectors", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    args = parser.parse_args(argv)
    if args.check:
        differ = stale()
        for path in differ:
            print(f"{path}: not what the reference writes (run python -m tests.streaming.write_vectors)",
                  file=sys.stderr)
        return 1 if differ else 0
    for path, text in files().items():
        path.write_text(text())
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
