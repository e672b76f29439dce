"""`pwevent evaluate --statistics A,B`: two statistics of the same users under one budget, against two
separate jobs at half the budget each (docs/evaluation.md, "Several statistics under one budget").

Statistic A is synthetic stream A's value of each user and statistic B stream B's, drawn for the same
users and slots (every user present in every slot of both, as in one event carrying both values).
Every task of the grid's sweeps runs every mechanism twice:
- `shared`: one configuration with both statistics at share 0.5 each (one `Engine` per statistic
  at `share=0.5`, one noise generator, as `pwevent replay` runs them);
- `separate`: two jobs, each one statistic at the whole-budget rules but every requirement declared
  at half its budget (E/2, or EB/2 and EF/2), each with its own noise generator: today's only way to
  keep a user's two jobs within E.
Both give every ledger the same bound, so the comparison shows what the shared configuration costs in
utility (nothing, up to noise) for what it adds: one configuration, one spend log, one audit of each
user's total (docs/mechanisms.md, "Several statistics under one budget").

Rows go to `statistics.csv`; `statistics.md` has the mean MSE per statistic, mechanism,
post-processing and arm with a 95% interval over the repetitions, and the ratio shared / separate.
"""

from __future__ import annotations

import csv
import math
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.synthetic import STREAMS, RequirementDraw
from pwevent.jobs.evaluation.datasets import SlotValues
from pwevent.jobs.evaluation.grid import GridSpec, Task
from pwevent.jobs.evaluation.metrics import errors
from pwevent.jobs.evaluation.task_data import dataset_of
from pwevent.operators.postprocess import KalmanSmoother, PublicRelease
from pwevent.operators.registry import mechanism
from pwevent.state.population import UserRequirement
from pwevent.state.spend import Kind

#: Each statistic's share in the shared arm, and the part of the budget each separate job declares.
HALF = 0.5
ARMS = ("shared", "separate")


@dataclass(frozen=True)
class SplitRun:
    """One statistic of one mechanism in one arm of one task, raw or post-processed."""

    pair: str
    statistic: str
    mechanism: str
    arm: str
    post: str
    sweep: str
    epsilon: float
    w: int
    ratio: float | None
    rep: int
    mse: float
    mae: float
    publications: int


def check_pair(names: tuple[str, ...]) -> tuple[str, str]:
    """Two distinct synthetic streams (every user present in every slot of both); ValueError otherwise."""
    if len(names) != 2 or names[0] == names[1] or any(name not in STREAMS for name in names):
        raise ValueError(f"--statistics: two different synthetic streams of {', '.join(STREAMS)} (every user is "
                         f"present in every slot of both), got {','.join(names) or 'none'}")
    return names[0], names[1]


def _data(task: Task, name: str) -> list[SlotValues]:
    return [(np.asarray(u), np.asarray(v, dtype=np.int8)) for u, v in dataset_of(replace(task, dataset=name))
            .slot_values()]


def _registered(engine: Engine, requirements: list[UserRequirement]) -> Engine:
    for user, requirement in enumerate(requirements):
        engine.register(user, requirement, 1)
    return engine


def _drive(engines: list[Engine], data: list[list[SlotValues]], schedule: dict[int, list[UserRequirement]] | None,
           user_type: np.ndarray | None, share: float) -> list[list[PublicRelease]]:
    """Every slot through every engine (statistic k's values to engines[k]); dynamic users redeclare on
    the type schedule, at `share` of each requirement (the separate arm's declarations)."""
    out: list[list[PublicRelease]] = [[] for _ in engines]
    for t in range(1, len(data[0]) + 1):
        for k, engine in enumerate(engines):
            if schedule is not None and user_type is not None and t > 1 and t in schedule:
                for u in range(len(user_type)):
                    engine.redeclare(u, schedule[t][user_type[u]].scaled(share), t)
            present, values = data[k][t - 1]
            outcome, _ = engine.step(t, present, values)
            out[k].append(PublicRelease.from_outcome(outcome))
    return out


def _engines(task: Task, name: str, arm: str, first: list[UserRequirement]) -> list[Engine]:
    """The two statistics' engines of an arm, their users registered: `shared`, both at share 0.5 of each
    requirement with one noise generator; `separate`, two jobs whose users declare half their budgets
    (a baseline's global (w, E) halved too), each with its own generator."""
    if arm == "shared":
        noise = task.noise(f"{name}|shared")
        return [_registered(Engine(mechanism(name, task.w, task.epsilon), 2, noise, task.w, share=HALF), first)
                for _ in range(2)]
    return [_registered(Engine(mechanism(name, task.w, task.epsilon * HALF), 2, task.noise(f"{name}|separate|{k}"),
                               task.w), [r.scaled(HALF) for r in first]) for k in range(2)]


