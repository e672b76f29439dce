"""The job's operator graph: which operators run Python (docs/streaming.md, Topology), and that the
events reach the (single-subtask) ValidTime on the channels of the subtasks that read them
(docs/streaming.md, "Parsing").

In thread mode every Python operator costs a Java-Python crossing per record, and PyFlink does not
chain Python operators there; reading Kafka, event time, keying, lateness, the latest event per user
and slot, the class lookup and the counts are Java operators on purpose. This test fails when a
change brings another Python operator into the graph (a key selector lambda, a Python timestamp
assigner, `get_side_output`'s identity map).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

# Builds the pipeline (no broker needed: nothing connects before execution) and lists each stream
# node's operator class; run in a child process, so the gateway JVM and PYTHONPATH stay out of pytest.
GRAPH = """
import json, os, sys
from pwevent.jobs.common.config import load_config
from pwevent.jobs.streaming.settings import stream_settings
from pwevent.jobs.streaming.graph import build_pipeline
from pwevent.jobs.streaming.job import make_environment
config = load_config(sys.argv[1])
settings = stream_settings(config, os.path.dirname(sys.argv[1]))
env, t_env = make_environment(settings, None)
build_pipeline(env, t_env, config, settings, None)
nodes = []
for node in env._generate_stream_graph(False).getStreamNodes().toArray():
    factory = node.getOperatorFactory()
    try:
        name = factory.getOperator().getClass().getName()
    except Exception:  # a factory that is not a SimpleOperatorFactory: not a Python operator
        name = factory.getClass().getName()
    nodes.append([node.getOperatorName(), name])
print("GRAPH " + json.dumps(nodes))
# ValidTime's parallelism, and the partitioner of every edge from the events source to ValidTime's
# first input
by_id = {node.getId(): node for node in env._generate_stream_graph(False).getStreamNodes().toArray()}
valid_time = next(n for n in by_id.values() if n.getOperatorName().startswith("event time of valid events"))
last = [e for e in valid_time.getInEdges().toArray()]
print("LAST_EDGES " + json.dumps(sorted({e.getPartitioner().toString() for e in last})))
edges, todo = [], [e for edge in last for e in by_id[edge.getSourceId()].getInEdges().toArray()]
while todo:
    edge = todo.pop()
    edges.append(edge.getPartitioner().toString())
    todo += list(by_id[edge.getSourceId()].getInEdges().toArray())
print("EDGES " + json.dumps(edges))
print("VALID_TIME_PARALLELISM " + str(valid_time.getParallelism()))
print("ZONE " + t_env.get_config().get_local_timezone())
"""

PYTHON_OPERATORS = {"parse events (reference parser)", "parse requirements (reference parser)",
                    "dead letters of requirement records that did not apply",
                    "dead letters of events that count for no slot", "Population"}


@pytest.mark.flink
@pytest.mark.parametrize("event_time", ["field", "kafka"])
def test_only_the_hosts_of_the_core_run_python_and_time_is_utc(tmp_path: Path, event_time: str) -> None:
    config = yaml.safe_load((REPO / "deploy" / "local" / "demo.yaml").read_text())
    config["kafka"].update({"bootstrap": "127.0.0.1:1", "event_time": event_time})
    config["flink"]["parallelism"] = 2
    config["flink"]["checkpoint_dir"] = str(tmp_path / "checkpoints")
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run([sys.executable, "-c", GRAPH, str(path)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": "", "TZ": "Asia/Kolkata"})
    lines = [line for line in done.stdout.splitlines() if line.startswith("GRAPH ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    nodes = json.loads(lines[0].removeprefix("GRAPH "))
    python = {name for name, cls in nodes if ".python." in cls}
    assert python == PYTHON_OPERATORS
    # ValidTime keeps each partition's time in offset order across the fast path and the reference
    # parser: a partition's rows must reach it in the order of the subtask that read them. It runs at
    # the job's parallelism (docs/streaming.md, "Topology": no per-event work at parallelism 1); every
    # edge from the source up to the parsers is forward, and the rows reach it routed by partition
    # (a custom partitioner: partition p to subtask p mod n), so each channel keeps its order.
    edge_line = next(line for line in done.stdout.splitlines() if line.startswith("EDGES "))
    edges = json.loads(edge_line.removeprefix("EDGES "))
    assert len(edges) > 5 and set(edges) == {"FORWARD"}, edges
    last_line = next(line for line in done.stdout.splitlines() if line.startswith("LAST_EDGES "))
    assert json.loads(last_line.removeprefix("LAST_EDGES ")) == ["CUSTOM"], last_line
    assert "VALID_TIME_PARALLELISM 2" in done.stdout.splitlines()
    # Slot windows and the Kafka timestamp in epoch ms assume UTC, whatever the JVM's zone (TZ above).
    assert "ZONE UTC" in done.stdout.splitlines()
