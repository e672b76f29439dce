"""`pwevent run --ready-file`: the file appears once the job is RUNNING, whole (the integration
tests and benchmarks read the job id the moment it exists)."""

from __future__ import annotations

import os
from pathlib import Path

from pwevent.jobs.streaming.job import announce_running


class _Status:
    def __init__(self, state: str) -> None:
        self.state = state

    def result(self) -> str:
        return self.state


class _Client:
    """A JobClient's two calls that announce_running makes: CREATED twice, then RUNNING."""

    def __init__(self, ready_file: Path) -> None:
        self.ready_file = ready_file
        self.states = ["CREATED", "CREATED", "RUNNING"]
        self.seen_before_running: list[bool] = []

    def get_job_status(self) -> _Status:
        self.seen_before_running.append(self.ready_file.exists())
        return _Status(self.states.pop(0))

    def get_job_id(self) -> str:
        return "dc705bc4d26e9415c2d6a4fdd947f3a2"


def test_the_ready_file_appears_only_when_running_and_whole(tmp_path, monkeypatch) -> None:
    ready = tmp_path / "ready-1"
    client = _Client(ready)
    written: list[str] = []
    real_replace = os.replace

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        written.append(Path(src).read_text())  # what the reader sees the moment the name exists
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    announce_running(client, ready)
    assert client.seen_before_running == [False, False, False]
    assert written == ["dc705bc4d26e9415c2d6a4fdd947f3a2"]
    assert ready.read_text() == "dc705bc4d26e9415c2d6a4fdd947f3a2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready-1"]
