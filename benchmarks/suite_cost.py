"""What each test of the suite costs in CPU time: a pytest plugin and a summary.

As a plugin (`-p benchmarks.suite_cost`), every pytest process (each pytest-xdist worker, or the one
process without xdist) moves itself into a cgroup-v1 `cpuacct` group of its own, so that the CPU time
of everything it starts, the brokers, the jobs' JVMs and their Python workers included (also the
processes a test leaves behind), is counted in that group. Each test then appends one row to
`$PWEVENT_SUITE_COST` (default `suite-cost.tsv`): its node id, the CPU seconds of its worker's group
from its set-up to its teardown, its wall seconds and the worker. A worker's session broker counts
in the tests it runs beside. Needs write access to /sys/fs/cgroup/cpuacct (root on a cgroup-v1 host);
without it the plugin stops the run naming the folder.

    bash deploy/local/test.sh -p benchmarks.suite_cost
    python benchmarks/suite_cost.py suite-cost.tsv      # CPU and wall seconds per file, largest first
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

CGROUPS = Path("/sys/fs/cgroup/cpuacct")


class WorkerGroup:
    """The cpuacct group of this pytest process, named after its xdist worker."""

    def __init__(self, worker: str) -> None:
        self.worker = worker
        self.folder = CGROUPS / f"pwevent-suite-{worker}"
        try:
            self.folder.mkdir(exist_ok=True)
            (self.folder / "cgroup.procs").write_text(str(os.getpid()))
        except OSError as err:
            raise pytest.UsageError(f"suite_cost: cannot use the cgroup {self.folder}: {err}") from err

    def cpu_seconds(self) -> float:
        return int((self.folder / "cpuacct.usage").read_text()) / 1e9


_group: WorkerGroup | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _group
    _group = WorkerGroup(os.environ.get("PYTEST_XDIST_WORKER", "main"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, None]:
    assert _group is not None
    cpu0, wall0 = _group.cpu_seconds(), time.monotonic()
    yield
    cpu, wall = _group.cpu_seconds() - cpu0, time.monotonic() - wall0
    with Path(os.environ.get("PWEVENT_SUITE_COST", "suite-cost.tsv")).open("a") as out:
        out.write(f"{item.nodeid}\t{cpu:.1f}\t{wall:.1f}\t{_group.worker}\n")


def by_file(rows: list[str]) -> list[tuple[str, float, float, int]]:
    """(file, CPU seconds, wall seconds, tests) per test file, most CPU first."""
    cpu: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    for row in rows:
        node, cpu_s, wall_s, _ = row.rstrip("\n").split("\t")
        name = node.split("::", 1)[0]
        cpu[name] += float(cpu_s)
        wall[name] += float(wall_s)
        tests[name] += 1
    return sorted(((name, cpu[name], wall[name], tests[name]) for name in cpu), key=lambda r: -r[1])


def main() -> None:
    parser = argparse.ArgumentParser(description="CPU and wall seconds per test file from a suite-cost "
                                                 "table the plugin wrote, most CPU first.")
    parser.add_argument("table", help="the TSV the plugin wrote ($PWEVENT_SUITE_COST)")
    parser.add_argument("--most", type=int, default=30, help="how many files to list (default 30)")
    args = parser.parse_args()
    rows = Path(args.table).read_text().splitlines(keepends=True)
    files = by_file(rows)
    total = sum(f[1] for f in files)
    print(f"{len(rows)} tests, {total:.0f} CPU seconds")
    print("| file | tests | CPU s | share | wall s |\n|---|---|---|---|---|")
    for name, cpu, wall, tests in files[:args.most]:
        print(f"| {name} | {tests} | {cpu:.0f} | {cpu / total:.1%} | {wall:.0f} |")


if __name__ == "__main__":
    main()
