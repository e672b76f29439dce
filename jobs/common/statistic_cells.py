"""An event's cell under each of the configuration's statistics (docs/mechanisms.md, "Several
statistics under one budget"), and the one number the streaming job carries them in.

`observe` reads an event record once per statistic, each with its own value fields and domain, by the
one definition of a valid event (`parse_event`); the replay and the job's reference parser both call
it. The job's rows carry one INT cell per event (jobs/streaming/jvm_contract), so several statistics'
cells travel as one mixed-radix number, `joint_cell` (statistic 0 the lowest digit), which the
Population splits back (`split_cells`) into each statistic's counts. With one statistic the number is
its cell.
"""

from __future__ import annotations

from dataclasses import dataclass

from pwevent.jobs.common.config import DEFAULT_MAX_RECORD_BYTES, Config, Statistic
from pwevent.jobs.common.kafka_record import KafkaRecord
from pwevent.jobs.common.pseudonyms import Pseudonyms
from pwevent.jobs.common.reasons import Rejected
from pwevent.jobs.common.records import Event, KafkaTimestamp, parse_event

#: The largest joint cell: the job's rows hold a cell in a Java int.
MAX_JOINT_CELLS = 2**31 - 1


@dataclass(frozen=True)
class Observed:
    """A valid event: its user, time and its cell under each statistic (Config.statistics)."""

    user: str
    time_ms: int
    cells: tuple[int, ...]


def observe(data: str | bytes | KafkaRecord, config: Config, kafka_time: KafkaTimestamp | None = None,
            max_bytes: int = DEFAULT_MAX_RECORD_BYTES, pseudonyms: Pseudonyms | None = None) -> Observed:
    """An event record read once per statistic (`parse_event` with the statistic's value fields and
    domain). Raises Rejected as `parse_event` does; a named statistic's detail starts with its name."""
    cells = []
    event: Event | None = None
    for statistic in config.statistics:
        try:
            event = parse_event(data, statistic.events, statistic.domain, kafka_time, max_bytes, pseudonyms)
        except Rejected as err:
            if statistic.name is None:
                raise
            raise Rejected(err.reason, f"statistic {statistic.name}: {err.detail}") from None
        cells.append(event.cell)
    assert event is not None
    return Observed(event.user, event.time_ms, tuple(cells))


def joint_size(statistics: tuple[Statistic, ...]) -> int:
    """How many joint cells there are: the product of the domains' sizes."""
    size = 1
    for statistic in statistics:
        size *= statistic.domain.d
    return size


def joint_cell(cells: tuple[int, ...], statistics: tuple[Statistic, ...]) -> int:
    """Each statistic's cell as one number, statistic 0 the lowest digit (base: each domain's d)."""
    joint, stride = 0, 1
    for cell, statistic in zip(cells, statistics, strict=True):
        joint += cell * stride
        stride *= statistic.domain.d
    return joint


def split_cells(joint: int, statistics: tuple[Statistic, ...]) -> tuple[int, ...]:
    """The cells `joint_cell` packed into `joint`."""
    out = []
    for statistic in statistics:
        joint, cell = divmod(joint, statistic.domain.d)
        out.append(cell)
    if joint:
        raise ValueError(f"joint cell beyond the statistics' {joint_size(statistics)} cells")
    return tuple(out)
