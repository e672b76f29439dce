"""The streaming job's configuration sections and the SQL it derives from them (no broker needed)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.streaming.checkpoints import clean_checkpoints, cluster_restore, latest_checkpoint
from pwevent.jobs.streaming.flink_config import flink_configuration
from pwevent.jobs.streaming.job import submit_command
from pwevent.jobs.streaming.local_run import (
    LOCAL_ROCKSDB_MANAGED_MEMORY,
    MANAGED_MEMORY,
    LocalRun,
    local_configuration,
)
from pwevent.jobs.streaming.settings import OWNED_FLINK_KEYS, stream_settings
from pwevent.jobs.streaming.sink_tables import sink_ddl

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
    assert s.flink.release_delay_ms == 60_000


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
    ({"flink": {"release_delay": "later"}}, "flink.release_delay"),
    ({"flink": {"close_after": "5s"}}, "unknown key flink.close_after: replaced by flink.release_delay"),
    ({"flink": {"source_idleness": "10s"}}, "unknown key flink.source_idleness: replaced by flink.release_delay"),
    ({"flink": {"restart_attempts": -1}}, "flink.restart_attempts"),
    ({"flink": {"restart_delay": "later"}}, "flink.restart_delay"),
    ({"flink": {"web_port": 70000}}, "flink.web_port"),
    ({"flink": {"retained_jobs": "all"}}, "flink.retained_jobs"),
    ({"flink": {"extra": ["a"]}}, "flink.extra"),
    ({"flink": {"extra": {"metrics.reporters": ["prom"]}}}, "flink.extra.metrics.reporters"),
    ({"flink": {"extra": {"bad key": "1"}}}, "flink.extra: 'bad key'"),
    ({"flink": {"extra": {"parallelism.default": 4}}}, "flink.extra.parallelism.default is set by the job"),
    ({"flink": {"extra": {"restart-strategy.type": "none"}}}, "flink.extra.restart-strategy.type"),
    ({"flink": {"extra": {"execution.state-recovery.path": "/x"}}}, "flink.extra.execution.state-recovery.path"),
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
    s = settings(kafka={"bootstrap": "127.0.0.1:1", "security": {"protocol": "SASL_PLAINTEXT", "username": "u",
                                                                "password": "it's"}})
    ddl = sink_ddl("b", "t", "audit", s)
    assert "'properties.security.protocol' = 'SASL_PLAINTEXT'" in ddl
    assert """username="u" password="it''s";""" in ddl  # SQL quotes escaped
    assert "'sink.delivery-guarantee' = 'exactly-once'" in ddl
    assert "'properties.transaction.timeout.ms' = '600000'" in ddl
    writer = s.kafka.release_writer_properties()  # the releases' own writer (pwevent.flink.release.ReleaseWriter)
    assert writer["security.protocol"] == "SASL_PLAINTEXT" and writer["bootstrap.servers"] == "127.0.0.1:1"
    assert 'username="u" password="it\'s";' in writer["sasl.jaas.config"]
    assert writer["transaction.timeout.ms"] == "600000"


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


def test_restart_strategy_and_extra_keys_reach_the_flink_configuration() -> None:
    s = settings(flink={"restart_attempts": 0, "restart_delay": "15s",
                        "extra": {"metrics.reporter.prom.port": 9250, "pipeline.name": "p", "x.enabled": True}})
    conf = flink_configuration(s, None)
    assert conf["restart-strategy.fixed-delay.attempts"] == "0"
    assert conf["restart-strategy.fixed-delay.delay"] == "15000 ms"
    assert conf["metrics.reporter.prom.port"] == "9250" and conf["x.enabled"] == "true"
    assert "execution.state-recovery.path" not in conf
    defaults = flink_configuration(settings(), "/sp/savepoint-1", allow_non_restored=True)
    assert defaults["restart-strategy.fixed-delay.attempts"] == "3"
    assert defaults["restart-strategy.fixed-delay.delay"] == "2000 ms"
    assert defaults["execution.state-recovery.path"] == "/sp/savepoint-1"
    assert defaults["execution.state-recovery.ignore-unclaimed-state"] == "true"
    assert defaults["table.exec.uid.generation"] == "ALWAYS"


def test_the_restart_strategy_is_configurable() -> None:
    """flink.restart_strategy exponential-delay: the first wait restart_delay, doubling up to
    restart_max_delay, restart_attempts in a row; its keys are the job's, refused in flink.extra."""
    conf = flink_configuration(settings(flink={"restart_strategy": "exponential-delay", "restart_attempts": 1000,
                                               "restart_delay": "5s", "restart_max_delay": "10m"}), None)
    restart = {key: value for key, value in conf.items() if key.startswith("restart-strategy.")}
    assert restart == {"restart-strategy.type": "exponential-delay",
                       "restart-strategy.exponential-delay.initial-backoff": "5000 ms",
                       "restart-strategy.exponential-delay.max-backoff": "600000 ms",
                       "restart-strategy.exponential-delay.backoff-multiplier": "2.0",
                       "restart-strategy.exponential-delay.attempts-before-reset-backoff": "1000"}
    default_max = flink_configuration(settings(flink={"restart_strategy": "exponential-delay"}), None)
    assert default_max["restart-strategy.exponential-delay.max-backoff"] == "300000 ms"
    for flink, message in [
            ({"restart_strategy": "failure-rate"}, "flink.restart_strategy"),
            ({"restart_max_delay": "1m"}, "flink.restart_max_delay applies to restart_strategy exponential-delay"),
            ({"restart_strategy": "exponential-delay", "restart_delay": "0s"}, "flink.restart_delay must be at least"),
            ({"restart_strategy": "exponential-delay", "restart_attempts": 0},
             "flink.restart_attempts must be at least"),
            ({"restart_strategy": "exponential-delay", "restart_delay": "2m", "restart_max_delay": "1m"},
             "must not be shorter than flink.restart_delay"),
            ({"extra": {"restart-strategy.type": "failure-rate"}}, "set by the job itself"),
            ({"extra": {"restart-strategy.exponential-delay.max-backoff": "1h"}}, "set by the job itself")]:
        with pytest.raises(ConfigError, match=message):
            settings(flink=flink)
    # what Flink's exponential-delay takes and the job does not set stays open to flink.extra
    tuned = settings(flink={"restart_strategy": "exponential-delay",
                            "extra": {"restart-strategy.exponential-delay.jitter-factor": 0.2}})
    assert flink_configuration(tuned, None)["restart-strategy.exponential-delay.jitter-factor"] == "0.2"


