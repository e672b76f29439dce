"""Speed and memory of the mechanism core (issue 2 targets), printed as a table.

Runs in-memory streams through `jobs.engine.Engine`, one process per case so peak memory (ru_maxrss)
is per case. Time covers the mechanism only (ledgers, OBS, sampling, noise, release); generating the
data is timed separately. Usage:

    .venv/bin/python benchmarks/bench_core.py            # every case, writes docs/benchmarks.md
                                                         # (its "## Notes" section and after are kept)
    .venv/bin/python benchmarks/bench_core.py --quick    # 1,000 slots per case, no file
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CASES = [
    # name, mechanism, users, slots, d, noise, target seconds
    ("paper-scale PBD", "PBD", 10_000, 10_000, 2, "opendp", 10),
    ("paper-scale PBA", "PBA", 10_000, 10_000, 2, "opendp", 10),
    ("paper-scale DPBD", "DPBD", 10_000, 10_000, 2, "opendp", 30),
    ("paper-scale DPBA", "DPBA", 10_000, 10_000, 2, "opendp", 30),
    ("paper-scale PBD (numpy-fast noise)", "PBD", 10_000, 10_000, 2, "numpy-fast", 10),
    ("paper-scale DPBD (numpy-fast noise)", "DPBD", 10_000, 10_000, 2, "numpy-fast", 30),
    ("1M users, d=100, PBD", "PBD", 1_000_000, 1_000, 100, "opendp", 60),
]


def run_case(mechanism: str, users: int, slots: int, d: int, noise: str) -> dict[str, float]:
    from pwevent.jobs.common.engine import Engine
    from pwevent.jobs.common.synthetic import RequirementDraw, SyntheticStream
    from pwevent.operators.noise import make_randomness
    from pwevent.operators.registry import mechanism as make_mechanism

    stream = SyntheticStream("Sin", users, slots, seed=1)
    spec = make_mechanism(mechanism, 120, 0.6)
    engine = Engine(spec, d, make_randomness(noise, None), horizon=1000)
    start = time.perf_counter()
    if spec.dynamic:
        user_type, schedule = RequirementDraw(0.6, 120, types=10, change_every=500).dynamic(users, slots, 1)
        for user in range(users):
            engine.register(user, schedule[1][int(user_type[user])], 1)
    else:
        for user, requirement in enumerate(RequirementDraw(0.6, 120).fixed(users, 1)):
            engine.register(user, requirement, 1)
    setup = time.perf_counter() - start
    everyone = np.arange(users)
    rng = np.random.default_rng(5)
    mech_time = gen_time = 0.0
    kinds: dict[str, int] = {}
    values_iter = stream.values() if d == 2 else None
    for slot in range(1, slots + 1):
        g0 = time.perf_counter()
        values = next(values_iter) if values_iter is not None else rng.integers(0, d, users)
        g1 = time.perf_counter()
        if spec.dynamic and slot in schedule and slot > 1:
            for user in range(users):
                engine.redeclare(user, schedule[slot][int(user_type[user])], slot)
        outcome, _ = engine.step(slot, everyone, values)
        mech_time += time.perf_counter() - g1
        gen_time += g1 - g0
        kinds[outcome.kind.value] = kinds.get(outcome.kind.value, 0) + 1
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"setup_s": setup, "mechanism_s": mech_time, "generate_s": gen_time, "peak_mb": peak_mb,
            "classes": len(engine.population), "kinds": kinds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 slots per case; print only")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        name, mech, users, slots, d, noise, _ = next(c for c in CASES if c[0] == args.case)
        slots = min(slots, 1000) if args.quick else slots
        print(json.dumps(run_case(mech, users, slots, d, noise)))
        return 0
    rows = []
    header = ("| case | users | slots | d | noise | setup s | mechanism s | target s | data gen s | peak MB "
              "| decisions |")
    print(header)
    print("|" + "---|" * 11)
    for name, _, users, slots, d, noise, target in CASES:
        cmd = [sys.executable, __file__, "--case", name] + (["--quick"] if args.quick else [])
        out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        used = min(slots, 1000) if args.quick else slots
        row = (f"| {name} | {users:,} | {used:,} | {d} | {noise} | {out['setup_s']:.1f} | {out['mechanism_s']:.1f} | "
               f"{target} | {out['generate_s']:.1f} | {out['peak_mb']:.0f} | "
               + ", ".join(f"{k} {v}" for k, v in sorted(out["kinds"].items())) + " |")
        print(row, flush=True)
        rows.append(row)
    if not args.quick:
        doc = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
        begin, end = "<!-- bench_core:begin (written by benchmarks/bench_core.py) -->\n", "<!-- bench_core:end -->"
        old = doc.read_text()
        if begin not in old or end not in old:
            print(f"bench_core: {doc} lacks the markers of its table; not written", file=sys.stderr)
            return 1
        table = (
            f"`{Path(sys.executable).name} benchmarks/bench_core.py` on {time.strftime('%Y-%m-%d')}, "
            "2-core machine, one process per case. `mechanism s` is the target's measure (ledgers, OBS, "
            "sampling, noise, release; data generation excluded and shown apart); `setup s` registers the users; "
            "peak MB is the process's max RSS, data included.\n\n" + header + "\n|" + "---|" * 11 + "\n"
            + "\n".join(rows) + "\n"
        )
        doc.write_text(old[:old.index(begin) + len(begin)] + table + old[old.index(end):])
    return 0


if __name__ == "__main__":
    sys.exit(main())
