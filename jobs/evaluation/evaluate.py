"""`pwevent evaluate`: the paper's experiments and ours, over a grid, in parallel (docs/evaluation.md).

A grid is three one-factor sweeps around the defaults (E = 0.6, w = 120, the paper's uniform draw of
personalized levels): E over `epsilons`, w over `windows`, and the share o of users at the strictest
level over `ratios` (docs/mechanisms.md section 12). One task is one (dataset, sweep point, repetition): it
draws the data and the requirements once, runs every mechanism on them (so ratios such as PBD/BD
are paired) and scores each release raw and after Kalman post-processing (operators/postprocess.py)
with the metrics of section 11. Noise is the explicitly selected fast backend
`NumpyRandomness` ("numpy-geometric (fast)", section 10; with `--seed`, a seeded generator per task
and mechanism, "numpy-geometric (seeded, not for production)"), named in every result row.

Mechanisms: every one of the registry (operators/registry.py): the paper's PBD, PBA, DPBD, DPBA, the
baselines Uniform, Sample, BD, BA (global (w, E) = the strictest level, which covers every user), and
Adaptive, the deployable default (operators/family.py), run by the same Engine as the others.

Scores: MSE, MAE, MRE and AJSD of every release (jobs/evaluation/metrics.py) and, for the Kalman rows,
the coverage of the releases' nominal 95% intervals (the share of (slot, cell) whose true count lies
in `interval`, docs/formats.md). A dataset named `X+griefer` is dataset X with one more registered
user at the per-slot budget floor (docs/evaluation.md, "A registrant at the floor"): it sends no
event, and a baseline refuses it (its global (w, E) does not cover it).
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from pwevent.jobs.common.engine import Engine
from pwevent.jobs.common.extras import EVALUATE
from pwevent.jobs.common.progress import progress_printer
from pwevent.jobs.common.synthetic import DYNAMIC_DRAWS, STREAMS, RequirementDraw
from pwevent.jobs.evaluation.budget_split import check_pair, evaluate_split
from pwevent.jobs.evaluation.datasets import SlotValues
from pwevent.jobs.evaluation.grid import GRIEFER, GridSpec, Run, Task
from pwevent.jobs.evaluation.metrics import errors
from pwevent.jobs.evaluation.references import REFERENCE, reference_errors
from pwevent.jobs.evaluation.report import plot, summary_markdown
from pwevent.jobs.evaluation.sparse import HELD_OUT, SPARSE
from pwevent.jobs.evaluation.task_data import dataset_of, day_of
from pwevent.operators.postprocess import KalmanSmoother, PublicRelease
from pwevent.operators.registry import mechanism
from pwevent.state.population import UserRequirement
from pwevent.state.requirements import DEFAULT_MIN_SLOT_EPSILON, DynamicRequirement, Requirement
from pwevent.state.spend import Kind


@dataclass
class Released:
    """A mechanism's releases over the stream, public metadata included."""

    records: list[PublicRelease] = field(default_factory=list)
    families: list[str | None] = field(default_factory=list)
    note: str = ""
    noise: str = ""  # the noise backend's label

    def counts(self) -> np.ndarray:
        return np.array([r.counts for r in self.records], dtype=float)


def griefer_requirement(w: int, dynamic: bool) -> UserRequirement:
    """One user at the per-slot budget floor: E = 2 floor w, the smallest E a window of w admits
    (docs/mechanisms.md, Budget floor); both sides of a dynamic requirement alike."""
    floor = Requirement(w, 2 * DEFAULT_MIN_SLOT_EPSILON * w)
    return DynamicRequirement(floor, floor) if dynamic else floor


