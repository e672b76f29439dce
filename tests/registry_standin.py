"""A STAND-IN for a Confluent Schema Registry, for tests only: the two endpoints pwevent uses,
`GET /schemas/ids/{id}` and `POST /subjects/{subject}/versions` (an equal schema gets the id it
already has, as Confluent's does), optional HTTP basic auth, on loopback. Not a registry: no
compatibility checks, no persistence. The tests that use it say so in their names (`standin`)."""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class StandinRegistry:
    """Its state: schema texts by id, the ids registered under each subject, the accepted credentials."""

    credentials: tuple[str, str] | None = None
    schemas: dict[int, str] = field(default_factory=dict)
    subjects: dict[str, list[int]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def add(self, subject: str, schema: dict[str, Any]) -> int:
        text = json.dumps(schema, sort_keys=True)
        schema_id = next((i for i, t in self.schemas.items() if t == text), len(self.schemas) + 1)
        self.schemas[schema_id] = text
        self.subjects.setdefault(subject, [])
        if schema_id not in self.subjects[subject]:
            self.subjects[subject].append(schema_id)
        return schema_id

    def start(self, port: int = 0) -> str:
        """Serve on 127.0.0.1:`port` (0: any free port) in a daemon thread; returns the base URL."""
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if registry.credentials is None:
                    return True
                token = base64.b64encode(":".join(registry.credentials).encode()).decode()
                if self.headers.get("Authorization") == f"Basic {token}":
                    return True
                self._send(401, {"error_code": 401, "message": "Unauthorized"})
                return False

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                registry.requests.append(f"GET {self.path}")
                if not self._authorized():
                    return
                match = re.fullmatch(r"/schemas/ids/(\d+)", self.path)
                if match and int(match.group(1)) in registry.schemas:
                    self._send(200, {"schema": registry.schemas[int(match.group(1))]})
                else:
                    self._send(404, {"error_code": 40403, "message": "Schema not found"})

            def do_POST(self) -> None:  # noqa: N802
                registry.requests.append(f"POST {self.path}")
                if not self._authorized():
                    return
                match = re.fullmatch(r"/subjects/([^/]+)/versions", self.path)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if match is None:
                    self._send(404, {"error_code": 404, "message": "Not found"})
                    return
                self._send(200, {"id": registry.add(match.group(1), json.loads(body["schema"]))})

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
