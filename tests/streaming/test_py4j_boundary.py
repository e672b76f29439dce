"""Every call from Python into the job's Java classes (jobs/streaming/pyflink_internals.py, the one
module that reaches them through py4j) passes at most five arguments: an operator with more settings
takes one settings object (issue 41, "a typed boundary")."""

from __future__ import annotations

import ast
from pathlib import Path

INTERNALS = Path(__file__).resolve().parents[2] / "jobs" / "streaming" / "pyflink_internals.py"


def java_calls() -> list[tuple[str, int]]:
    """(the call's callee, its number of arguments) for each call of a class of pwevent.flink."""
    tree = ast.parse(INTERNALS.read_text())
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            callee = ast.unparse(node.func).removeprefix("_jvm()")
            if "(" not in callee and (".pwevent.flink." in callee or callee.startswith("flink.")):
                calls.append((callee, len(node.args) + len(node.keywords)))
    return calls


def test_no_call_into_the_jvm_takes_more_than_five_arguments() -> None:
    calls = java_calls()
    assert len(calls) >= 10, calls  # the operators and their factories are all found
    assert all(n <= 5 for _, n in calls), [c for c in calls if c[1] > 5]
