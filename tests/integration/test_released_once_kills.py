"""A slot's outcome is drawn once across repeated `kill -9` of `pwevent run` and `--restore latest` at
random points, over a backlog (seeded, and with fresh noise, where a second draw would show) and
over a live paced stream (docs/streaming.md, "A slot's outcome is drawn once").

Every test ends with `released_once`: every slot read `read_uncommitted` once or in byte-identical
copies (jobs/offline/release_topic.py), the committed releases and the spend log equal `pwevent
replay` with the same seed, and `pwevent audit --release-topic` (the full audit, the topic check
included) passes (tests/integration/released_once.py)."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from pwevent.jobs.common.files import iso
from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import (
    SEED,
    ahead_origin,
    generate,
    make_job,
)
from tests.integration.released_once import (
    GUARD_S,
    SEED_KILLS,
    kill_and_restore,
    kill_delays,
    paced_producer,
    released_once,
)

pytestmark = [pytest.mark.kafka, pytest.mark.flink, pytest.mark.slow]


@pytest.mark.parametrize("seeded", [True, False], ids=["seeded", "fresh-noise"])
def test_kills_over_a_backlog(streaming_job: Any, seeded: bool) -> None:
    """KILLS `kill -9` at random points of a backlog, each followed by `--restore latest`. The job
    decides the whole backlog within about a second of running; the kills come in the first, second
    and third second after the tasks run (`kill_delays`), with checkpoints 2 s apart, so that the
    early ones meet decided releases that no completed checkpoint holds yet and the last comes
    after one. Seeded, the job equals the replay.
    With fresh noise (no `--seed`: each draw new, as in production) the replay cannot be compared,
    but a slot decided again after a restore draws other noise: the read_uncommitted check is what
    catches a second draw that was shown (seeded, a restored noise source repeats its draws, and
    such a second draw would be identical)."""
    slots = 40
    rng = random.Random(SEED_KILLS)
    print(f"\nkill seed {SEED_KILLS}")
    seed = SEED if seeded else None
    job = make_job(streaming_job, "PBD", {"flink": {"checkpoint_interval": "2s"}})
    events, requirements = generate(job.folder, users=40, slots=slots, w=5)
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    job.start(seed=seed)
    for delay in kill_delays(rng, 3.0):
        kill_and_restore(job, delay, seed=seed)
    released_once(job, events, requirements, slots, seeded)


def test_kills_over_a_live_stream(streaming_job: Any) -> None:
    """KILLS `kill -9` at random points (one in each second of the 3 s after the tasks run) of a
    stream produced slot by slot, 0.5 s a slot, each followed by `--restore latest`. The stream lies ahead of the clock
    (`ahead_origin`): its slots close by event time as its records come, all but the last."""
    slots = 30
    rng = random.Random(SEED_KILLS + 1)
    print(f"\nkill seed {SEED_KILLS + 1}")
    origin = ahead_origin()
    job = make_job(streaming_job, "PBA", {"origin": iso(origin), "flink": {"checkpoint_interval": "500ms"}})
    events, requirements = generate(job.folder, users=30, slots=slots, w=5, origin_ms=origin)
    job.start(seed=SEED)
    down = threading.Event()
    with paced_producer(job, events, requirements, 0.5, slots, down) as done:
        for delay in kill_delays(rng, 3.0):
            kill_and_restore(job, delay, down)
        assert done.wait(GUARD_S)
    released_once(job, events, requirements, slots - 1)
