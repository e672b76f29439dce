"""A real Confluent-compatible Schema Registry for the tests: Rivven's `rivven-schema` server, started
on loopback by deploy/local/schema-registry.sh on a run folder of its own and stopped by its pid
(docs/operations.md, "A local Schema Registry"). Schemas are registered over its REST API, as a
producer's serializer does."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve().parents[1] / "deploy" / "local" / "schema-registry.sh"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryRefused(Exception):
    """The registry answered a request with an error (its status and body)."""


@dataclass
class LocalSchemaRegistry:
    """One server on `run_dir` (on `port`, else a free one); `url` is set by start()."""

    run_dir: Path
    port: int | None = None
    url: str = ""

    def start(self) -> str:
        port = [] if self.port is None else ["--port", str(self.port)]
        started = subprocess.run([str(SCRIPT), "start", "--run-dir", str(self.run_dir), *port,
                                  "--owner", str(os.getpid())], capture_output=True, text=True, timeout=1900)
        assert started.returncode == 0, started.stderr
        self.url = started.stdout.strip().splitlines()[-1]
        return self.url

    def stop(self) -> None:
        subprocess.run([str(SCRIPT), "stop", "--run-dir", str(self.run_dir)], capture_output=True, timeout=60)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return dict(json.loads(response.read()))
        except urllib.error.HTTPError as err:
            raise RegistryRefused(f"{method} {path}: {err.code} {err.read().decode(errors='replace')}") from err

    def add(self, subject: str, schema: dict[str, Any]) -> int:
        """Registers `schema` under `subject` (POST /subjects/{subject}/versions); its global id."""
        return int(self._call("POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema)})["id"])

    def add_protobuf(self, subject: str, text: str, references: list[dict[str, Any]] | None = None) -> int:
        """Registers the `.proto` text under `subject` as a PROTOBUF schema (importing the files of
        `references`: {name, subject, version}); its global id."""
        body: dict[str, Any] = {"schemaType": "PROTOBUF", "schema": text}
        if references:
            body["references"] = references
        return int(self._call("POST", f"/subjects/{subject}/versions", body)["id"])

    def served(self, path: str) -> dict[str, Any]:
        """The registry's answer to GET `path`, as it is."""
        return self._call("GET", path)

    def set_compatibility(self, subject: str, level: str) -> None:
        """The compatibility level of `subject` (PUT /config/{subject}). rivven-schema 0.0.22's check
        refuses any schema with an Avro logical type as incompatible with itself ("writer=TimestampMillis,
        reader=TimestampMillis"), so an evolution of such a schema is registered under NONE."""
        self._call("PUT", f"/config/{subject}", {"compatibility": level})

    def schema(self, schema_id: int) -> dict[str, Any]:
        """The schema the registry serves for `schema_id` (GET /schemas/ids/{id})."""
        return dict(json.loads(self._call("GET", f"/schemas/ids/{schema_id}")["schema"]))

    def requests(self, path: str) -> int:
        """How many requests for `path` the server has answered (it logs each one it is sent)."""
        log = self.run_dir / "registry.out"
        text = log.read_text(errors="replace") if log.exists() else ""
        return sum(f"uri={path} " in line and "on_response" in line for line in text.splitlines())