def test_a_local_rocksdb_run_gets_managed_memory_unless_extra_sets_it() -> None:
    """The mini-cluster's 128 MB default starved RocksDB at a million users (docs/benchmarks.md, "Managed
    memory for RocksDB")."""
    run = LocalRun("127.0.0.1:8099", Path("/tmp/log"))
    assert local_configuration(settings(), run) == {
        "rest.bind-address": "127.0.0.1", "rest.address": "127.0.0.1", "rest.port": "8099"}
    rocksdb = local_configuration(settings(flink={"state_backend": "rocksdb"}), None)
    assert rocksdb == {MANAGED_MEMORY: LOCAL_ROCKSDB_MANAGED_MEMORY}
    own = settings(flink={"state_backend": "rocksdb", "extra": {MANAGED_MEMORY: "512m"}})
    assert MANAGED_MEMORY not in local_configuration(own, run)
    assert flink_configuration(own, None)[MANAGED_MEMORY] == "512m"


def test_a_reporter_is_configured_in_one_place() -> None:
    with pytest.raises(ConfigError, match=r"flink\.extra\.metrics\.reporter\.prom\.port is set by flink\.prometheus"):
        settings(flink={"prometheus": {"port": 9249}, "extra": {"metrics.reporter.prom.port": 9250}})