def _drive(engine: Engine, data: list[SlotValues], out: Released,
           schedule: Mapping[int, Sequence[UserRequirement]] | None = None,
           user_type: np.ndarray | None = None) -> None:
    """Every slot through `engine`; dynamic users redeclare on the type schedule (section 12)."""
    for t, (present, values) in enumerate(data, 1):
        if schedule is not None and user_type is not None and t > 1 and t in schedule:
            for u in range(len(user_type)):
                engine.redeclare(u, schedule[t][user_type[u]], t)
        outcome, _ = engine.step(t, present, values)
        out.records.append(PublicRelease.from_outcome(outcome))
        out.families.append(outcome.family)


def requirement_draw(task: Task) -> RequirementDraw:
    """The users' requirements of `task`: its sweep point, a sparse workload's own windows and the
    grid's dynamic draw (section 12; `--dynamic-requirements`)."""
    shape = SPARSE.get(task.dataset.removesuffix(GRIEFER))
    return RequirementDraw(task.epsilon, task.w, task.ratio, task.grid.types, task.grid.change_every,
                           shape.windows if shape is not None else None, task.grid.dynamic_draw)


def run_mechanism(name: str, task: Task, data: list[SlotValues], d: int, users: int) -> Released:
    """Drive the Engine over the slots; dynamic mechanisms redeclare on the type schedule (section 12)."""
    spec = mechanism(name, task.w, task.epsilon, day_of(task))
    draw = requirement_draw(task)
    noise = task.noise(name)
    engine = Engine(spec, d, noise, task.w)
    out = Released(noise=noise.label)
    if task.dataset.endswith(GRIEFER) and spec.global_requirement is None:  # a baseline refuses it
        engine.register(users, griefer_requirement(task.w, spec.dynamic), 1)  # index `users`: never present
    if not spec.dynamic:
        for u, req in enumerate(draw.fixed(users, task.rep)):
            engine.register(u, req, 1)
        _drive(engine, data, out)
    else:
        user_type, schedule = draw.dynamic(users, len(data), task.rep)
        for u in range(users):
            engine.register(u, schedule[1][user_type[u]], 1)
        _drive(engine, data, out, schedule, user_type)
    out.note = family_note(out.families)
    return out


def family_note(families: list[str | None]) -> str:
    """The families in force and from which slot, e.g. 'PBD from 1, PBA from 241' (empty for a
    mechanism with one rule)."""
    runs = [f"{family} from {t}" for t, family in enumerate(families, 1)
            if family is not None and (t == 1 or families[t - 2] != family)]
    return ", ".join(runs)


