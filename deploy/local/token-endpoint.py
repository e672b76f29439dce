"""An OAuth 2 identity provider on loopback for OAUTHBEARER tests and local runs (docs/operations.md,
"Security"): the client-credentials grant at `/oauth2/token`, answered with an RS256-signed JWT, and
the signing key published as a JSON Web Key Set at `/jwks`, which a broker with Kafka's
`OAuthBearerValidatorCallbackHandler` (`sasl.oauthbearer.jwks.endpoint.url`) checks tokens against.
Testing only: one RSA key, clients and secrets from a folder or a mapping, no TLS.

- `TokenEndpoint`: the server in a thread of the calling process, bounded by the `with` block that
  starts and stops it (tests/streaming/test_kafka_security.py, through tests/streaming/token_endpoint.py).
- `main`: the same server as a process (deploy/local/token-endpoint.sh, which kafka.sh's
  `--secure oauth-jwks` starts beside the broker): `token-endpoint.py --port N --secrets DIR
  --key FILE`; each client is a file DIR/<client id> holding its secret, read at every request.

A token: header `{"alg": "RS256", "typ": "JWT", "kid": KID}`, claims `iss` (the endpoint's base URL),
`aud` (`kafka`), `sub` (the client id), `iat`, `exp` (`iat` + the lifetime), `jti`, and `scope` (the
requested one, else `kafka`). The request is checked as Kafka's login handler and
jobs/streaming/kafka_oauth.py send it: HTTP Basic with the URL-encoded client id and secret,
`grant_type=client_credentials`; anything else is answered 401. Each answer is logged on standard
output (`granted <client>` / `refused <client>: <why>`), never with a secret or a token.

Needs `cryptography` (pwevent's test extra).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

#: The audience every token names, and that the broker of kafka.sh expects.
AUDIENCE = "kafka"
KEY_ID = "pwevent-local-1"
TOKEN_PATH = "/oauth2/token"
JWKS_PATH = "/jwks"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _uint(value: int) -> str:
    return b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


class Signer:
    """An RSA key (2048 bits) that signs JWTs with RS256 and describes itself as a JWK."""

    def __init__(self, key: rsa.RSAPrivateKey | None = None, kid: str = KEY_ID) -> None:
        self.key = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = kid

    @classmethod
    def from_file(cls, path: Path) -> Signer:
        """The key in PEM file `path`, made there (mode 600) when there is none: a restarted endpoint
        signs with the key the broker has already fetched."""
        if path.is_file():
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
            assert isinstance(key, rsa.RSAPrivateKey), f"{path}: not an RSA key"
            return cls(key)
        signer = cls()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_bytes(signer.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
        return signer

    def jwk(self) -> dict[str, str]:
        numbers = self.key.public_key().public_numbers()
        return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid, "n": _uint(numbers.n),
                "e": _uint(numbers.e)}

    def sign(self, claims: Mapping[str, Any], header: Mapping[str, Any] | None = None) -> str:
        """The compact JWS of `claims` (`header` replaces the default header's keys)."""
        head = {"alg": "RS256", "typ": "JWT", "kid": self.kid, **(header or {})}
        encode = lambda part: b64url(json.dumps(part, separators=(",", ":")).encode())  # noqa: E731
        signing_input = f"{encode(head)}.{encode(dict(claims))}"
        signature = self.key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{b64url(signature)}"


def claims_of(issuer: str, subject: str, scope: str, lifetime_s: int, now_s: float | None = None) -> dict[str, Any]:
    """The claims of a token of `subject` (as the endpoint issues them)."""
    now = int(time.time() if now_s is None else now_s)
    return {"iss": issuer, "aud": AUDIENCE, "sub": subject, "iat": now, "exp": now + lifetime_s,
            "jti": uuid.uuid4().hex, "scope": scope}


class TokenEndpoint:
    """`with TokenEndpoint(clients) as endpoint:` serves the grant at `endpoint.url` and the key set
    at `endpoint.jwks_url`; `endpoint.requests` holds each token request's form, `endpoint.log` one
    line per answer. `clients`: client id to secret, or a function of the client id giving its secret
    (None: no such client). `issue`: the token of the n-th request instead of a signed JWT (tests of
    the client side only)."""

    def __init__(self, clients: Mapping[str, str] | Callable[[str], str | None],
                 issue: Callable[[int], str] | None = None, lifetime_s: int = 3600, signer: Signer | None = None,
                 port: int = 0, out: Callable[[str], None] | None = None) -> None:
        self.requests: list[dict[str, list[str]]] = []
        self.log: list[str] = []
        self.signer = signer or Signer()
        secret_of = clients.get if isinstance(clients, Mapping) else clients
        owner = self

        def note(line: str) -> None:
            owner.log.append(line)
            if out is not None:
                out(line)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == JWKS_PATH:
                    self._json(200, {"keys": [owner.signer.jwk()]})
                elif self.path == "/":
                    self._json(200, {"token_endpoint": owner.url, "jwks_uri": owner.jwks_url})
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:  # noqa: N802
                form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
                if self.path != TOKEN_PATH:
                    self._json(404, {"error": "not_found"})
                    return
                owner.requests.append(form)
                client, secret = _basic(self.headers.get("Authorization", ""))
                known = secret_of(client) if client else None
                if client is None or known is None or secret != known:
                    note(f"refused {client or '-'}: {'unknown client' if known is None else 'wrong secret'}")
                    self._json(401, {"error": "invalid_client"})
                    return
                if form.get("grant_type") != ["client_credentials"]:
                    note(f"refused {client}: grant_type {form.get('grant_type')}")
                    self._json(400, {"error": "unsupported_grant_type"})
                    return
                scope = (form.get("scope") or [AUDIENCE])[0]
                token = issue(len(owner.requests)) if issue is not None else owner.signer.sign(
                    claims_of(owner.issuer, client, scope, lifetime_s))
                note(f"granted {client}")
                self._json(200, {"access_token": token, "token_type": "bearer", "expires_in": lifetime_s,
                                 "scope": scope})

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.issuer = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.url = self.issuer + TOKEN_PATH
        self.jwks_url = self.issuer + JWKS_PATH

    def __enter__(self) -> TokenEndpoint:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def serve_forever(self) -> None:
        self._server.serve_forever()


def _basic(header: str) -> tuple[str | None, str | None]:
    """The URL-decoded client id and secret of an HTTP Basic `Authorization` header."""
    if not header.startswith("Basic "):
        return None, None
    try:
        pair = base64.b64decode(header[6:], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None, None
    client, sep, secret = pair.partition(":")
    return (unquote(client), unquote(secret)) if sep else (None, None)


def _secret_in(folder: Path) -> Callable[[str], str | None]:
    """A client's secret: the file named by its id in `folder` (one trailing newline dropped)."""
    def secret(client: str) -> str | None:
        path = folder / client
        if "/" in client or client.startswith(".") or not path.is_file():
            return None
        return path.read_text().removesuffix("\n")
    return secret


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secrets", type=Path, required=True, help="folder of <client id> files holding secrets")
    parser.add_argument("--key", type=Path, required=True, help="the signing key's PEM file (made when missing)")
    parser.add_argument("--lifetime", type=int, default=3600, help="tokens' lifetime, seconds")
    args = parser.parse_args(argv)

    def out(line: str) -> None:
        print(line, flush=True)

    endpoint = TokenEndpoint(_secret_in(args.secrets), lifetime_s=args.lifetime, signer=Signer.from_file(args.key),
                             port=args.port, out=out)
    out(f"token endpoint {endpoint.url} jwks {endpoint.jwks_url}")
    try:
        endpoint.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
