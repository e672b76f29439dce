"""OAUTHBEARER tokens for the Python tools' kafka-python clients (`sasl_oauth_token_provider`): the
same token the job's Java clients get from `kafka.security.oauth` (docs/operations.md, "Security",
"OAUTHBEARER").

- `ClientCredentialsTokens`: the OAuth 2 client-credentials grant against the token endpoint, as
  Kafka's `OAuthBearerLoginCallbackHandler` does it (HTTP Basic authentication with the URL-encoded
  client id and secret, `grant_type=client_credentials` and the scope in the form body); the token
  is kept until a minute before the `expires_in` the endpoint gave.
- `UnsecuredTokens`: TESTING ONLY, an unsigned JWS (`alg: none`) with `sub`, `iat` and `exp`, as
  Kafka's `OAuthBearerUnsecuredLoginCallbackHandler` builds it; only a broker with the unsecured
  validator (`OAuthBearerUnsecuredValidatorCallbackHandler`, the default) accepts it.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable

from kafka.net.sasl.oauth import AbstractTokenProvider

#: Lifetime of an unsecured token, seconds (Kafka's unsecured login handler's default).
UNSECURED_LIFETIME_S = 3600
#: A fetched token is fetched again this long before the endpoint says it expires, seconds.
REFRESH_MARGIN_S = 60.0
#: How long a request to the token endpoint may take, seconds.
ENDPOINT_TIMEOUT_S = 30.0


class TokenEndpointError(RuntimeError):
    """The token endpoint refused the client or answered without an access token."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unsecured_jws(subject: str, now_s: float, lifetime_s: int = UNSECURED_LIFETIME_S) -> str:
    """An unsigned JWS compact serialization (header.claims. with an empty signature)."""
    header = json.dumps({"alg": "none"}, separators=(",", ":")).encode()
    claims = json.dumps({"sub": subject, "iat": int(now_s), "exp": int(now_s) + lifetime_s},
                        separators=(",", ":")).encode()
    return f"{_b64url(header)}.{_b64url(claims)}."


class UnsecuredTokens(AbstractTokenProvider):  # type: ignore[misc]
    """A fresh unsigned token of `subject` at every authentication (testing only), sent with the
    SASL `extensions`."""

    def __init__(self, subject: str, extensions: dict[str, str] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self._subject = subject
        self._extensions = dict(extensions or {})
        self._clock = clock

    def token(self) -> str:
        return unsecured_jws(self._subject, self._clock())

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)


class ClientCredentialsTokens(AbstractTokenProvider):  # type: ignore[misc]
    """Access tokens from `endpoint` by the client-credentials grant, reused until shortly before
    they expire, sent with the SASL `extensions`. `client_secret` is a callable so that this object
    never holds the value in a field a repr could show."""

    def __init__(self, endpoint: str, client_id: str, client_secret: Callable[[], str], scope: str | None = None,
                 extensions: dict[str, str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._extensions = dict(extensions or {})
        self._endpoint = endpoint
        self._client_id = client_id
        self._client_secret = client_secret
        self._scope = scope
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._valid_until = 0.0

    def __repr__(self) -> str:
        return f"ClientCredentialsTokens({self._endpoint!r}, client_id={self._client_id!r})"

    def token(self) -> str:
        with self._lock:
            if self._token is None or self._clock() >= self._valid_until:
                self._token, lifetime_s = self._fetch()
                self._valid_until = self._clock() + max(0.0, lifetime_s - REFRESH_MARGIN_S)
            return self._token

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    def _fetch(self) -> tuple[str, float]:
        quote = urllib.parse.quote
        basic = base64.b64encode(f"{quote(self._client_id)}:{quote(self._client_secret())}".encode()).decode()
        form = {"grant_type": "client_credentials", **({"scope": self._scope} if self._scope else {})}
        request = urllib.request.Request(self._endpoint, data=urllib.parse.urlencode(form).encode(), headers={
            "Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=ENDPOINT_TIMEOUT_S) as response:
                body = json.loads(response.read())
        except (OSError, ValueError) as err:  # HTTPError and URLError are OSErrors
            raise TokenEndpointError(f"token endpoint {self._endpoint}: {err}") from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise TokenEndpointError(f"token endpoint {self._endpoint} answered without an access_token")
        lifetime = body.get("expires_in", UNSECURED_LIFETIME_S)
        return token, float(lifetime) if isinstance(lifetime, (int, float)) else float(UNSECURED_LIFETIME_S)
