"""What `pwevent evaluate` runs, and the rows it writes (docs/evaluation.md): the grid of datasets,
sweep points and repetitions, one task of it, and one result row."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from pwevent.jobs.common.synthetic import STREAMS, check_dynamic_draw
from pwevent.jobs.evaluation.sparse import SPARSE
from pwevent.operators.noise import NumpyRandomness
from pwevent.operators.registry import REGISTRY

BASE_DATASETS = STREAMS + ("Foursquare",)
#: The sparse workloads (jobs/evaluation/sparse.py); run only when named.
SPARSE_DATASETS = tuple(SPARSE)
#: A dataset with one more registered user at the budget floor: `TLNS+griefer` etc.
GRIEFER = "+griefer"
DATASETS = tuple(name + suffix for suffix in ("", GRIEFER) for name in BASE_DATASETS + SPARSE_DATASETS)


@dataclass(frozen=True)
class GridSpec:
    """What `pwevent evaluate` runs. Defaults: the paper's (10,000 users x 10,000 slots, 10 repetitions)."""

    datasets: tuple[str, ...] = BASE_DATASETS
    mechanisms: tuple[str, ...] = field(default_factory=REGISTRY.names)
    epsilons: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)
    windows: tuple[int, ...] = (40, 80, 120, 160, 200)
    ratios: tuple[float, ...] = (0.2, 0.5, 0.8)
    epsilon: float = 0.6
    w: int = 120
    reps: int = 10
    first_rep: int = 0
    users: int = 10_000
    slots: int = 10_000
    real_slot_minutes: int = 60
    real_slots: int | None = None
    real_sweeps: tuple[str, ...] = ("epsilon", "w", "ratio")
    types: int = 10
    change_every: int = 500
    #: The dynamic mechanisms' users: "types" (the paper's redraws) or "fixed" (the fixed draw's
    #: requirements, for comparisons at equal protection; RequirementDraw).
    dynamic_draw: str = "types"
    workers: int = 2
    #: None: OS-seeded noise ("numpy-geometric (fast)"); a number: every (task, mechanism) draws its
    #: noise from a generator seeded by it and the task, so that a grid's results repeat exactly.
    noise_seed: int | None = None
    #: Run the default point (E, w, uniform draw) once even when no sweep lists it. False: only the
    #: listed points, for a grid run in parts whose runs.csv files are merged (docs/results/README.md).
    default_point: bool = True

    def __post_init__(self) -> None:
        for name in self.datasets:
            if name not in DATASETS:
                raise ValueError(f"dataset must be one of {', '.join(DATASETS)}, got {name!r}")
        for name in self.mechanisms:
            REGISTRY.get(name)  # a ValueError naming the registered mechanisms
        if self.reps < 1 or self.users < 1 or self.slots < 1 or self.workers < 1:
            raise ValueError("reps, users, slots and workers must be positive")
        if self.first_rep < 0:
            raise ValueError(f"first_rep must be >= 0, got {self.first_rep}")
        check_dynamic_draw(self.dynamic_draw)
        if self.noise_seed is not None and self.noise_seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.noise_seed}")
        if not any(self.points(name) for name in self.datasets):
            raise ValueError("the grid has no points: list E values (epsilons), windows or ratios, or drop "
                             "--no-default-point")

    def default_w(self, dataset: str) -> int:
        """The widest window of the default point: `w`, or a sparse workload's own widest window."""
        shape = SPARSE.get(dataset.removesuffix(GRIEFER))
        return self.w if shape is None else shape.w

    def points(self, dataset: str) -> list[tuple[str, float, int, float | None]]:
        """(sweep, E, w, ratio) of every sweep point; the default point is run once, as 'epsilon' (unless
        `default_point` is False and the E sweep does not list it). Foursquare runs `real_sweeps`; a
        sparse workload runs them too, at its own windows, without the w sweep."""
        name = dataset.removesuffix(GRIEFER)
        sweeps = ("epsilon", "w", "ratio") if name in STREAMS else self.real_sweeps
        if name in SPARSE:
            sweeps = tuple(x for x in sweeps if x != "w")
        w = self.default_w(dataset)
        out: list[tuple[str, float, int, float | None]] = [
            ("epsilon", e, w, None) for e in (self.epsilons if "epsilon" in sweeps else ())
        ]
        if self.default_point and all(e != self.epsilon for _, e, _, _ in out):
            out.append(("epsilon", self.epsilon, w, None))
        if "w" in sweeps:
            out += [("w", self.epsilon, w, None) for w in self.windows if w != self.w]
        if "ratio" in sweeps:
            out += [("ratio", self.epsilon, w, o) for o in self.ratios]
        return out

    def tasks(self) -> list[Task]:
        return [
            Task(self, name, sweep, e, w, o, rep)
            for rep in range(self.first_rep, self.first_rep + self.reps)
            for name in self.datasets
            for sweep, e, w, o in self.points(name)
        ]


@dataclass(frozen=True)
class Task:
    grid: GridSpec
    dataset: str
    sweep: str
    epsilon: float
    w: int
    ratio: float | None
    rep: int

    def noise(self, mechanism: str) -> NumpyRandomness:
        """The noise `mechanism` draws on this task: OS-seeded, or with `GridSpec.noise_seed` a
        generator seeded by it, the repetition and a checksum of the task and the mechanism (the same
        in every worker and on every run; different for every task and mechanism)."""
        if self.grid.noise_seed is None:
            return NumpyRandomness()
        key = f"{self.dataset}|{self.sweep}|{self.epsilon!r}|{self.w}|{self.ratio!r}|{mechanism}".encode()
        sequence = np.random.SeedSequence([self.grid.noise_seed, self.rep, zlib.crc32(key)])
        return NumpyRandomness(int(sequence.generate_state(1, np.uint64)[0]))


@dataclass(frozen=True)
class Run:
    """One result row: a mechanism (and post-processing) on one task."""

    dataset: str
    mechanism: str
    post: str
    sweep: str
    epsilon: float
    w: int
    ratio: float | None
    rep: int
    mse: float
    mae: float
    mre: float
    ajsd: float
    publications: int
    seconds: float
    noise: str
    note: str = ""
    coverage: float | None = None  # Kalman rows: share of true counts inside the 95% intervals
    coverage_occupied: float | None = None  # Kalman rows: the same over the (slot, cell) with users
