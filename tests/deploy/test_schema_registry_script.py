"""deploy/local/schema-registry.sh (docs/operations.md, "A local Schema Registry"): the server answers
the Confluent endpoints on loopback, a second start on the same run folder reuses it, and it is
stopped by its pid once its owner has exited."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.schema_registry import SCRIPT, LocalSchemaRegistry, RegistryRefused

pytestmark = pytest.mark.registry


def _status(run_dir: Path) -> int:
    return subprocess.run([str(SCRIPT), "status", "--run-dir", str(run_dir)], capture_output=True,
                          timeout=30).returncode


def test_the_registry_serves_the_confluent_endpoints_and_goes_with_its_owner(tmp_path: Path) -> None:
    owner = subprocess.Popen(["sleep", "600"])
    run_dir = tmp_path / "registry"
    try:
        started = subprocess.run([str(SCRIPT), "start", "--run-dir", str(run_dir), "--owner", str(owner.pid)],
                                 capture_output=True, text=True, timeout=1900)
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip().splitlines()[-1]
        assert url.startswith("http://127.0.0.1:") and (run_dir / "url").read_text().strip() == url
        server = LocalSchemaRegistry(run_dir, url=url)
        schema = {"type": "record", "name": "E", "fields": [{"name": "user", "type": "string"}]}
        schema_id = server.add("e-value", schema)
        assert server.add("e-value", schema) == schema_id  # an equal schema keeps its id
        assert server.schema(schema_id) == schema
        with pytest.raises(RegistryRefused, match="404"):
            server.schema(schema_id + 100)
        with urllib.request.urlopen(f"{url}/subjects", timeout=10) as response:
            assert json.loads(response.read()) == ["e-value"]
        again = subprocess.run([str(SCRIPT), "start", "--run-dir", str(run_dir)], capture_output=True, text=True,
                               timeout=60)
        assert again.returncode == 0 and again.stdout.strip() == url and "already running" in again.stderr
        assert _status(run_dir) == 0
        owner.kill()
        owner.wait(timeout=10)
        deadline = time.monotonic() + 30
        while _status(run_dir) == 0:
            assert time.monotonic() < deadline, "the registry outlived its owner by 30 s"
            time.sleep(0.5)
        assert "owner" in (run_dir / "owner.out").read_text()
    finally:
        owner.kill()
        subprocess.run([str(SCRIPT), "stop", "--run-dir", str(run_dir)], capture_output=True, timeout=60)
