"""benchmarks/bench_avro_steps.py runs every step on a few events (its own check: the fast path's regex
matches every event, both AvroFields' text of the Avro datums and the canonical JSON)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_avro_steps.py"


def test_the_parsing_steps_benchmark_runs_every_step() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--records", "2000", "--rounds", "1"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [line.split("\t")[0] for line in done.stdout.splitlines()[2:]]
    assert steps == ["decode", "decode + re-encode + compare", "AvroFields (whole)", "regex on its text",
                     "regex on JSON"], done.stdout
