"""TLS and authentication in front of the tests' real Schema Registry (tests/schema_registry.py,
which serves plain HTTP without authentication), as an ingress or a managed registry puts them: HTTPS
with a certificate of a CA made here (or plain HTTP, `tls` None: the benchmark's basic auth),
optionally a required client certificate, and an `Authorization` header (HTTP basic or bearer;
None: any request passes) without which a request is answered 401. Every
accepted request is forwarded, as it is, to the registry behind; on loopback, in a thread of the
test process, stopped by `stop()`."""

from __future__ import annotations

import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: How long a forwarded request may take, seconds.
FORWARD_TIMEOUT_S = 10.0


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class TlsFiles:
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client's key and certificate as
    PEM and as a PKCS12 keystore, the key and the keystore both under `key_password` (as openssl
    writes them; deploy/local/kafka.sh's client certificates alike), also in the file `store-secret`."""

    folder: Path
    key_password: str = "k3y-pass"

    def path(self, name: str) -> str:
        return str(self.folder / name)

    @classmethod
    def make(cls, folder: Path) -> TlsFiles:
        folder.mkdir(parents=True, exist_ok=True)
        files = cls(folder)
        p = files.path
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", p("ca.key"), "-subj", "/CN=gateway CA",
                 "-days", "2", "-out", p("ca.pem"))
        _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", p("server.key"), "-subj", "/CN=localhost",
                 "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-out", p("server.csr"))
        Path(p("san.ext")).write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        _openssl("x509", "-req", "-in", p("server.csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"), "-CAcreateserial",
                 "-days", "2", "-extfile", p("san.ext"), "-out", p("server.pem"))
        _openssl("req", "-new", "-newkey", "rsa:2048", "-keyout", p("client.key"), "-passout",
                 f"pass:{files.key_password}", "-subj", "/CN=pwevent-job", "-out", p("client.csr"))
        _openssl("x509", "-req", "-in", p("client.csr"), "-CA", p("ca.pem"), "-CAkey", p("ca.key"), "-CAcreateserial",
                 "-days", "2", "-out", p("client.pem"))
        _openssl("pkcs12", "-export", "-in", p("client.pem"), "-inkey", p("client.key"), "-passin",
                 f"pass:{files.key_password}", "-passout", f"pass:{files.key_password}", "-out", p("client.p12"))
        Path(p("store-secret")).write_text(files.key_password + "\n")  # the keystore's password as a mounted file
        return files


@dataclass
class RegistryGateway:
    """HTTPS (HTTP without `tls`) on 127.0.0.1 in front of `upstream` (a registry's base URL),
    requiring `authorization` (the exact header value; None requires none) and, with
    `require_client_cert`, a client certificate signed by the CA of `tls`; on `port` (0: a free one),
    so that a gateway stopped and started again serves the same address."""

    upstream: str
    tls: TlsFiles | None
    authorization: str | None
    require_client_cert: bool = False
    port: int = 0
    refused: list[str] = field(default_factory=list)
    forwarded: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    url: str = ""

    def start(self) -> str:
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self, method: str) -> None:
                if gateway.authorization is not None and self.headers.get("Authorization") != gateway.authorization:
                    gateway.refused.append(f"{method} {self.path}")
                    body = b'{"error_code": 401, "message": "Unauthorized"}'
                    self.send_response(401)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                gateway.forwarded.append(f"{method} {self.path}")
                data = self.rfile.read(int(self.headers.get("Content-Length", 0))) if method == "POST" else None
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("accept", "content-type")}
                request = urllib.request.Request(gateway.upstream + self.path, data, headers, method=method)
                try:
                    with urllib.request.urlopen(request, timeout=FORWARD_TIMEOUT_S) as response:
                        status, body = response.status, response.read()
                except urllib.error.HTTPError as err:
                    status, body = err.code, err.read()
                except OSError:
                    status, body = 502, b'{"error_code": 502, "message": "Bad gateway"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self._forward("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._forward("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        if self.tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.tls.path("server.pem"), self.tls.path("server.key"))
            if self.require_client_cert:
                context.verify_mode = ssl.CERT_REQUIRED
                context.load_verify_locations(self.tls.path("ca.pem"))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"{'http' if self.tls is None else 'https'}://127.0.0.1:{self.server.server_address[1]}"
        return self.url

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
