"""The streaming job's configuration sections and the SQL it derives from them (no broker needed)."""

from __future__ import annotations

import shlex

import pytest
import yaml

from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.streaming.job import flink_configuration, sink_ddl, submit_command
from pwevent.jobs.streaming.settings import stream_settings

BASE = {"mechanism": "PBD", "slot": "60s", "origin": "2024-01-01T00:00:00Z", "domain": {"type": "binary"}}


def settings(**sections):
    return stream_settings(parse_config({**BASE, **sections}), "/tmp/base")


def test_defaults_and_relative_checkpoint_dir() -> None:
    s = settings(kafka={"bootstrap": "127.0.0.1:1"}, flink={"checkpoint_dir": "ck", "checkpoint_interval": "250ms"})
    assert s.flink.checkpoint_dir == "/tmp/base/ck"
    assert s.flink.checkpoint_interval_ms == 250
    assert s.flink.execution_mode == "thread" and s.flink.state_backend == "hashmap"
    assert s.flink.incremental_checkpoints is False
    assert s.kafka.topics["releases"] == "pwevent.releases"
    assert s.kafka.transaction_timeout_ms == 600_000
    assert s.flink.source_start_grace_ms == 60_000 and s.flink.source_idleness_ms == 10_000


@pytest.mark.parametrize(("sections", "message"), [
    ({"kafka": {"nope": 1}}, "kafka.nope"),
    ({"kafka": {"topics": {"evnts": "x"}}}, "kafka.topics.evnts"),
    ({"kafka": {"event_time": "wall"}}, "kafka.event_time"),
    ({"kafka": {"transaction_timeout": "20m"}}, "transaction.max.timeout.ms"),
    ({"flink": {"state_backend": "memory"}}, "flink.state_backend"),
    ({"flink": {"parallelism": 0}}, "flink.parallelism"),
    ({"flink": {"incremental_checkpoints": "yes"}}, "flink.incremental_checkpoints"),
    ({"flink": {"checkpoint_interval": "soon"}}, "flink.checkpoint_interval"),
    ({"flink": {"readback_idleness": "1s"}}, "flink.readback_idleness"),
    ({"flink": {"max_lead": "soon"}}, "flink.max_lead"),
    ({"flink": {"checkpoint_timeout": "never"}}, "flink.checkpoint_timeout"),
    ({"flink": {"tolerable_failed_checkpoints": -1}}, "flink.tolerable_failed_checkpoints"),
    ({"flink": {"source_start_grace": "later"}}, "flink.source_start_grace"),
])
def test_errors_name_the_key(sections, message) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        settings(**sections)


def test_checkpoint_timeout_and_tolerance_reach_flink() -> None:
    conf = flink_configuration(settings(flink={"checkpoint_timeout": "90s", "tolerable_failed_checkpoints": 0}), None)
    assert conf["execution.checkpointing.timeout"] == "90000 ms"
    assert conf["execution.checkpointing.tolerable-failed-checkpoints"] == "0"
    default = flink_configuration(settings(), None)
    assert default["execution.checkpointing.tolerable-failed-checkpoints"] == "5"


def test_security_properties_reach_every_table() -> None:
    s = settings(kafka={"bootstrap": "127.0.0.1:1", "properties": {"security.protocol": "SASL_SSL",
                                                                  "sasl.jaas.config": "x password='p';"}})
    ddl = sink_ddl("b", "t", "releases", True, s)
    assert "'properties.security.protocol' = 'SASL_SSL'" in ddl
    assert "'properties.sasl.jaas.config' = 'x password=''p'';'" in ddl  # quotes escaped
    keyed = sink_ddl("b", "t", "releases", True, s)
    assert "'sink.delivery-guarantee' = 'exactly-once'" in keyed and "'key.fields' = 'k'" in keyed
    assert "'properties.transaction.timeout.ms' = '600000'" in keyed


def test_the_submit_command_quotes_paths_for_the_shell(tmp_path, monkeypatch):
    jar = tmp_path / "connector jar.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("PWEVENT_KAFKA_CONNECTOR_JAR", str(jar))
    config = tmp_path / "my job" / "job's.yaml"
    config.parent.mkdir()
    config.write_text(yaml.safe_dump({**BASE, "flink": {"parallelism": 3}}))
    words = shlex.split(submit_command(str(config), "127.0.0.1:8081"))
    assert words[words.index("--config") + 1] == str(config)
    assert words[words.index("--jarfile") + 1] == str(jar)
    assert words[words.index("-m") + 1] == "127.0.0.1:8081" and words[words.index("run") + 1] == "-d"
    assert words[words.index("-p") + 1] == "3" and "--seed" not in words
    seeded = shlex.split(submit_command(str(config), None, seed=7))
    assert seeded[-2:] == ["--seed", "7"] and "-m" not in seeded


@pytest.mark.parametrize(("value", "start", "time_ms"), [
    (None, "earliest", None),
    ("earliest", "earliest", None),
    ("latest", "latest", None),
    ("committed", "committed", None),
    ("2024-01-01T00:03:00Z", "timestamp", 1_704_067_380_000),
    (1_704_067_380_000, "timestamp", 1_704_067_380_000),
])
def test_the_start_position_of_the_events(value, start, time_ms) -> None:
    s = settings(kafka={} if value is None else {"start": value})
    assert (s.kafka.start, s.kafka.start_time_ms) == (start, time_ms)


def test_an_unquoted_yaml_time_is_a_start_time() -> None:
    s = settings(kafka=yaml.safe_load("start: 2024-01-01T00:03:00Z"))
    assert (s.kafka.start, s.kafka.start_time_ms) == ("timestamp", 1_704_067_380_000)


@pytest.mark.parametrize("value", ["newest", "", True, -5, [1], {"at": 1}, "2024-13-01"])
def test_a_bad_start_position_names_the_key(value) -> None:
    with pytest.raises(ConfigError, match=r"kafka\.start"):
        settings(kafka={"start": value})
