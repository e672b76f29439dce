"""benchmarks/bench_registration.py runs the hosts' calls of a registration end to end on a few
records (its own checks: one change and at least one audit line per registration)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_registration.py"


def test_the_registration_benchmark_runs_every_step() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--records", "300", "--repeat", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [line.split()[0] for line in done.stdout.splitlines()[2:]]
    assert steps == ["ParseRequirements", "Membership", "Membership", "Population", "Population", "sum"], done.stdout
