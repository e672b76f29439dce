"""The data one evaluation task runs on (`dataset_of`): a synthetic stream of the paper's, a sparse
workload (jobs/evaluation/sparse.py) or Foursquare, drawn for the task's repetition; `X+griefer`
is X's data (the registrant at the floor sends nothing). Shared by `pwevent evaluate` and the budget
split's comparison (jobs/evaluation/budget_split.py)."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from pwevent.jobs.common.slots import slots_per_day
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.evaluation.csv_loader import Grid
from pwevent.jobs.evaluation.datasets import Dataset, SyntheticDataset
from pwevent.jobs.evaluation.grid import GRIEFER, Task
from pwevent.jobs.evaluation.sparse import SPARSE, SparseStream


@lru_cache(maxsize=2)
def _foursquare(slot_minutes: int, slots: int | None) -> Dataset:
    from pwevent.jobs.evaluation.foursquare import load_foursquare

    slotted = load_foursquare(Grid(10, 10)).slotted(slot_minutes * 60_000)
    if slots is None or slots >= slotted.slots:
        return slotted
    keep = slotted.slot <= slots
    return replace(slotted, slots=slots, slot=slotted.slot[keep], user=slotted.user[keep], value=slotted.value[keep])


def day_of(task: Task) -> int:
    """The slots in a day of `task`'s data (`SlotClock.day`): 24 on the hourly sparse workloads,
    Foursquare's at its slot length, 1 on the daily workloads and the synthetic streams (no clock)."""
    name = task.dataset.removesuffix(GRIEFER)
    if name == "Foursquare":
        return slots_per_day(task.grid.real_slot_minutes * 60_000)
    if name in SPARSE and SPARSE[name].hourly:
        return slots_per_day(3_600_000)
    return 1


def dataset_of(task: Task) -> Dataset:
    """The data of `task`: its dataset at its grid's size, drawn with its repetition as the seed."""
    grid = task.grid
    name = task.dataset.removesuffix(GRIEFER)
    if name == "Foursquare":
        return _foursquare(grid.real_slot_minutes, grid.real_slots)
    if name in SPARSE:
        return SparseStream(SPARSE[name], seed=task.rep)
    return SyntheticDataset(SyntheticStream(name, grid.users, grid.slots, seed=task.rep))
