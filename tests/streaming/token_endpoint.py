"""A client-credentials token endpoint on loopback for the OAUTHBEARER tests (docs/operations.md,
"Security"): http.server in a thread of the test process, bounded by the `with` block that starts
and stops it. It answers a POST with the client's id and secret (HTTP Basic, URL-encoded, as Kafka's
login handler and jobs/streaming/kafka_oauth.py send them) and `grant_type=client_credentials` with
the next token of `issue`, and anything else with 401."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import parse_qs, quote


class TokenEndpoint:
    """`with TokenEndpoint(...) as endpoint:` serves at `endpoint.url`; `endpoint.requests` holds
    each request's form."""

    def __init__(self, client_id: str, client_secret: str, issue: Callable[[int], str], lifetime_s: int = 3600) -> None:
        self.requests: list[dict[str, list[str]]] = []
        good = "Basic " + base64.b64encode(f"{quote(client_id)}:{quote(client_secret)}".encode()).decode()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                owner.requests.append(form)
                if self.headers["Authorization"] != good or form.get("grant_type") != ["client_credentials"]:
                    self.send_response(401)
                    self.end_headers()
                    return
                body = json.dumps({"access_token": issue(len(owner.requests)), "token_type": "bearer",
                                   "expires_in": lifetime_s}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/oauth2/token"

    def __enter__(self) -> TokenEndpoint:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
