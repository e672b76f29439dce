"""`pwevent stop` without a cluster: what it says when nothing answers, and where savepoints go."""

from __future__ import annotations

import os

from pwevent.jobs.cli.main import main
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.stop import savepoint_target


def test_no_rest_api_is_a_clear_error(capsys) -> None:
    port = free_loopback_port()  # nothing listens there
    assert main(["stop", "--jobmanager", f"127.0.0.1:{port}", "--savepoint", "sp", "--timeout", "5"]) == 1
    err = capsys.readouterr().err
    assert f"pwevent stop: no Flink REST API at http://127.0.0.1:{port}" in err


def test_savepoint_targets_are_absolute_or_uris(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert savepoint_target("sp") == "file://" + os.path.join(str(tmp_path), "sp")
    assert savepoint_target("s3://bucket/sp") == "s3://bucket/sp"
    assert savepoint_target("/abs/sp") == "file:///abs/sp"
