"""`python -m pwevent.jobs.streaming.jvm_contract --write | --check`: render the contract as the Java
package `pwevent.flink.contract` (jobs/streaming/jvm/pwevent/flink/contract) and the reason enum of
docs/schemas/dead-letter.schema.json (`schemas`), or fail when the checked-in files differ from a
fresh rendering."""

from __future__ import annotations

import argparse
import sys

from pwevent.jobs.streaming.jvm_contract import schemas
from pwevent.jobs.streaming.jvm_contract.java import COMMAND, FOLDER, drift, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pwevent.jobs.streaming.jvm_contract",
                                     description="The Python/JVM contract (jobs/streaming/jvm_contract) as Java"
                                                 f" source in {FOLDER}, and the reason enum of"
                                                 f" {schemas.DEAD_LETTER_SCHEMA}.")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="render the files, replacing the checked-in ones")
    action.add_argument("--check", action="store_true",
                        help="exit 1 when the checked-in files differ from a fresh rendering")
    args = parser.parse_args(argv)
    if args.write:
        for path in [FOLDER / name for name in write()] + schemas.write():
            print(f"wrote {path}")
        return 0
    stale = [FOLDER / name for name in drift()] + schemas.drift()
    for path in stale:
        print(f"{path} differs from the contract; run `{COMMAND}`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
