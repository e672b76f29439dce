"""benchmarks/bench_stream.py's CPU account and model (docs/benchmarks.md, "Parallelism and CPU per operator"): which
threads count for which vertex, the single-task vertices of a parallelism-1 run, and the model's
rates. Pure functions on made-up samples; the benchmark itself is run by hand."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_stream.py"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_stream", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


bench = _bench()
SOURCE = "Source: kafka events -> parse events"
POPULATION = "Population -> write releases"

DUMP = f'''2026-12-06 09:00:00
Full thread dump OpenJDK 64-Bit Server VM (17.0.15+6-Debian-1deb12u1 mixed mode, sharing):

"{SOURCE} (1/2)#0" #60 prio=5 os_prio=0 cpu=1000.00ms elapsed=20.00s tid=0x01 nid=0x10 runnable
"Source Data Fetcher for {SOURCE} (1/2)#0" #61 prio=5 os_prio=0 cpu=1.00ms elapsed=20.00s tid=0x02 nid=0x11 runnable
"{SOURCE} (2/2)#0" #62 prio=5 os_prio=0 cpu=1.00ms elapsed=20.00s tid=0x03 nid=0x12 runnable
"{POPULATION} (1/1)#0" #63 prio=5 os_prio=0 cpu=1.00ms elapsed=20.00s tid=0x04 nid=0x13 runnable
"GC Thread#0" os_prio=0 cpu=1.00ms elapsed=20.00s tid=0x05 nid=0x14 runnable
"kafka-producer-network-thread | producer-bench1-0" #70 daemon prio=5 os_prio=0 tid=0x06 nid=0x15 runnable
'''


def test_thread_names_come_from_the_dump() -> None:
    names = bench.parse_thread_dump(DUMP)
    assert names[0x10] == f"{SOURCE} (1/2)#0" and names[0x11] == f"Source Data Fetcher for {SOURCE} (1/2)#0"
    assert names[0x14] == "GC Thread#0" and len(names) == 6


def test_a_vertex_counts_its_task_threads_and_the_threads_named_after_them() -> None:
    tick = os.sysconf("SC_CLK_TCK")
    pid = 100
    start = bench.CpuSample({pid: ("java", 0), 200: ("python", 0)}, {(pid, t): 0 for t in range(0x10, 0x16)},
                            [pid], 0)
    # ticks per thread over the run: source 2 x 3 s + fetcher 1 s, population 0.5 s, GC 1 s, producer 0.5 s
    spent = {0x10: 3, 0x11: 1, 0x12: 3, 0x13: 0.5, 0x14: 1, 0x15: 0.5}
    threads = {(pid, t): int(s * tick) for t, s in spent.items()}
    jvm = sum(threads.values()) + 2 * tick  # 2 s of threads that ended before the last sample
    end = bench.CpuSample({pid: ("java", jvm), 200: ("python", tick)}, threads, [pid], 4 * tick)
    cpu = bench.cpu_account(start, end, {pid: bench.parse_thread_dump(DUMP)}, 1_000_000,
                            {SOURCE: {"parallelism": 2, "records_read": 10, "busy_ms": 9000.0}})
    vertices = {v["name"]: v for v in cpu["vertices"]}
    assert set(vertices) == {SOURCE, POPULATION}
    assert vertices[SOURCE]["cpu_s_per_m"] == 7.0 and vertices[SOURCE]["helper_cpu_s_per_m"] == 1.0
    assert vertices[SOURCE]["parallelism"] == 2 and vertices[SOURCE]["busy_s_per_m"] == 9.0
    assert vertices[POPULATION]["cpu_s_per_m"] == 0.5 and vertices[POPULATION]["busy_s_per_m"] is None
    assert cpu["vertices_s_per_m"] == 7.5 and cpu["other_jvm_s_per_m"] == 3.5
    assert cpu["other_jvm_groups"] == {"(threads ended before the last sample)": 2.0, "GC Thread#N": 1.0,
                                       "kafka-producer-network-thread": 0.5}
    assert cpu["other_processes_s_per_m"] == {"python": 1.0}
    assert cpu["total_s_per_m"] == 12.0 and cpu["broker_s_per_m"] == 4.0


def _run(name: str, parallelism: int, vertices: list[tuple[str, int, float]]) -> Any:
    result = bench.RunResult(name, 1_000_000, seconds=10.0, parallelism=parallelism)
    result.cpu = {"vertices": [{"name": n, "parallelism": p, "cpu_s_per_m": c} for n, p, c in vertices],
                  "total_s_per_m": 20.0}
    return result


def test_single_task_vertices_and_the_model() -> None:
    # at parallelism 1 the Population is chained with a sink that runs at 2 in the parallel run
    p1 = _run("job PBD p1", 1, [(SOURCE, 1, 8.0), (f"{POPULATION} -> sink_audit", 1, 0.2)])
    p2 = _run("job PBD p2", 2, [(SOURCE, 2, 10.0), (POPULATION, 1, 0.25), ("sink_audit", 2, 1.0)])
    ceiling = _run("ceiling (raw)", 1, [("Source: events", 1, 5.0)])
    single = bench.single_task_vertices([ceiling, p1, p2])
    assert single == {"job PBD p1": {f"{POPULATION} -> sink_audit"}, "job PBD p2": {POPULATION}}
    bench.add_models([ceiling, p1, p2])
    assert ceiling.model is None
    assert p2.model["single_task_share"] == 0.0125 and p2.model["single_task_share_of_vertices"] == 0.0222
    assert p2.model["measured_rate"] == 100_000
    # p / 10 us against 1 / 0.25 us: the source bounds p = 4 and 8 (400k, 800k), the Population 16 (4M)
    rates = p2.model["rates"]
    assert rates["4"] == {"events_per_s": 400_000, "bottleneck": SOURCE, "single_task": False, "cores": 8.0,
                        "p_cores_events_per_s": 200_000}
    assert rates["16"]["events_per_s"] == 1_600_000 and rates["16"]["bottleneck"] == SOURCE
    assert bench.model(p2.cpu, {POPULATION}, None, (64,))["rates"]["64"] == {
        "events_per_s": 4_000_000, "bottleneck": POPULATION, "single_task": True, "cores": 80.0,
        "p_cores_events_per_s": 3_200_000}
    assert p1.model["rates"]["4"]["events_per_s"] == 500_000