def test_every_key_the_job_sets_is_refused_in_extra() -> None:
    """OWNED_FLINK_KEYS is the one list of the job's keys: it covers everything flink_configuration
    writes (restore and local REST keys included, see make_environment)."""
    written = set(flink_configuration(settings(), "/sp", allow_non_restored=True))
    written |= set(flink_configuration(settings(flink={"restart_strategy": "exponential-delay"}), None))
    assert written - OWNED_FLINK_KEYS == set()
    assert {"rest.bind-address", "rest.address", "rest.port"} <= OWNED_FLINK_KEYS


def _checkpoint(base, job: str, n: int, mtime: float) -> str:
    folder = base / job / f"chk-{n}"
    folder.mkdir(parents=True)
    (folder / "_metadata").write_bytes(b"m")
    import os
    os.utime(folder / "_metadata", (mtime, mtime))
    return str(folder)


def test_clean_checkpoints_keeps_what_restore_latest_needs(tmp_path) -> None:
    old, older, newest, empty = "a" * 32, "b" * 32, "c" * 32, "d" * 32
    _checkpoint(tmp_path, older, 1, 1000)
    restored_from = _checkpoint(tmp_path, old, 7, 2000)
    latest = _checkpoint(tmp_path, newest, 3, 3000)
    (tmp_path / empty / "chk-1").mkdir(parents=True)  # a job that never completed a checkpoint
    (tmp_path / "savepoints").mkdir()  # not a job folder: never touched
    removed = clean_checkpoints(str(tmp_path), 0, None)
    assert sorted(removed) == sorted(str(tmp_path / j) for j in (old, older, empty))
    assert latest_checkpoint(str(tmp_path)) == latest and (tmp_path / "savepoints").is_dir()

    _checkpoint(tmp_path, old, 7, 2000)
    _checkpoint(tmp_path, older, 1, 1000)
    assert clean_checkpoints("file://" + str(tmp_path), 0, "file:" + restored_from) == [str(tmp_path / older)]
    assert (tmp_path / old).is_dir() and (tmp_path / newest).is_dir()
    assert clean_checkpoints(str(tmp_path), 1, None) == []  # the newest and one earlier job
    assert clean_checkpoints("s3://bucket/ck", 0, None) == []


def test_print_submit_refuses_a_misspelled_key(tmp_path, capsys) -> None:
    config = tmp_path / "job.yaml"
    for section, key in (("flink", "paralelism"), ("kafka", "topic"), ("flink", "restart_attempt")):
        config.write_text(yaml.safe_dump({**BASE, section: {key: 2}}))
        assert main(["run", "--config", str(config), "--print-submit"]) == 2
        assert f"unknown key {section}.{key}" in capsys.readouterr().err


def test_the_entry_point_treats_cluster_managed_state_as_restored() -> None:
    """Application mode (docs/kubernetes.md, "State"): the operator's recovery path, or HA, means the
    cluster decides the state; only without both is the release topic checked (None)."""
    assert cluster_restore("file:/sp/savepoint-1", None) == "file:/sp/savepoint-1"
    assert cluster_restore(None, "kubernetes") == "ha:kubernetes"
    assert cluster_restore(None, "NONE") is None and cluster_restore(None, None) is None
    assert cluster_restore("", "none") is None


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


def test_a_local_runs_free_port_lies_below_the_ephemeral_range_and_is_free() -> None:
    """The REST port of a local run is found free some seconds before the mini-cluster binds it; a port
    of the ephemeral range could meanwhile become an outgoing connection's (a Kafka client's)."""
    import socket
    from pathlib import Path

    from pwevent.jobs.streaming.loopback import LOWEST_PORT, PORT_RANGE_FILE, free_loopback_port

    first_ephemeral = int(Path(PORT_RANGE_FILE).read_text().split()[0])
    ports = {free_loopback_port() for _ in range(20)}
    assert all(LOWEST_PORT <= port < first_ephemeral for port in ports), ports
    assert len(ports) > 1  # drawn at random, not one fixed port every run can collide on
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", ports.pop()))
