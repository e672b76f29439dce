"""`pwevent evaluate` on a tiny grid (jobs/evaluation/evaluate.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pwevent.jobs.cli.main import build_parser, main
from pwevent.jobs.evaluation.evaluate import (
    coverage,
    family_note,
    grid_command,
    read_csv,
    requirement_draw,
    run_grid,
    run_mechanism,
)
from pwevent.jobs.evaluation.grid import GridSpec, Task
from pwevent.jobs.evaluation.references import ORACLE, REFERENCE, ZERO
from pwevent.jobs.evaluation.report import Interval
from pwevent.jobs.evaluation.task_data import dataset_of, day_of
from pwevent.operators.family import FAMILIES

TINY = GridSpec(datasets=("Sin",), epsilons=(0.6, 1.0), windows=(40, 120), ratios=(0.5,), reps=2, users=300,
                slots=200, workers=1, w=40, epsilon=0.6)


def test_points_are_three_one_factor_sweeps_with_the_default_once():
    points = TINY.points("Sin")
    assert points == [("epsilon", 0.6, 40, None), ("epsilon", 1.0, 40, None), ("w", 0.6, 120, None),
                      ("ratio", 0.6, 40, 0.5)]
    assert len(TINY.tasks()) == 2 * len(points)


def test_without_the_default_point_only_the_listed_points_run():
    """`--no-default-point`: a grid run in parts does not repeat the default point in every part."""
    grid = replace(TINY, epsilons=(1.0,), default_point=False)
    assert grid.points("Sin") == [("epsilon", 1.0, 40, None), ("w", 0.6, 120, None), ("ratio", 0.6, 40, 0.5)]
    assert replace(grid, default_point=True).points("Sin")[1] == ("epsilon", 0.6, 40, None)
    args = build_parser().parse_args(grid_command(grid, "out").split()[1:])
    assert args.no_default_point and args.epsilons == "1.0"


def test_a_grid_without_points_an_unknown_dataset_and_a_non_number_are_refused_with_exit_2(capsys, tmp_path):
    with pytest.raises(ValueError, match="no points"):
        replace(TINY, epsilons=(), windows=(40,), ratios=(), default_point=False)
    out = str(tmp_path / "res")
    assert main(["evaluate", "--datasets", "Sin", "--epsilons", "", "--windows", "120", "--ratios", "",
                 "--no-default-point", "--out", out, "--quiet"]) == 2
    assert "the grid has no points" in capsys.readouterr().err
    assert main(["evaluate", "--datasets", "Nope", "--out", out, "--quiet"]) == 2
    assert "dataset must be one of" in capsys.readouterr().err
    for option, value, message in (("--epsilons", "0.2,x", "--epsilons: 'x' is not a number"),
                                   ("--windows", "40,1.5", "--windows: '1.5' is not an integer"),
                                   ("--ratios", "0.5,,half", "--ratios: 'half' is not a number")):
        assert main(["evaluate", option, value, "--out", out, "--quiet"]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "res").exists()


def test_first_rep_offsets_the_repetitions():

    grid = replace(TINY, first_rep=3, reps=2)
    assert {t.rep for t in grid.tasks()} == {3, 4}
    assert "--first-rep 3" in grid_command(grid, "out")
    with pytest.raises(ValueError, match="first_rep"):
        replace(TINY, first_rep=-1)


def test_grid_rows_cover_every_mechanism_raw_and_filtered():
    grid = GridSpec(datasets=("Sin",), epsilons=(0.6,), windows=(40,), ratios=(), reps=1, users=200, slots=150,
                    workers=1, w=40)
    runs = list(run_grid(grid))
    released = [r for r in runs if r.post != REFERENCE]
    assert {(r.mechanism, r.post) for r in released} == {(m, p) for m in grid.mechanisms for p in ("none", "kalman")}
    assert all(r.noise == "numpy-geometric (fast)" and np.isfinite(r.mse) for r in released)
    references = {r.mechanism: r.mse for r in runs if r.post == REFERENCE}
    assert set(references) == {ORACLE, ZERO} and 0 < references[ORACLE] < references[ZERO]


def test_a_seeded_grid_repeats_its_results_and_names_its_noise():
    """`pwevent evaluate --seed`: the same seed gives the same rows, whatever the workers; another
    seed other noise; every (task, mechanism) its own generator."""
    grid = GridSpec(datasets=("Sin",), mechanisms=("PBD", "Sample"), epsilons=(0.6,), windows=(40,), ratios=(),
                    reps=2, users=200, slots=80, workers=1, w=40, noise_seed=7)

    def scores(g: GridSpec) -> list[tuple[str, str, int, float]]:
        return sorted((r.mechanism, r.post, r.rep, r.mse) for r in run_grid(g) if r.post != REFERENCE)
    first = scores(grid)
    assert first == scores(replace(grid, workers=2))
    assert first != scores(replace(grid, noise_seed=8))
    rows = [r for r in run_grid(grid) if r.post != REFERENCE]
    assert {r.noise for r in rows} == {"numpy-geometric (seeded, not for production)"}
    task = grid.tasks()[0]
    draws = {name: task.noise(name).discrete_laplace(1.0, 8).tolist() for name in ("PBD", "Sample")}
    assert draws["PBD"] == task.noise("PBD").discrete_laplace(1.0, 8).tolist() != draws["Sample"]
    assert draws["PBD"] != grid.tasks()[1].noise("PBD").discrete_laplace(1.0, 8).tolist()
    with pytest.raises(ValueError, match="seed must be >= 0"):
        replace(grid, noise_seed=-1)


def test_the_evaluated_adaptive_is_the_deployable_one():
    """One implementation: the grid's Adaptive is the registry's policy in the shared Engine, and its
    note says which family was in force from which slot (from the releases' `family`)."""
    task = Task(replace(TINY, users=3000), "Sin", "epsilon", 0.6, 40, None, 0)  # dense enough to leave bursts
    data = list(dataset_of(task).slot_values())
    adaptive = run_mechanism("Adaptive", task, data, 2, 3000)
    assert [r.slot for r in adaptive.records] == list(range(1, 201))
    assert set(adaptive.families) <= set(FAMILIES) and adaptive.note.startswith("Sample from 1, Uniform from 2")
    assert run_mechanism("PBD", task, data, 2, 3000).note == ""
    assert family_note(["PBD", "PBD", "PBA", "PBA", "PBD"]) == "PBD from 1, PBA from 3, PBD from 5"


def test_dynamic_mechanisms_run_on_the_type_schedule():
    task = Task(GridSpec(users=100, slots=60, change_every=20, w=40), "TLNS", "epsilon", 0.6, 40, None, 0)
    data = list(dataset_of(task).slot_values())
    assert len(run_mechanism("DPBA", task, data, 2, 100).records) == 60


def test_dynamic_mechanisms_can_run_at_the_fixed_mechanisms_requirements(tmp_path):
    """`--dynamic-requirements fixed`: every user of a dynamic mechanism declares, once, the requirement
    the fixed draw gives the same user (forward; a backward that never binds), so that the lead table
    compares at equal protection, and the summary says which draw the dynamic mechanisms ran."""
    grid = replace(TINY, dynamic_draw="fixed", datasets=("Sparse-daily-200",), epsilons=(0.6,), windows=(), ratios=())
    task = grid.tasks()[0]
    draw = requirement_draw(task)
    fixed = draw.fixed(50, task.rep)
    user_type, schedule = draw.dynamic(50, 200, task.rep)
    assert list(schedule) == [1] and list(user_type) == list(range(50))
    assert [r.forward for r in schedule[1]] == fixed and {r.w for r in fixed} <= {7, 14, 30}
    assert {(r.backward.w, r.backward.epsilon) for r in schedule[1]} == {(1, 10.0)}
    types = requirement_draw(replace(task, grid=TINY)).dynamic(50, 200, task.rep)[1][1]
    assert [r.forward for r in types] != fixed[:len(types)]  # the paper's types redraw their own

    args = build_parser().parse_args(grid_command(grid, "out").split()[1:])
    assert args.dynamic_requirements == "fixed"
    with pytest.raises(ValueError, match="dynamic requirements must be one of types, fixed"):
        replace(TINY, dynamic_draw="loose")
    out = tmp_path / "res"
    assert main(["evaluate", "--datasets", "Sin", "--mechanisms", "DPBA,Adaptive", "--epsilons", "0.6",
                 "--windows", "", "--ratios", "", "--reps", "1", "--users", "100", "--slots", "50", "--workers", "1",
                 "--dynamic-requirements", "fixed", "--seed", "1", "--out", str(out), "--quiet"]) == 0
    summary = (out / "summary.md").read_text()
    assert "--dynamic-requirements fixed" in summary
    assert "every user declares its fixed draw once" in summary
    assert "the dynamic mechanisms' users declare the fixed draw's requirements" in summary


def test_interval_uses_the_t_quantile():
    iv = Interval.of([1.0, 2.0, 3.0])
    assert iv.mean == 2.0 and iv.half == pytest.approx(4.303 * 1.0 / np.sqrt(3))


def test_cli_writes_csv_summary_and_plots_and_replots(tmp_path):
    out = tmp_path / "res"
    argv = ["evaluate", "--datasets", "Sin", "--mechanisms", "PBD,BD,Uniform,Adaptive", "--epsilons", "0.6,1.0",
            "--windows", "40", "--ratios", "0.5", "--reps", "2", "--users", "200", "--slots", "120",
            "--workers", "2", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    runs = read_csv(out / "runs.csv")
    # reps x points (E 0.6, E 1.0, w 40, o 0.5) x (mechanisms x posts + the two references)
    assert len(runs) == 2 * 4 * (4 * 2 + 2)
    summary = (out / "summary.md").read_text()
    assert summary.index("against every mechanism") < summary.index("PBD/BD")
    assert "numpy-geometric (fast)" in summary and "pwevent evaluate --datasets Sin" in summary
    assert (out / "sin_mse_vs_epsilon.png").stat().st_size > 1000
    assert main(argv + ["--replot"]) == 0
    before = (out / "runs.csv").read_bytes()
    assert main(argv) == 2  # a folder holding results is never overwritten by accident
    assert (out / "runs.csv").read_bytes() == before


def test_the_default_output_folder_is_new_and_local():
    """Not docs/results relative to wherever it runs (the committed results of a checkout)."""
    args = build_parser().parse_args(["evaluate"])
    assert args.out == "pwevent-results" and not args.overwrite


def test_command_round_trips_through_the_parser():
    command = grid_command(TINY, "docs/results")
    args = build_parser().parse_args(command.split()[1:])
    assert args.reps == 2 and args.windows == "40,120" and args.out == "docs/results"


def test_a_griefer_dataset_adds_one_user_at_the_floor_that_baselines_refuse():
    """`X+griefer` is X with one more registered user at the budget floor: the personalized mechanisms
    count it in their population, a baseline does not register it (its global (w, E) cannot cover it)."""
    grid = GridSpec(datasets=("Sin", "Sin+griefer"), epsilons=(0.6,), windows=(40,), ratios=(), reps=1, users=50,
                    slots=30, workers=1, w=40, mechanisms=("PBD", "DPBA", "Uniform", "Adaptive"))
    plain, griefer = grid.tasks()
    assert griefer.dataset == "Sin+griefer" and dataset_of(griefer).users == dataset_of(plain).users
    data = [(np.asarray(u), np.asarray(v)) for u, v in dataset_of(plain).slot_values()]
    for name, extra in (("PBD", 1), ("DPBA", 1), ("Adaptive", 1), ("Uniform", 0)):
        with_griefer = run_mechanism(name, griefer, data, 2, 50).records[0].population
        assert with_griefer == run_mechanism(name, plain, data, 2, 50).records[0].population + extra, name
    with pytest.raises(ValueError, match="dataset must be one of"):
        GridSpec(datasets=("Sin+other",))


def test_kalman_rows_report_the_coverage_of_their_intervals(tmp_path):
    grid = GridSpec(datasets=("Sin",), epsilons=(0.6,), windows=(40,), ratios=(), reps=1, users=200, slots=100,
                    workers=1, w=40, mechanisms=("PBD",))
    runs = [r for r in run_grid(grid) if r.post != REFERENCE]
    assert {r.post: r.coverage is None for r in runs} == {"none": True, "kalman": False}
    assert {r.post: r.coverage_occupied is None for r in runs} == {"none": True, "kalman": False}
    assert all(0.0 <= r.coverage <= 1.0 for r in runs if r.coverage is not None)
    from pwevent.jobs.evaluation.evaluate import write_csv

    path = tmp_path / "runs.csv"
    write_csv(runs, path)
    assert read_csv(path) == runs
    older = tmp_path / "older.csv"  # a runs.csv written before the coverage columns existed
    lines = path.read_text().splitlines()
    older.write_text("\n".join(line.rsplit(",", 2)[0] for line in lines) + "\n")
    assert [(r.coverage, r.coverage_occupied) for r in read_csv(older)] == [(None, None)] * len(runs)


def test_coverage_over_all_cells_and_over_the_occupied_ones():
    """Three slots of two cells; the intervals hold the true 0s and two of the three true counts
    above 0: 5 of 6 pairs covered, 2 of 3 occupied ones. With no occupied pair the second share is
    None (the interval [2, 4] misses its true 0)."""
    truth = np.array([[0.0, 2.0], [0.0, 3.0], [0.0, 1.0]])
    intervals = np.array([[[0, 1], [0, 1]], [[0, 1], [2, 4]], [[0, 1], [0, 1]]], dtype=float)
    assert coverage(intervals, truth) == (5 / 6, 2 / 3)
    assert coverage(intervals, np.zeros_like(truth)) == (5 / 6, None)


def test_a_statistic_at_half_share_is_a_job_at_half_the_budget():
    """What `--statistics` compares, exactly: an engine at share 0.5 of each requirement and one whose
    users declare half their budgets draw the same releases from the same noise (docs/evaluation.md,
    "Several statistics under one budget")."""
    from pwevent.jobs.common.engine import Engine
    from pwevent.jobs.common.synthetic import RequirementDraw
    from pwevent.operators.noise import NumpyRandomness
    from pwevent.operators.registry import mechanism

    task = Task(TINY, "Sin", "epsilon", 0.6, 40, None, 0)
    data = [(np.asarray(u), np.asarray(v)) for u, v in dataset_of(task).slot_values()]
    requirements = RequirementDraw(0.6, 40, None, 10, 500).fixed(300, 0)
    for name in ("PBD", "PBA", "Adaptive", "BD"):
        arms = []
        for share, factor in ((0.5, 1.0), (1.0, 0.5)):
            engine = Engine(mechanism(name, 40, 0.6 * factor), 2, NumpyRandomness(7), 40, share=share)
            for user, requirement in enumerate(requirements):
                engine.register(user, requirement.scaled(factor), 1)
            arms.append([engine.step(t, users, values)[0] for t, (users, values) in enumerate(data, 1)])
        shared, separate = arms
        assert [(o.kind, o.counts.tolist(), o.threshold) for o in shared] == \
            [(o.kind, o.counts.tolist(), o.threshold) for o in separate], name


def test_two_statistics_against_two_jobs_at_half_the_budget(tmp_path, capsys):
    from pwevent.jobs.evaluation.budget_split import run_split_task

    grid = replace(TINY, mechanisms=("PBD", "DPBD", "BA"), reps=1, slots=60, users=80, noise_seed=3)
    rows = run_split_task((Task(grid, "Sin", "epsilon", 0.6, 40, None, 0), ("Sin", "Log")))
    assert {(r.statistic, r.mechanism, r.arm, r.post) for r in rows} == {
        (s, m, a, p) for s in ("Sin", "Log") for m in grid.mechanisms for a in ("shared", "separate")
        for p in ("none", "kalman")}
    assert all(np.isfinite(r.mse) and r.mse >= 0 for r in rows)
    assert main(["evaluate", "--statistics", "Sin,Log", "--users", "60", "--slots", "40", "--reps", "1",
                 "--epsilons", "0.6", "--windows", "40", "--ratios", "", "--mechanisms", "PBD", "--workers", "1",
                 "--seed", "1", "--out", str(tmp_path)]) == 0
    summary = (tmp_path / "statistics.md").read_text()
    assert "| epsilon | 0.6 | 120 |  | Sin | PBD | none |" in summary
    assert main(["evaluate", "--statistics", "Sin,Foursquare", "--out", str(tmp_path / "x")]) == 2
    assert "--statistics: two different synthetic streams" in capsys.readouterr().err


@pytest.mark.parametrize(("dataset", "slot_minutes", "day"), [
    ("Sparse-hourly-336", 60, 24), ("Sparse-hourly-720+griefer", 60, 24), ("Sparse-daily-200", 60, 1),
    ("Foursquare", 60, 24), ("Foursquare", 15, 96), ("Foursquare", 1440, 1), ("Foursquare", 100, 1), ("TLNS", 60, 1),
])
def test_each_dataset_runs_adaptive_with_the_slots_in_its_day(dataset, slot_minutes, day):
    """The evaluator gives Adaptive the day of the data's clock (its bursts' quarter-day offset, docs/
    mechanisms.md section 14), as the job takes it from `slot`: hourly data 24 slots, Foursquare at its
    slot length, the daily workloads and the synthetic streams (no clock) 1."""
    task = Task(replace(TINY, real_slot_minutes=slot_minutes), dataset, "epsilon", 0.6, 40, None, 0)
    assert day_of(task) == day
