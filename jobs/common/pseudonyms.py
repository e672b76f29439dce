"""Pseudonymous user ids (`pseudonymise: {key: ${SECRET}}`; docs/operations.md, "Retention and erasure").

With the setting, the reference parsers (jobs/common/records.py) replace each valid user id by its
pseudonym as the last step of parsing, after the requirement's signature is verified; the SQL fast
paths' Java splits (`pwevent.flink.parsing.Pseudonyms`, used by `FastPathSplit` and
`RequirementSplit`) apply the same rule to the ids they extract. So the job's state, the audit
topic's `member` lines, the dead letters' parsed fields (an `unknown_user` detail) and the replay's
outputs hold pseudonyms only.

The rule: HMAC-SHA256 under the key (its UTF-8 bytes) of the id's UTF-8 bytes, as lowercase hex cut
to PSEUDONYM_HEX_CHARS characters. 32 hex characters are 128 bits: the chance that two of a billion
ids share a pseudonym is below 1e-20, and a pseudonym is itself a valid user id (the fast paths'
canonical form), so the auditor reads it as it read ids. Without the key a pseudonym of a
high-entropy id cannot be reversed or linked to it; whoever holds the key can test guesses, so a
low-entropy id (a phone number, a counter) is protected from readers without the key only.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from pwevent.jobs.common.secrets import Secret

#: Length of a pseudonym, in lowercase hex characters (128 bits of HMAC-SHA256).
PSEUDONYM_HEX_CHARS = 32
#: Shortest key, in UTF-8 bytes: HMAC-SHA256's own output size (`openssl rand -hex 32` gives 64).
MIN_KEY_BYTES = 32


@dataclass(frozen=True)
class Pseudonyms:
    """The pseudonym of every user id under one key (a `Secret`, never shown)."""

    key: Secret

    def __post_init__(self) -> None:
        if len(self.key_bytes()) < MIN_KEY_BYTES:
            raise ValueError(f"the key has {len(self.key_bytes())} bytes; at least {MIN_KEY_BYTES} "
                             "(generate one with `openssl rand -hex 32`)")

    def key_bytes(self) -> bytes:
        return self.key.reveal().encode("utf-8")

    def of(self, user: str) -> str:
        """The pseudonym of `user` (a valid user id)."""
        digest = hmac.new(self.key_bytes(), user.encode("utf-8"), hashlib.sha256).hexdigest()
        return digest[:PSEUDONYM_HEX_CHARS]
