"""`python -m pwevent.jobs.streaming.jvm_contract --write | --check`: render the contract as the Java
package `pwevent.flink.contract` (jobs/streaming/jvm/pwevent/flink/contract), or fail when the
checked-in classes differ from a fresh rendering."""

from __future__ import annotations

import argparse
import sys

from pwevent.jobs.streaming.jvm_contract.java import COMMAND, FOLDER, drift, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pwevent.jobs.streaming.jvm_contract",
                                     description="The Python/JVM contract (jobs/streaming/jvm_contract) as Java"
                                                 f" source in {FOLDER}.")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="render the Java classes, replacing the checked-in ones")
    action.add_argument("--check", action="store_true",
                        help="exit 1 when the checked-in Java classes differ from a fresh rendering")
    args = parser.parse_args(argv)
    if args.write:
        for name in write():
            print(f"wrote {FOLDER / name}")
        return 0
    stale = drift()
    for name in stale:
        print(f"{FOLDER / name} differs from the contract; run `{COMMAND}`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
