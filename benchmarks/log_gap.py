"""Where the default loses on the Log stream, measured (docs/results/README.md, "The Log gap").

For each repetition (data seed = repetition, as in `pwevent evaluate`) at E = 0.6, w = 120: the releases
of Uniform, Sample, DPBA and the deployable Adaptive (PBD/PBA, docs/mechanisms.md section 14) through
jobs/evaluation/evaluate.py's runner (fast numpy noise), each
filtered by the default Kalman bank and by the bank with the opt-in "+B" variants that model each
slot's own sampling deviation (`FilterConfig(sampling=(False, True))`), scored by MSE over the whole
stream and over three segments (the steep rise 1-240, the bend 241-1000, the flat rest). Two
even-vs-burst family choices are spliced from the same runs, which is exact in distribution because
Uniform has no state (each of its releases is the slot's counts plus fresh noise of a fixed variance):

- "Sample to 2w, then Uniform": the earlier, evaluation-only default (Sample publications at 1 and
  w+1, then Uniform from 2w+1 when they show drift, as they do on Log);
- "Sample to w, then Uniform": decide at Sample's first publication and switch at w+1, the first slot
  whose window holds no Sample spend (no second Sample publication);
- even spending from slot 1 is Uniform itself.

Usage (about 1 CPU-minute per repetition at the default size):

    .venv/bin/python benchmarks/log_gap.py --reps 3
"""

from __future__ import annotations

import argparse

import numpy as np

from pwevent.jobs.evaluation.evaluate import dataset_of, run_mechanism
from pwevent.jobs.evaluation.grid import GridSpec, Task
from pwevent.jobs.evaluation.references import oracle_release
from pwevent.jobs.evaluation.report import Interval
from pwevent.operators.postprocess import FilterConfig, KalmanSmoother, PublicRelease

BANKS = {"bank": FilterConfig(), "bank with +B variants": FilterConfig(sampling=(False, True))}


def releases(task: Task, data: list, d: int, users: int) -> dict[str, list[PublicRelease]]:
    """Every stream compared: the mechanisms as run, then the spliced family choices."""
    names = ("Uniform", "Sample", "DPBA", "Adaptive")
    runs = {name: run_mechanism(name, task, data, d, users).records for name in names}
    runs["Sample to 2w, then Uniform"] = runs["Sample"][: 2 * task.w] + runs["Uniform"][2 * task.w:]
    runs["Sample to w, then Uniform"] = runs["Sample"][: task.w] + runs["Uniform"][task.w:]
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="Log")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=10_000)
    args = parser.parse_args()
    grid = GridSpec(datasets=(args.dataset,), users=args.users, slots=args.slots, workers=1)
    segments = [(a, min(b, args.slots)) for a, b in ((0, 240), (240, 1000), (1000, args.slots)) if a < args.slots]
    mse: dict[tuple[str, str], list[float]] = {}
    parts: dict[tuple[str, str], list[list[float]]] = {}
    for rep in range(args.reps):
        task = Task(grid, args.dataset, "epsilon", 0.6, 120, None, rep)
        dataset = dataset_of(task)
        data = [(np.asarray(u), np.asarray(v, dtype=np.int8)) for u, v in dataset.slot_values()]
        truth = np.array([np.bincount(v, minlength=dataset.d) for _, v in data], dtype=float)
        oracle = oracle_release(dataset)
        streams: dict[str, np.ndarray] = {} if oracle is None else {"oracle floor": oracle}
        for name, records in releases(task, data, dataset.d, dataset.users).items():
            streams[f"{name}, raw"] = np.array([r.counts for r in records], dtype=float)
            for bank, config in BANKS.items():
                smoother = KalmanSmoother(dataset.d, config)
                streams[f"{name}, {bank}"] = np.array([smoother.step(r) for r in records])
        for key, values in streams.items():
            error = (values - truth) ** 2
            mse.setdefault((args.dataset, key), []).append(float(error.mean()))
            parts.setdefault((args.dataset, key), []).append([float(error[a:b].mean()) for a, b in segments])
        print(f"repetition {rep} done", flush=True)
    names = " | ".join(f"slots {a + 1}-{b}" for a, b in segments)
    print(f"\n| {args.dataset}, {args.reps} repetitions | MSE (95% interval) | {names} |")
    print("|---" * (len(segments) + 2) + "|")
    for key, values in mse.items():
        seg = np.mean(parts[key], axis=0)
        print(f"| {key[1]} | {Interval.of(values).render()} | " + " | ".join(f"{s:,.0f}" for s in seg) + " |")


if __name__ == "__main__":
    main()
