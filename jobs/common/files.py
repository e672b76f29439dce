"""Writing synthetic streams as the project's JSON-lines input files (docs/formats.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pwevent.jobs.common.jsonl import dumps
from pwevent.jobs.common.provenance import RequirementSignature, sign
from pwevent.jobs.common.slots import FIRST_SLOT, SlotClock, iso
from pwevent.jobs.common.synthetic import RequirementDraw, SyntheticStream

DEMO_ORIGIN = "2024-01-01T00:00:00Z"
DEMO_ORIGIN_MS = 1_704_067_200_000


def write_synthetic(
    stream: SyntheticStream, out_dir: str, epsilon: float, w: int, slot_ms: int, dynamic: bool = False,
    types: int = 10, change_every: int = 500, signature: RequirementSignature | None = None,
    origin_ms: int = DEMO_ORIGIN_MS,
) -> tuple[Path, Path]:
    """events.jsonl and requirements.jsonl for a synthetic stream of slots from `origin_ms`; every user
    registers at slot 1. With a `signature`, every requirement record is signed (jobs.common.provenance)."""

    def requirement_line(record: dict[str, Any]) -> str:
        return dumps(record if signature is None else sign(record, signature)) + "\n"

    clock = SlotClock(origin_ms, slot_ms)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    events, requirements = out / "events.jsonl", out / "requirements.jsonl"
    with requirements.open("w", encoding="utf-8") as handle:
        if dynamic:
            draw = RequirementDraw(epsilon, w, types=types, change_every=change_every)
            user_type, schedule = draw.dynamic(stream.users, stream.slots, stream.seed)
            for slot, per_type in schedule.items():
                time = iso(clock.start_ms(slot))
                for user in range(stream.users):
                    requirement = per_type[int(user_type[user])].to_json()
                    handle.write(requirement_line({"user": f"u{user}", "time": time, **requirement}))
        else:
            for user, req in enumerate(RequirementDraw(epsilon, w).fixed(stream.users, stream.seed)):
                handle.write(requirement_line({"user": f"u{user}", "time": iso(origin_ms), **req.to_json()}))
    with events.open("w", encoding="utf-8") as handle:
        for slot, values in enumerate(stream.values(), FIRST_SLOT):
            start = clock.start_ms(slot)
            # spread a slot's events over its first half so every event falls inside it
            offsets = np.linspace(0, slot_ms // 2, num=len(values), dtype=np.int64)
            for user, (value, offset) in enumerate(zip(values, offsets, strict=True)):
                handle.write(f'{{"user":"u{user}","time":{int(start + offset)},"value":{int(value)}}}\n')
    return events, requirements