def run_split_task(job: tuple[Task, tuple[str, str]]) -> list[SplitRun]:
    """Both arms of every mechanism of the grid on one task (the sweep point and repetition of `task`)."""
    task, pair = job
    data = [_data(task, name) for name in pair]
    users = len(data[0][0][0])
    truths = [np.array([np.bincount(v, minlength=2) for _, v in stream], dtype=float) for stream in data]
    rows = []
    for name in task.grid.mechanisms:
        spec = mechanism(name, task.w, task.epsilon)
        draw = RequirementDraw(task.epsilon, task.w, task.ratio, task.grid.types, task.grid.change_every,
                               dynamic_draw=task.grid.dynamic_draw)
        schedule: dict[int, list[UserRequirement]] | None = None
        user_type = None
        if spec.dynamic:
            user_type, dynamic = draw.dynamic(users, len(data[0]), task.rep)
            schedule = {t: list(requirements) for t, requirements in dynamic.items()}
            first = [schedule[1][t] for t in user_type]
        else:
            first = list(draw.fixed(users, task.rep))
        for arm, share in (("shared", 1.0), ("separate", HALF)):
            released = _drive(_engines(task, name, arm, first), data, schedule, user_type, share)
            for k, records in enumerate(released):
                rows += _scored(task, pair, k, name, arm, records, truths[k])
    return rows


def _scored(task: Task, pair: tuple[str, str], k: int, name: str, arm: str, records: list[PublicRelease],
            truth: np.ndarray) -> list[SplitRun]:
    counts = np.array([r.counts for r in records], dtype=float)
    smoother = KalmanSmoother(2)
    smoothed = np.array([smoother.step(r) for r in records])
    publications = sum(r.kind is Kind.PUBLISH for r in records)
    out = []
    for post, values in (("none", counts), ("kalman", smoothed)):
        e = errors(values, truth)
        out.append(SplitRun("&".join(pair), pair[k], name, arm, post, task.sweep, task.epsilon, task.w, task.ratio,
                            task.rep, e.mse, e.mae, publications))
    return out


def run_split(grid: GridSpec, pair: tuple[str, str]) -> Iterator[SplitRun]:
    """Every task of the grid's sweeps (at `pair[0]`'s points) over `grid.workers` processes."""
    tasks = [(replace(task, dataset=pair[0]), pair) for task in replace(grid, datasets=(pair[0],)).tasks()]
    if grid.workers == 1:
        for job in tasks:
            yield from run_split_task(job)
        return
    with get_context("fork").Pool(grid.workers, maxtasksperchild=20) as pool:
        for rows in pool.imap_unordered(run_split_task, tasks):
            yield from rows


FIELDS = list(SplitRun.__dataclass_fields__)


def summary(rows: list[SplitRun], command: str, seconds: float) -> str:
    """Mean MSE with a 95% interval over the repetitions, per point, statistic, mechanism, post and arm,
    and the ratio of the shared arm's mean to the separate arm's."""
    groups: dict[tuple[Any, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        key = (row.sweep, row.epsilon, row.w, row.ratio, row.statistic, row.mechanism, row.post)
        groups[key][row.arm].append(row.mse)
    lines = [f"# Two statistics under one budget: {rows[0].pair if rows else ''}", "",
             f"`{command}` ({seconds:.0f} s). MSE per cell and slot, mean over the repetitions with a 95% "
             "interval (t); shared: one configuration, share 0.5 each; separate: two jobs, each user at half "
             "its budget.", "",
             "| sweep | E | w | ratio | statistic | mechanism | post | shared | separate | shared / separate |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, arms in sorted(groups.items(), key=lambda item: tuple(str(x) for x in item[0])):
        sweep, epsilon, w, ratio, statistic, name, post = key
        shared, separate = (_mean_ci(arms[arm]) for arm in ARMS)
        ratio_text = f"{shared[0] / separate[0]:.3f}" if separate[0] > 0 else "-"
        lines.append(f"| {sweep} | {epsilon} | {w} | {'' if ratio is None else ratio} | {statistic} | {name} | "
                     f"{post} | {shared[0]:.4g} +- {shared[1]:.2g} | {separate[0]:.4g} +- {separate[1]:.2g} | "
                     f"{ratio_text} |")
    return "\n".join(lines) + "\n"


def _mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half width of its 95% t interval (0 for a single value)."""
    from statistics import stdev

    n = len(values)
    mean = float(np.mean(values)) if values else math.nan
    if n < 2:
        return mean, 0.0
    t = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}.get(n, 1.96)
    return mean, t * stdev(values) / math.sqrt(n)


def evaluate_split(grid: GridSpec, pair: tuple[str, str], out: Path, command: str) -> Path:
    """Run the comparison; write statistics.csv and statistics.md into `out`; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    rows = list(run_split(grid, pair))
    seconds = time.monotonic() - started
    with (out / "statistics.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        for row in rows:
            writer.writerow(asdict(row))
    path = out / "statistics.md"
    path.write_text(summary(rows, command, seconds), encoding="utf-8")
    return path
