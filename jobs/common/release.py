"""The release record: what the job writes to its release topic and `pwevent replay` to its releases
file, one per slot (docs/formats.md, "Release"; its fields are declared in jobs/common/release_schema.py).
One function for both, so that job = replay holds field by field; the release topic's formats encode
this record (jobs/streaming/release_format.py)."""

from __future__ import annotations

from typing import Any

from pwevent.jobs.common.config import Config, Statistic
from pwevent.jobs.common.release_schema import RELEASE_SCHEMA_VERSION
from pwevent.jobs.common.slots import iso
from pwevent.operators.postprocess import KalmanSmoother, PublicRelease
from pwevent.operators.slot_release import SlotOutcome

__all__ = ["RELEASE_SCHEMA_VERSION", "release_record"]


def release_record(
    outcome: SlotOutcome, config: Config, noise: str, smoother: KalmanSmoother | None = None,
    statistic: Statistic | None = None,
) -> dict[str, Any]:
    """The release line/message (docs/schemas/release.schema.json) of `statistic` (default: the
    configuration's first); a named statistic's record carries its name, `statistic`.

    With a smoother, the slot's release also goes through the post-processing (one causal step, so
    call this exactly once per slot, in order) and the record carries its output as `smoothed`.
    """
    clock = config.clock
    statistic = statistic or config.statistics[0]
    record: dict[str, Any] = {
        "schema_version": RELEASE_SCHEMA_VERSION,
        "slot": outcome.slot,
        **({"statistic": statistic.name} if statistic.name is not None else {}),
        "start": iso(clock.start_ms(outcome.slot)),
        "end": iso(clock.end_ms(outcome.slot)),
        "mechanism": config.mechanism,
        **({"family": outcome.family} if outcome.family is not None else {}),
        "kind": outcome.kind.value,
        "counts": [int(c) for c in outcome.counts],
        "population": outcome.population,
        "epsilon_calculation": outcome.calculation.epsilon if outcome.calculation else None,
        "epsilon_publication": outcome.publication.epsilon if outcome.publication else None,
        "threshold": outcome.threshold,
        "kept_share": outcome.publication.kept_share if outcome.publication else None,
        "dissimilarity": outcome.dissimilarity,
        "noise": noise,
        "domain": statistic.domain.describe(),
    }
    if smoother is not None:
        smoothed = smoother.step(PublicRelease.from_outcome(outcome))
        record["smoothed"] = [round(float(x), 3) for x in smoothed]
        record["interval"] = [[round(float(low), 3), round(float(high), 3)]
                              for low, high in smoother.interval(smoothed, outcome.population)]
    return record
