"""Workarounds for Flink's SQL planner, in one place (docs/streaming.md, "Topology").

The job mixes SQL and DataStream operators; these are the places where the planner, left to itself,
would run a part of the graph more than once. tests/integration/test_job_graph.py fails if the graph
grows a second copy of an operator. PyFlink's own gaps are in `pyflink_internals.py`.
"""

from __future__ import annotations

from typing import Any


def materialize(t_env: Any, name: str, rowtime: Any, query: str) -> Any:
    """View `name` of `query` made once, through a DataStream (returned), with the rowtime `rt` of the
    records.

    A SQL view is inlined into every query that reads it, and each conversion to a DataStream is
    planned on its own; a part with a non-deterministic call (CURRENT_WATERMARK) is not shared even
    inside one query. Without this the parser's table function, the window and the class lookup
    ran two or three times per event. The query keeps its rowtime as a plain column `rt_in` (a
    DataStream record's timestamp is the table's rowtime)."""
    stream = t_env.to_data_stream(t_env.sql_query(query))
    t_env.create_temporary_view(name, t_env.from_data_stream(stream, rowtime))
    return stream

