"""The table environment the fast paths' differential tests share (tests/streaming/test_event_sql.py,
test_requirement_sql.py): streaming mode, parallelism 1, the job's jar with `RecordGroups` and
`IsoMillis` registered. A module that needs another defines its own `t_env`."""

from __future__ import annotations

from typing import Any

import pytest

from pwevent.jobs.streaming.event_sql import register_record_groups
from pwevent.jobs.streaming.jars import jvm_jar
from pwevent.jobs.streaming.requirement_sql import register_iso_millis


@pytest.fixture(scope="module")
def t_env() -> Any:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "1")
    env.get_config().set("pipeline.jars", jvm_jar().as_uri())
    register_record_groups(env)
    register_iso_millis(env)
    return env