def smooth(released: Released, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Kalman post-processing, slot by slot (causal): the smoothed counts (T, d) and their nominal 95%
    intervals (T, d, 2), as a release carries them."""
    smoother = KalmanSmoother(d)
    values, intervals = [], []
    for record in released.records:
        smoothed = smoother.step(record)
        values.append(smoothed)
        intervals.append(smoother.interval(smoothed, record.population))
    return np.array(values), np.array(intervals)


def coverage(intervals: np.ndarray, truth: np.ndarray) -> tuple[float, float | None]:
    """The share of (slot, cell) whose true count lies in its interval, over all of them and over
    the occupied ones (true count above 0; None when there are none). An interval clipped at 0 holds
    every true 0, so on a sparse stream the first share says little about the cells that have users."""
    inside = (intervals[:, :, 0] <= truth) & (truth <= intervals[:, :, 1])
    occupied = truth > 0
    return float(np.mean(inside)), (float(np.mean(inside[occupied])) if occupied.any() else None)


def run_task(task: Task) -> list[Run]:
    """Every mechanism of the grid on one task's data, raw and post-processed, then the references
    (jobs/evaluation/references.py)."""
    dataset = dataset_of(task)
    cells = np.int8 if dataset.d <= 127 else np.int32  # values are held for all slots: keep them small
    data = [(np.asarray(u), np.asarray(v, dtype=cells)) for u, v in dataset.slot_values()]
    truth = np.array([np.bincount(v, minlength=dataset.d) for _, v in data], dtype=float)
    rows = []
    for name in task.grid.mechanisms:
        start = time.perf_counter()
        released = run_mechanism(name, task, data, dataset.d, dataset.users)
        seconds = time.perf_counter() - start
        publications = sum(r.kind is Kind.PUBLISH for r in released.records)
        smoothed, intervals = smooth(released, dataset.d)
        for post, counts, covered in (("none", released.counts(), (None, None)),
                                      ("kalman", smoothed, coverage(intervals, truth))):
            e = errors(counts, truth)
            rows.append(Run(task.dataset, name, post, task.sweep, task.epsilon, task.w, task.ratio, task.rep,
                            e.mse, e.mae, e.mre, e.ajsd, publications, seconds, released.noise,
                            released.note, *covered))
    for name, e in reference_errors(dataset, truth).items():
        rows.append(Run(task.dataset, name, REFERENCE, task.sweep, task.epsilon, task.w, task.ratio, task.rep,
                        e.mse, e.mae, e.mre, e.ajsd, 0, 0.0, "none", "evaluation-only reference"))
    return rows


def run_grid(grid: GridSpec, progress: Callable[[int, int], None] | None = None) -> Iterator[Run]:
    """All tasks over `grid.workers` processes (fork), yielding rows as tasks finish."""
    tasks = grid.tasks()
    if grid.workers == 1:
        for i, task in enumerate(tasks, 1):
            yield from run_task(task)
            if progress:
                progress(i, len(tasks))
        return
    with get_context("fork").Pool(grid.workers, maxtasksperchild=20) as pool:
        for i, rows in enumerate(pool.imap_unordered(run_task, tasks), 1):
            yield from rows
            if progress:
                progress(i, len(tasks))


FIELDS = [f for f in Run.__dataclass_fields__]


def write_csv(runs: Iterable[Run], path: Path) -> list[Run]:
    rows = list(runs)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        for run in rows:
            writer.writerow(asdict(run))
    return rows


def read_csv(path: Path) -> list[Run]:
    types = {"epsilon": float, "w": int, "rep": int, "mse": float, "mae": float, "mre": float, "ajsd": float,
             "publications": int, "seconds": float}
    out = []
    with path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            values: dict[str, Any] = {k: (types[k](v) if k in types else v) for k, v in row.items()}
            values["ratio"] = float(row["ratio"]) if row["ratio"] else None
            for key in ("coverage", "coverage_occupied"):  # absent in older files
                values[key] = float(row[key]) if row.get(key) else None
            out.append(Run(**values))
    return out


def evaluate(grid: GridSpec, out: Path, command: str, quiet: bool = False) -> tuple[Path, Path, list[Path]]:
    """Run the grid and write runs.csv, summary.md and the plots into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    runs = write_csv(run_grid(grid, None if quiet else progress_printer("evaluate", "task")), out / "runs.csv")
    seconds = time.monotonic() - started
    (out / "wall_seconds.txt").write_text(f"{seconds:.1f}\n", encoding="utf-8")
    summary = out / "summary.md"
    summary.write_text(summary_markdown(runs, grid, command, seconds), encoding="utf-8")
    return out / "runs.csv", summary, plot(runs, grid, out)


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def _numbers(text: str, kind: type[float] | type[int], option: str) -> tuple[Any, ...]:
    """The entries of a comma list option as numbers; ValueError naming the option and the entry."""
    values = []
    for entry in (x.strip() for x in text.split(",")):
        if not entry:
            continue
        try:
            values.append(kind(entry))
        except ValueError:
            raise ValueError(f"{option}: {entry!r} is not {'an integer' if kind is int else 'a number'}") from None
    return tuple(values)


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def grid_command(grid: GridSpec, out: str) -> str:
    """The full command line that reruns `grid` (every option spelt out)."""
    options = {
        "datasets": ",".join(grid.datasets), "mechanisms": ",".join(grid.mechanisms),
        "epsilons": ",".join(map(str, grid.epsilons)), "windows": ",".join(map(str, grid.windows)),
        "ratios": ",".join(map(str, grid.ratios)), "reps": grid.reps, "users": grid.users, "slots": grid.slots,
        "real-slot-minutes": grid.real_slot_minutes, "real-sweeps": ",".join(grid.real_sweeps),
        "types": grid.types, "change-every": grid.change_every, "dynamic-requirements": grid.dynamic_draw,
        "workers": grid.workers, "out": out,
    }
    if grid.real_slots is not None:
        options["real-slots"] = grid.real_slots
    if grid.first_rep:
        options["first-rep"] = grid.first_rep
    if grid.noise_seed is not None:
        options["seed"] = grid.noise_seed
    flags = "" if grid.default_point else " --no-default-point"
    return "pwevent evaluate " + " ".join(f"--{k} {shlex.quote(str(v))}" for k, v in options.items()) + flags


#: What a run writes besides the plots; a folder holding one of them is not overwritten by accident.
RESULT_FILES = ("runs.csv", "summary.md", "wall_seconds.txt")


def cmd_evaluate(args: argparse.Namespace) -> int:
    try:
        grid = GridSpec(
            datasets=_names(args.datasets), mechanisms=_names(args.mechanisms),
            epsilons=_numbers(args.epsilons, float, "--epsilons"), windows=_numbers(args.windows, int, "--windows"),
            ratios=_numbers(args.ratios, float, "--ratios"), reps=args.reps, first_rep=args.first_rep,
            users=args.users, slots=args.slots, real_slot_minutes=args.real_slot_minutes, real_slots=args.real_slots,
            real_sweeps=_names(args.real_sweeps), types=args.types, change_every=args.change_every,
            dynamic_draw=args.dynamic_requirements, workers=args.workers, noise_seed=args.seed,
            default_point=not args.no_default_point,
        )
        pair = check_pair(_names(args.statistics)) if args.statistics is not None else None
    except ValueError as err:  # a list entry not a number, an unknown dataset or mechanism, a bad count, no point
        print(f"pwevent evaluate: {err}", file=sys.stderr)
        return 2
    if pair is not None:
        return _evaluate_split(grid, pair, args)
    EVALUATE.require()  # before any work: the plots come last
    command = grid_command(grid, args.out)
    existing = [name for name in RESULT_FILES if (Path(args.out) / name).exists()]
    if existing and not (args.replot or args.overwrite):
        print(f"pwevent evaluate: {args.out} already holds {', '.join(existing)}; pass --overwrite to replace "
              "them, or choose another --out", file=sys.stderr)
        return 2
    if args.replot:
        runs = read_csv(Path(args.out) / "runs.csv")
        wall = Path(args.out) / "wall_seconds.txt"
        seconds = float(wall.read_text()) if wall.is_file() else None
        summary = Path(args.out) / "summary.md"
        summary.write_text(summary_markdown(runs, grid, command, seconds), encoding="utf-8")
        plots = plot(runs, grid, Path(args.out))
    else:
        _, summary, plots = evaluate(grid, Path(args.out), command, args.quiet)
    print(f"wrote {summary} and {len(plots)} plots in {args.out}")
    return 0


def _evaluate_split(grid: GridSpec, pair: tuple[str, str], args: argparse.Namespace) -> int:
    """`--statistics A,B`: the shared budget against two separate jobs (jobs/evaluation/budget_split.py)."""
    out = Path(args.out)
    if (out / "statistics.csv").exists() and not args.overwrite:
        print(f"pwevent evaluate: {args.out} already holds statistics.csv; pass --overwrite to replace it, or "
              "choose another --out", file=sys.stderr)
        return 2
    command = grid_command(replace(grid, datasets=(pair[0],)), args.out) + f" --statistics {','.join(pair)}"
    print(f"wrote {evaluate_split(grid, pair, out, command)} and {out / 'statistics.csv'}")
    return 0


def add_evaluate_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `pwevent evaluate` on the CLI's subparsers (jobs/cli/main.py)."""
    g = GridSpec()
    p = sub.add_parser(
        "evaluate", help="run the experiment grid; write runs.csv, summary.md and plots",
        description="Three one-factor sweeps (E, w, share o of users at the strictest level) around the paper's "
        "defaults, every mechanism raw and with Kalman post-processing, in parallel. Fast numpy noise "
        "('numpy-geometric (fast)'), named in the results. See docs/evaluation.md.",
    )
    p.add_argument("--datasets", default=",".join(g.datasets), help="comma list of TLNS, Sin, Log, Foursquare and "
                   "the sparse workloads (" + ", ".join(SPARSE) + "; held out of tuning: " + ", ".join(HELD_OUT)
                   + f"), each also as NAME{GRIEFER} (one more user at the budget floor)")
    p.add_argument("--mechanisms", default=",".join(g.mechanisms), help="comma list of registered mechanisms")
    p.add_argument("--epsilons", default=",".join(map(str, g.epsilons)), help="E sweep (lowest personalized budget)")
    p.add_argument("--windows", default=",".join(map(str, g.windows)), help="w sweep (largest personalized window)")
    p.add_argument("--ratios", default=",".join(map(str, g.ratios)), help="sweep of the share o of strict users")
    p.add_argument("--reps", type=int, default=g.reps, help="repetitions (data seed = repetition index)")
    p.add_argument("--first-rep", type=int, default=0, help="index of the first repetition (to split a grid "
                   "into runs whose runs.csv files concatenate)")
    p.add_argument("--users", type=int, default=g.users, help="synthetic users")
    p.add_argument("--slots", type=int, default=g.slots, help="synthetic slots")
    p.add_argument("--real-slot-minutes", type=int, default=g.real_slot_minutes, help="Foursquare slot length")
    p.add_argument("--real-slots", type=int, help="Foursquare: only the first N slots")
    p.add_argument("--real-sweeps", default=",".join(g.real_sweeps), help="sweeps run on Foursquare and the "
                   "sparse workloads (these never run the w sweep: their windows are their own)")
    p.add_argument("--types", type=int, default=g.types, help="dynamic: requirement types K")
    p.add_argument("--change-every", type=int, default=g.change_every, help="dynamic: slots S between redraws")
    p.add_argument("--dynamic-requirements", choices=DYNAMIC_DRAWS, default=g.dynamic_draw,
                   help="the dynamic mechanisms' users: 'types' (the paper's: K types redraw their forward "
                   "requirement every S slots, looser than the fixed draw in distribution) or 'fixed' (every "
                   "user declares the fixed mechanisms' requirement of the same user once: comparisons at equal "
                   "protection)")
    p.add_argument("--workers", type=int, default=default_workers(), help="worker processes (default: cores)")
    p.add_argument("--seed", type=int, help="seed the noise: each task and mechanism draws from a generator "
                   "seeded by SEED and the task, so that the results repeat (default: OS-seeded)")
    p.add_argument("--no-default-point", action="store_true", help="run only the listed points: without it the "
                   "default point (E 0.6, w 120, uniform draw) is run once even when no sweep lists it; for a grid "
                   "run in parts whose runs.csv files are merged")
    p.add_argument("--statistics", help="two synthetic streams A,B (of " + ", ".join(STREAMS) + ") as two statistics "
                   "of the same users: every mechanism under one budget (share 0.5 each) against two separate jobs "
                   "at half the budget each, over the grid's sweeps of A (--datasets is not used); writes "
                   "statistics.csv and statistics.md (docs/evaluation.md, 'Several statistics under one budget')")
    p.add_argument("--out", default="pwevent-results", help="output folder (default: ./pwevent-results); a folder "
                   "that already holds results is refused unless --overwrite (or --replot)")
    p.add_argument("--overwrite", action="store_true", help="replace the results already in --out")
    p.add_argument("--replot", action="store_true", help="rebuild summary and plots from OUT/runs.csv")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_evaluate)
