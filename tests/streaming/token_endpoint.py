"""The identity provider of the OAUTHBEARER tests (deploy/local/token-endpoint.py, loaded by its path:
a script of deploy/local, whose file name has a dash): the client-credentials grant answered with
RS256-signed JWTs, and their key as a JWKS (docs/operations.md, "Security")."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "deploy" / "local" / "token-endpoint.py"
_spec = importlib.util.spec_from_file_location("pwevent_token_endpoint", _PATH)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

TokenEndpoint = _module.TokenEndpoint
Signer = _module.Signer
claims_of = _module.claims_of
AUDIENCE: str = _module.AUDIENCE
