"""What the release step remembers between slots: the last release and the last publication.

r_0 is all zeros (docs/mechanisms.md section 1); a skip or a nullified slot repeats the last release, so
the last release is also r_l, the last non-null publication that the dissimilarity compares with
(section 4). Slots must be decided in order, each once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from pwevent.state.spend import Kind


@dataclass
class ReleaseHistory:
    last: np.ndarray
    last_publication: int | None = None
    decided: int = 0

    @classmethod
    def start(cls, d: int, first: np.ndarray | None = None) -> ReleaseHistory:
        """Nothing decided yet; r_0 is zeros unless a public earlier release is given."""
        return cls(np.zeros(d, dtype=np.int64) if first is None else np.asarray(first, dtype=np.int64))

    def record(self, slot: int, kind: Kind, counts: np.ndarray) -> None:
        """Remember slot `slot`'s decision; refuses a slot out of order."""
        if slot != self.decided + 1:
            raise ValueError(f"slot {slot} decided after slot {self.decided}: slots are decided in order, once")
        self.decided = slot
        if kind is Kind.PUBLISH:
            self.last = np.asarray(counts, dtype=np.int64)
            self.last_publication = slot

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"last": self.last.tolist(), "publication": self.last_publication, "decided": self.decided}
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> ReleaseHistory:
        obj = json.loads(data)
        return cls(np.asarray(obj["last"], dtype=np.int64), obj["publication"], int(obj["decided"]))
