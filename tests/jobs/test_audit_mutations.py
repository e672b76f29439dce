"""Tampered spend logs, releases and inputs fail the full audit with the expected rule.

Genuine runs come from the replay (30 users, 60 slots, seeded noise under `noise: numpy-fast`, the
configuration a test run declares, users joining late and, under
the dynamic mechanisms, changing their requirements so that ledgers fork) for every mechanism; each
passes the full audit. Every mutation below then changes one thing and must be caught.
"""

from __future__ import annotations

import copy
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest

from pwevent.jobs.common.config import Config, parse_config
from pwevent.jobs.common.population_operator import PopulationOperator
from pwevent.jobs.offline.audit import AuditInputs, AuditReport, audit_records
from pwevent.jobs.offline.replay import run_replay
from pwevent.operators.noise import NumpyRandomness, discrete_laplace_variance
from pwevent.operators.postprocess import PublicRelease
from pwevent.operators.registry import REGISTRY

USERS, SLOTS = 30, 60
DYNAMIC = tuple(e.name for e in REGISTRY if e.dynamic)
FIXED_LEVELS = [(4, 1.0), (6, 2.0), (8, 3.0)]
DYNAMIC_LEVELS = [((1, 3.0), (6, 2.0)), ((3, 1.5), (4, 2.5)), ((2, 0.8), (8, 3.0))]

Record = dict[str, Any]


@dataclass(frozen=True)
class Run:
    """One replay's spend log, releases and requirement input lines."""

    config: Config
    log: tuple[Record, ...]
    releases: tuple[Record, ...]
    requirements: tuple[str, ...]

    def audit(self) -> AuditReport:
        lines = [(f"requirements:{n}", text) for n, text in enumerate(self.requirements, 1)]
        return audit_records(self.log, AuditInputs.build(lines, self.releases, self.config))

    def spends(self) -> list[Record]:
        return [r for r in self.log if r["record"] == "spend"]


def inputs(dynamic: bool, seed: int = 11) -> tuple[list[Record], list[Record]]:
    """Requirements and events: half the users register at slot 1, half later; dynamic users change."""
    rng = np.random.default_rng(seed)
    requirements, events = [], []
    for u in range(USERS):
        join = 1 if u < USERS // 2 else int(rng.integers(2, SLOTS // 2))
        if dynamic:
            slot, level = join, u % 3
            while slot <= SLOTS:
                (bw, be), (fw, fe) = DYNAMIC_LEVELS[level]
                requirements.append({"user": f"u{u}", "time": (slot - 1) * 1000 + 5,
                                     "backward": {"w": bw, "epsilon": be}, "forward": {"w": fw, "epsilon": fe}})
                slot += int(rng.integers(8, 25))
                level = (level + 1) % 3 if u % 2 else level
        else:
            w, epsilon = FIXED_LEVELS[u % 3]
            if u == USERS - 1:  # a requirement nobody declared before: its root ledger starts late
                (w, epsilon), join = (5, 2.5), SLOTS // 4
            requirements.append({"user": f"u{u}", "time": (join - 1) * 1000 + 5, "w": w, "epsilon": epsilon})
        for slot in range(join, SLOTS + 1):
            if rng.random() < 0.8:
                value = int(rng.random() < (0.3 if slot <= SLOTS // 2 else 0.7))
                events.append({"user": f"u{u}", "time": (slot - 1) * 1000 + 500, "value": value})
    requirements.sort(key=lambda r: r["time"])
    return requirements, events


def replayed(tmp_path_factory: pytest.TempPathFactory, settings: dict[str, Any]) -> dict[str, Run]:
    """One replay per mechanism of `inputs`, under `settings` (the domain and the post-processing)."""
    runs = {}
    for name in REGISTRY.names():
        folder = tmp_path_factory.mktemp(name)
        entry = REGISTRY.get(name)
        quick = {"evidence": 4, "static_drift": 100.0, "level_margin": 0.0}  # Adaptive: switches within a few slots
        switching = {entry.section: quick} if entry.section else {}
        config = parse_config({"mechanism": name, "slot": "1s", "origin": 0, **settings,
                               **entry.global_keys(8, 1.0), **switching, "caps": {"max_w": 20},
                               "noise": "numpy-fast"})
        requirements, events = inputs(name in DYNAMIC)
        texts = [json.dumps(r) for r in requirements]
        (folder / "req.jsonl").write_text("".join(t + "\n" for t in texts))
        (folder / "ev.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        run_replay(config, str(folder / "ev.jsonl"), str(folder / "req.jsonl"), str(folder / "rel.jsonl"),
                   str(folder / "spend.jsonl"), seed=3)
        log, releases = ([json.loads(line) for line in (folder / f).read_text().splitlines()]
                         for f in ("spend.jsonl", "rel.jsonl"))
        runs[name] = Run(config, tuple(log), tuple(releases), tuple(texts))
    return runs


@pytest.fixture(scope="module")
def genuine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    return replayed(tmp_path_factory, {"domain": {"type": "binary"}, "postprocess": "none"})


@pytest.fixture(scope="module")
def smoothed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Runs with the post-processing on four cells (two of them always empty), so that pooling applies."""
    return replayed(tmp_path_factory, {"domain": {"type": "cells", "d": 4}, "postprocess": "kalman"})


@pytest.mark.parametrize("name", REGISTRY.names())
def test_genuine_runs_pass_the_full_audit(genuine: dict[str, Run], name: str) -> None:
    run = genuine[name]
    report = run.audit()
    assert report.ok, report.render()
    assert report.users == USERS and report.skipped is None
    if name in DYNAMIC:
        assert any(r["record"] == "ledger" and r["parent"] is not None for r in run.log), "no fork to tamper with"
    assert any(r["record"] == "member" and r["since"] > 1 for r in run.log), "no late registration"


# ------------------------------------------------------------------------------------ mutations


def _log(run: Run, log: list[Record]) -> Run:
    return replace(run, log=tuple(log))


def _late_ledgers(run: Run) -> dict[str, int]:
    """Ledgers created after slot 1, by id (a baseline has one ledger, at slot 1: nothing to tamper)."""
    late = {r["ledger"]: r["since"] for r in run.log if r["record"] == "ledger" and r["since"] > 1}
    if not late:
        pytest.skip("a single ledger created at slot 1 (a baseline): no later ledger to tamper with")
    return late


def _busiest(run: Run) -> str:
    """The ledger with the most spend lines."""
    return Counter(r["ledger"] for r in run.spends()).most_common(1)[0][0]


def _index(run: Run, test: Callable[[Record], bool]) -> int:
    return next(i for i, r in enumerate(run.log) if test(r))


def _edit(run: Run, test: Callable[[Record], bool], change: Callable[[Record], None]) -> Run:
    """A copy of the run with `change` applied to the first log record that passes `test`."""
    log = copy.deepcopy(list(run.log))
    change(log[_index(run, test)])
    return _log(run, log)


def _middle_line(run: Run) -> Callable[[Record], bool]:
    ledger = _busiest(run)
    slots = sorted(r["slot"] for r in run.spends() if r["ledger"] == ledger)
    slot = slots[len(slots) // 2]
    return lambda r: r["record"] == "spend" and r["ledger"] == ledger and r["slot"] == slot


def _publish_line(r: Record) -> bool:
    return r["record"] == "spend" and r["kind"] == "publish" and r["spend2"] > 0


def _loosen(requirement: Record) -> None:
    part = requirement["backward"] if "backward" in requirement else requirement
    part["epsilon"] *= 10


def drop_spend_line(run: Run) -> Run:
    log = list(run.log)
    del log[_index(run, _middle_line(run))]
    return _log(run, log)


def gap_in_ledger(run: Run) -> Run:
    ledger = _busiest(run)
    return _log(run, [r for r in run.log if not (r["record"] == "spend" and r["ledger"] == ledger
                                                   and 20 <= r["slot"] <= 22)])


def publish_relabelled_skip(run: Run) -> Run:
    return _edit(run, _publish_line, lambda r: r.update(kind="skip"))


def inflate_spend(run: Run) -> Run:
    return _edit(run, _publish_line, lambda r: r.update(spend2=r["spend2"] + 5.0))


def negative_spend(run: Run) -> Run:
    return _edit(run, _middle_line(run), lambda r: r.update(spend1=-0.1))


def nan_spend(run: Run) -> Run:
    return _edit(run, _middle_line(run), lambda r: r.update(spend2=math.nan))


def duplicate_spend_line(run: Run) -> Run:
    log = list(run.log)
    i = _index(run, _middle_line(run))
    return _log(run, log[: i + 1] + [dict(log[i])] + log[i + 1:])


def spend_after_last_release(run: Run) -> Run:
    last = max(r["slot"] for r in run.spends())
    line = next(r for r in run.spends() if r["slot"] == last)
    return _log(run, [*run.log, {**line, "slot": last + 1}])


def members_count_changed(run: Run) -> Run:
    return _edit(run, _middle_line(run), lambda r: r.update(members=r["members"] + 1))


def loosen_ledger_line(run: Run) -> Run:
    return _edit(run, lambda r: r["record"] == "ledger", lambda r: _loosen(r["requirement"]))


def loosen_spend_line(run: Run) -> Run:
    return _edit(run, _middle_line(run), lambda r: _loosen(r["requirement"]))


def widen_window(run: Run) -> Run:
    """One ledger claims a longer (backward) window in its ledger line and all its spend lines."""
    ledger = _busiest(run)
    log = copy.deepcopy(list(run.log))
    for r in log:
        if r["record"] in ("ledger", "spend") and r["ledger"] == ledger:
            part = r["requirement"]["backward"] if "backward" in r["requirement"] else r["requirement"]
            part["w"] += 5
    return _log(run, log)


def drop_member_lines(run: Run) -> Run:
    user = next(r["user"] for r in run.log if r["record"] == "member")
    return _log(run, [r for r in run.log if not (r["record"] == "member" and r["user"] == user)])


def repoint_user(run: Run) -> Run:
    """A member line names another ledger (registrations share the root ledger of their requirement, so
    it has another requirement; either way the member counts no longer add up)."""
    ledgers = {r["ledger"]: r for r in run.log if r["record"] == "ledger"}
    log = copy.deepcopy(list(run.log))
    for member in (r for r in log if r["record"] == "member"):
        own = ledgers[member["ledger"]]
        twins = [name for name, rec in ledgers.items() if name != own["ledger"] and rec["since"] <= member["since"]]
        if twins:
            member["ledger"] = twins[0]
            return _log(run, log)
    pytest.skip("a single ledger (a baseline): no other ledger to point a user at")


def shared_ledger(run: Run) -> Run:
    """Every member of a ledger is moved into a ledger (a fork, where there is one) of another
    requirement, the victim's own lines dropped and the target's member counts raised by as many."""
    ledgers = {r["ledger"]: r for r in run.log if r["record"] == "ledger"}
    members = [r for r in run.log if r["record"] == "member"]
    forks = [ledgers[m["ledger"]] for m in members if ledgers[m["ledger"]]["parent"] is not None]
    target = forks[0] if forks else next(ledgers[m["ledger"]] for m in members if m["since"] == 1)
    victims = [ledgers[m["ledger"]] for m in members
               if m["since"] == 1 and ledgers[m["ledger"]]["requirement"] != target["requirement"]]
    if not victims:
        pytest.skip("a baseline runs every ledger at one requirement: sharing a ledger is no tampering")
    victim = victims[0]
    moved = sum(1 for m in members if m["ledger"] == victim["ledger"])
    log = []
    for r in copy.deepcopy(list(run.log)):
        if r.get("ledger") == victim["ledger"] and r["record"] != "member":
            continue
        if r["record"] == "member" and r["ledger"] == victim["ledger"]:
            r["ledger"] = target["ledger"]
        if r["record"] == "spend" and r["ledger"] == target["ledger"]:
            r["members"] += moved
        log.append(r)
    return _log(run, log)


def fork_parent_missing(run: Run) -> Run:
    """A fork names a parent that is not in the log (under a fixed mechanism, with no fork, a root does)."""
    forks = [r["ledger"] for r in run.log if r["record"] == "ledger" and r["parent"] is not None]
    chosen = forks[0] if forks else _busiest(run)
    return _edit(run, lambda r: r["record"] == "ledger" and r["ledger"] == chosen,
                 lambda r: r.update(parent="no-such-ledger"))


def drop_fork_member_line(run: Run) -> Run:
    """A user's move into a fork is dropped: the log keeps it in the old class after its change."""
    forks = {r["ledger"] for r in run.log if r["record"] == "ledger" and r["parent"] is not None}
    if not forks:
        pytest.skip("a fixed mechanism never forks")
    return _log(run, [r for r in run.log if not (r["record"] == "member" and r["ledger"] in forks)])


def drop_ledger_line(run: Run) -> Run:
    ledger = _busiest(run)
    return _log(run, [r for r in run.log if not (r["record"] == "ledger" and r["ledger"] == ledger)])


def member_moved_earlier(run: Run) -> Run:
    return _edit(run, lambda r: r["record"] == "member" and r["since"] > 1, lambda r: r.update(since=r["since"] - 1))


def member_before_ledger_since(run: Run) -> Run:
    """A member line of a ledger created after slot 1 starts one slot before that ledger."""
    late = _late_ledgers(run)
    return _edit(run, lambda r: r["record"] == "member" and r["ledger"] in late,
                 lambda r: r.update(since=late[r["ledger"]] - 1))


def line_before_since(run: Run) -> Run:
    """A ledger created after slot 1 gets a line of its own before its since."""
    ledger, since = next(iter(_late_ledgers(run).items()))
    line = next(r for r in run.spends() if r["ledger"] == ledger)
    return _log(run, [*run.log, {**line, "slot": since - 1}])


def unknown_kind(run: Run) -> Run:
    return _edit(run, _middle_line(run), lambda r: r.update(kind="maybe"))


def second_ledger_line(run: Run) -> Run:
    """A second ledger line for an existing id, with another since."""
    first = next(r for r in run.log if r["record"] == "ledger")
    return _log(run, [*run.log, {**first, "since": first["since"] + 1}])


def fork_before_parent(run: Run) -> Run:
    """A ledger of slot 1 claims to be forked from a ledger created later."""
    late = next(iter(_late_ledgers(run)))
    return _edit(run, lambda r: r["record"] == "ledger" and r["since"] == 1, lambda r: r.update(parent=late))


def release_kind_unknown(run: Run) -> Run:
    return replace(run, releases=({**run.releases[0], "kind": "oops"}, *run.releases[1:]))


def intruder_member(run: Run) -> Run:
    ledger = _busiest(run)
    return _log(run, [*run.log, {"record": "member", "user": "intruder", "ledger": ledger, "since": 1}])


def release_kind_changed(run: Run) -> Run:
    releases = [dict(r) for r in run.releases]
    next(r for r in releases if r["kind"] == "publish")["kind"] = "skip"
    return replace(run, releases=tuple(releases))


def release_dropped(run: Run) -> Run:
    return replace(run, releases=run.releases[:10] + run.releases[11:])


def release_duplicated(run: Run) -> Run:
    return replace(run, releases=run.releases + run.releases[-1:])


def publish_relabelled_nullify(run: Run) -> Run:
    """A publishing slot becomes a nullified one, in its release and in every line."""
    slot = next(r["slot"] for r in run.spends() if _publish_line(r))
    releases = tuple({**r, "kind": "nullify"} if r["slot"] == slot else r for r in run.releases)
    log = [{**r, "kind": "nullify"} if r["record"] == "spend" and r["slot"] == slot else r for r in run.log]
    return replace(run, log=tuple(log), releases=releases)


def calculation_without_dissimilarity(run: Run) -> Run:
    """Calculation spend on a slot whose release ran no dissimilarity."""
    with_spend1 = [r for r in run.spends() if r["spend1"] > 0]
    if with_spend1:
        slot = with_spend1[0]["slot"]
        return replace(run, releases=tuple({**r, "dissimilarity": None} if r["slot"] == slot else r
                                           for r in run.releases))
    return _edit(run, _middle_line(run), lambda r: r.update(spend1=0.01))


def input_requirement_tightened(run: Run) -> Run:
    """The requirements input, not the log, changes: the log no longer runs the user at it."""
    first = json.loads(run.requirements[0])
    part = first["backward"] if "backward" in first else first
    part["epsilon"] /= 2
    return replace(run, requirements=(json.dumps(first), *run.requirements[1:]))


def _releases(run: Run, slot: int, change: Callable[[Record], None]) -> Run:
    """A copy of the run with `change` applied to the release of `slot`."""
    releases = copy.deepcopy(list(run.releases))
    change(next(r for r in releases if r["slot"] == slot))
    return replace(run, releases=tuple(releases))


def _fresh_publication(run: Run) -> int:
    """A publishing slot whose counts differ from the previous release's (zeros before slot 1)."""
    before: list[int] = [0, 0]
    for release in run.releases:
        if release["kind"] == "publish" and release["counts"] != before:
            return int(release["slot"])
        before = release["counts"]
    raise AssertionError("no publication with fresh counts")


def publication_passed_off_as_skip(run: Run) -> Run:
    """A publication relabelled as a skip in its release and in every spend line (spend2 set to 0): the
    log is consistent, but the release carries a fresh histogram nobody paid for."""
    slot = _fresh_publication(run)
    log = [{**r, "kind": "skip", "spend2": 0.0} if r["record"] == "spend" and r["slot"] == slot else r
           for r in run.log]
    return _releases(replace(run, log=tuple(log)), slot, lambda r: r.update(kind="skip"))


def skip_counts_changed(run: Run) -> Run:
    """A skip (or nullify) release whose counts were raised: a fresh histogram in a repeat."""
    repeat = next((r["slot"] for r in run.releases if r["kind"] in ("skip", "nullify")), None)
    if repeat is None:
        pytest.skip("every slot of this run publishes: no repeat to tamper with")
    return _releases(run, repeat, lambda r: r.update(counts=[c + 1000 for c in r["counts"]]))


def epsilon_publication_doubled(run: Run) -> Run:
    return _releases(run, _fresh_publication(run), lambda r: r.update(epsilon_publication=2 * r["epsilon_publication"]))


def even_release_at_the_lowest_budget(run: Run) -> Run:
    """An Adaptive even release relabelled as made at the slot's lowest positive budget, with that
    budget's noise variance as its threshold (the rule before the rescaled OBS, docs/mechanisms.md
    section 14): no longer the threshold the rescaled OBS picks."""
    if run.config.mechanism != "Adaptive":
        pytest.skip("only Adaptive's even spending publishes a rescaled release")
    for release in run.releases:
        if release["kind"] != "publish" or release.get("family") != "Uniform":
            continue
        lowest = min(r["spend2"] for r in run.spends() if r["slot"] == release["slot"] and r["spend2"] > 0)
        if lowest != release["epsilon_publication"]:
            root = math.sqrt(float(discrete_laplace_variance(lowest)))
            changed = {"epsilon_publication": lowest, "threshold": root}
            return _releases(run, release["slot"], lambda r, changed=changed: r.update(changed))
    raise AssertionError("no even release above the lowest budget")


def threshold_halved(run: Run) -> Run:
    return _releases(run, _fresh_publication(run), lambda r: r.update(threshold=r["threshold"] / 2))


def kept_share_changed(run: Run) -> Run:
    """A publication's kept_share tampered with: a rescaled one's lowered by 10%, another's (null) set
    to 0.5. The smoothed counts use it (operators/postprocess.py), so the auditor derives it."""
    def change(r: Record) -> None:
        r["kept_share"] = 0.5 if r["kept_share"] is None else 0.9 * r["kept_share"]
    return _releases(run, _fresh_publication(run), change)


def epsilon_calculation_doubled(run: Run) -> Run:
    slot = next((r["slot"] for r in run.releases if r["dissimilarity"] is not None), None)
    if slot is None:
        pytest.skip("a scheduled mechanism runs no dissimilarity")
    return _releases(run, slot, lambda r: r.update(epsilon_calculation=2 * r["epsilon_calculation"]))


def skip_that_cleared_its_threshold(run: Run) -> Run:
    """A skip whose dissimilarity is raised above its threshold: the decision no longer follows."""
    slot = next((r["slot"] for r in run.releases if r["kind"] == "skip" and r["threshold"] is not None
                 and r["dissimilarity"] is not None), None)
    if slot is None:
        pytest.skip("no skip decided by a dissimilarity")
    return _releases(run, slot, lambda r: r.update(dissimilarity=r["threshold"] + 1.0))


def noise_label_changed(run: Run) -> Run:
    """One release claims the production source (the run's others name the seeded one)."""
    return _releases(run, run.releases[5]["slot"], lambda r: r.update(noise="opendp-discrete-laplace"))


def seeded_run_audited_as_production(run: Run) -> Run:
    """The seeded run's releases and spend lines, audited under `noise: opendp`: test randomness."""
    return replace(run, config=run.config.model_copy(update={"noise": "opendp"}))


def spend_line_label_changed(run: Run) -> Run:
    """One spend line claims the production source; its release names the seeded one."""
    return _edit(run, _middle_line(run), lambda r: r.update(noise="opendp-discrete-laplace"))


def spend_line_label_dropped(run: Run) -> Run:
    return _edit(run, _middle_line(run), lambda r: r.pop("noise"))


def population_changed(run: Run) -> Run:
    return _releases(run, run.releases[-1]["slot"], lambda r: r.update(population=r["population"] + 1))


def mechanism_relabelled(run: Run) -> Run:
    other = "PBD" if run.config.mechanism != "PBD" else "PBA"
    return _releases(run, run.releases[0]["slot"], lambda r: r.update(mechanism=other))


def domain_relabelled(run: Run) -> Run:
    return _releases(run, run.releases[1]["slot"], lambda r: r.update(domain={"type": "cells", "d": 2}))


def _decided_skip(run: Run) -> int:
    """A skip decided by a dissimilarity against a threshold."""
    slot = next((r["slot"] for r in run.releases if r["kind"] == "skip" and r["threshold"] is not None
                 and r["dissimilarity"] is not None), None)
    if slot is None:
        pytest.skip("no skip decided by a dissimilarity")
    return int(slot)


def skip_threshold_nulled(run: Run) -> Run:
    """A skip's threshold set to null (its dissimilarity and epsilon_publication stay): the decision can
    no longer be checked."""
    return _releases(run, _decided_skip(run), lambda r: r.update(threshold=None))


def skip_threshold_below_its_noise(run: Run) -> Run:
    """A skip's threshold lowered below the noise's own standard deviation at its epsilon_publication,
    and its dissimilarity below that, so that the decision still follows."""
    def change(r: Record) -> None:
        r["threshold"] = 0.5 * math.sqrt(float(discrete_laplace_variance(r["epsilon_publication"])))
        r["dissimilarity"] = min(r["dissimilarity"], r["threshold"] / 2)
    return _releases(run, _decided_skip(run), change)


def schema_version_dropped(run: Run) -> Run:
    return _releases(run, run.releases[7]["slot"], lambda r: r.pop("schema_version"))


def schema_version_downgraded(run: Run) -> Run:
    """One release claims version 2, which has no kept_share to check."""
    return _releases(run, run.releases[7]["slot"], lambda r: r.update(schema_version=2))


def run_relabelled_version_2(run: Run) -> Run:
    """Every release claims version 2 (one version for the run), with its kept_share still there."""
    return replace(run, releases=tuple({**r, "schema_version": 2} for r in run.releases))


def _first_half_as(run: Run, version: int) -> Run:
    """The releases before the middle slot labelled `version` (as a job upgraded there would write them)."""
    cut = run.releases[len(run.releases) // 2]["slot"]
    return replace(run, releases=tuple({**r, "schema_version": version} if r["slot"] < cut else r
                                       for r in run.releases))


def rescaled_run_relabelled_version_3(run: Run) -> Run:
    """Adaptive's run labelled version 3 as a whole: its rescaled thresholds, the mean cell's error,
    are then read as the population's (version 3) and no longer OBS's error (section 14)."""
    if run.config.mechanism != "Adaptive":
        pytest.skip("only Adaptive's even spending publishes a rescaled release")
    return replace(run, releases=tuple({**r, "schema_version": 3} for r in run.releases))


def version_back_after_an_upgrade(run: Run) -> Run:
    """A run upgraded from version 3 to 4 in the middle, with a later release of version 3 again."""
    upgraded = _first_half_as(run, 3)
    return _releases(upgraded, upgraded.releases[-5]["slot"], lambda r: r.update(schema_version=3))


def run_without_versions(run: Run) -> Run:
    """No release carries a version (version 1, which had no domain), each with its domain still there."""
    return replace(run, releases=tuple({k: v for k, v in r.items() if k != "schema_version"} for r in run.releases))


def smoothed_without_post_processing(run: Run) -> Run:
    """A run under `postprocess: none` with a smoothed histogram in one release."""
    return _releases(run, run.releases[3]["slot"], lambda r: r.update(smoothed=[float(c) for c in r["counts"]]))


def interval_without_post_processing(run: Run) -> Run:
    return _releases(run, run.releases[3]["slot"], lambda r: r.update(interval=[[0.0, 1.0] for _ in r["counts"]]))


def _middle_view(run: Run) -> Record:
    """A utilisation record in the middle of the run with a bucket above 0."""
    views = [r for r in run.log if r["record"] == "utilisation" and any(r["ppm"].values())]
    return views[len(views) // 2]


def _view_edit(run: Run, change: Callable[[Record], None]) -> Run:
    slot = _middle_view(run)["slot"]
    return _edit(run, lambda r: r["record"] == "utilisation" and r["slot"] == slot, change)


def utilisation_one_ppm_up(run: Run) -> Run:
    """The smallest change a utilisation record can show: one bucket one millionth more."""
    bucket = next(b for b, v in _middle_view(run)["ppm"].items() if v)
    return _view_edit(run, lambda r: r["ppm"].update({bucket: r["ppm"][bucket] + 1}))


def utilisation_empty_bucket_filled(run: Run) -> Run:
    """A bucket without any class said to be in use."""
    bucket = next(b for b, v in _middle_view(run)["ppm"].items() if not v)
    return _view_edit(run, lambda r: r["ppm"].update({bucket: 1}))


def utilisation_bucket_dropped(run: Run) -> Run:
    bucket = next(b for b, v in _middle_view(run)["ppm"].items() if v)
    return _view_edit(run, lambda r: r["ppm"].pop(bucket))


def utilisation_as_a_fraction(run: Run) -> Run:
    """The share itself instead of millionths."""
    bucket = next(b for b, v in _middle_view(run)["ppm"].items() if v)
    return _view_edit(run, lambda r: r["ppm"].update({bucket: r["ppm"][bucket] / 1e6}))


def utilisation_duplicated(run: Run) -> Run:
    log = list(run.log)
    at = _index(run, lambda r: r is _middle_view(run))
    log.insert(at + 1, copy.deepcopy(log[at]))
    return _log(run, log)


def utilisation_dropped(run: Run) -> Run:
    slot = _middle_view(run)["slot"]
    return _log(run, [r for r in run.log if not (r["record"] == "utilisation" and r["slot"] == slot)])


def utilisation_after_last_release(run: Run) -> Run:
    last = max(r["slot"] for r in run.releases)
    view = next(r for r in run.log if r["record"] == "utilisation" and r["slot"] == last)
    return _log(run, [*run.log, {**copy.deepcopy(view), "slot": last + 1}])


def _by_family(personalized: str, baseline: str) -> Callable[[str], str]:
    return lambda name: personalized if REGISTRY.get(name).personalized else baseline


def _window(name: str) -> str:
    return "user_forward_window" if name in DYNAMIC else "user_fixed_window"


#: name -> (tampering, the rule the audit must report: by name, or by mechanism).
MUTATIONS: dict[str, tuple[Callable[[Run], Run], str | Callable[[str], str]]] = {
    "drop_spend_line": (drop_spend_line, "gap"),
    "gap_in_ledger": (gap_in_ledger, "gap"),
    "publish_relabelled_skip": (publish_relabelled_skip, "kind_mismatch"),
    "inflate_spend": (inflate_spend, _window),
    "negative_spend": (negative_spend, "bad_spend"),
    "nan_spend": (nan_spend, "bad_spend"),
    "duplicate_spend_line": (duplicate_spend_line, "duplicate_line"),
    "spend_after_last_release": (spend_after_last_release, "no_release"),
    "members_count_changed": (members_count_changed, "members_mismatch"),
    "loosen_ledger_line": (loosen_ledger_line, "requirement_mismatch"),
    "loosen_spend_line": (loosen_spend_line, "requirement_mismatch"),
    "widen_window": (widen_window, "requirement_mismatch"),
    "drop_member_lines": (drop_member_lines, "missing_member"),
    "repoint_user": (repoint_user, "members_mismatch"),
    "shared_ledger": (shared_ledger, "requirement_mismatch"),
    "fork_parent_missing": (fork_parent_missing, "missing_parent"),
    "drop_fork_member_line": (drop_fork_member_line, "requirement_mismatch"),
    "drop_ledger_line": (drop_ledger_line, "unknown_ledger"),
    "member_moved_earlier": (member_moved_earlier, "member_before_registration"),
    "member_before_ledger_since": (member_before_ledger_since, "member_before_ledger"),
    "line_before_since": (line_before_since, "line_before_since"),
    "intruder_member": (intruder_member, "unregistered_member"),
    "unknown_kind": (unknown_kind, "bad_kind"),
    "second_ledger_line": (second_ledger_line, "duplicate_ledger"),
    "fork_before_parent": (fork_before_parent, "bad_fork"),
    "release_kind_unknown": (release_kind_unknown, "bad_release"),
    "release_kind_changed": (release_kind_changed, "kind_mismatch"),
    "release_dropped": (release_dropped, "release_missing"),
    "release_duplicated": (release_duplicated, "release_duplicate"),
    "publish_relabelled_nullify": (publish_relabelled_nullify, "nullify_spent"),
    "calculation_without_dissimilarity": (calculation_without_dissimilarity, "calculation_without_dissimilarity"),
    # under a baseline a halved E is below the global one: the user is then not registered at all
    "input_requirement_tightened": (input_requirement_tightened,
                                    _by_family("requirement_mismatch", "unregistered_member")),
    # release fields the auditor derives (docs/mechanisms.md, "What the auditor proves")
    "publication_passed_off_as_skip": (publication_passed_off_as_skip, "repeat_changed"),
    "skip_counts_changed": (skip_counts_changed, "repeat_changed"),
    "epsilon_publication_doubled": (epsilon_publication_doubled, "publication_scale"),
    "threshold_halved": (threshold_halved, "threshold_mismatch"),
    "even_release_at_the_lowest_budget": (even_release_at_the_lowest_budget, "publication_scale"),
    "kept_share_changed": (kept_share_changed, "kept_share_mismatch"),
    "epsilon_calculation_doubled": (epsilon_calculation_doubled, "calculation_scale"),
    "skip_that_cleared_its_threshold": (skip_that_cleared_its_threshold, "decision_mismatch"),
    "noise_label_changed": (noise_label_changed, "noise_mismatch"),
    "seeded_run_audited_as_production": (seeded_run_audited_as_production, "noise_label"),
    "spend_line_label_changed": (spend_line_label_changed, "noise_label"),
    "spend_line_label_dropped": (spend_line_label_dropped, "noise_label"),
    "population_changed": (population_changed, "population_mismatch"),
    "mechanism_relabelled": (mechanism_relabelled, "label_mismatch"),
    "domain_relabelled": (domain_relabelled, "label_mismatch"),
    "skip_threshold_nulled": (skip_threshold_nulled, "threshold_missing"),
    "skip_threshold_below_its_noise": (skip_threshold_below_its_noise, "threshold_mismatch"),
    "schema_version_dropped": (schema_version_dropped, "schema_version_mixed"),
    "schema_version_downgraded": (schema_version_downgraded, "schema_version_mixed"),
    "run_relabelled_version_2": (run_relabelled_version_2, "schema_fields_mismatch"),
    "run_without_versions": (run_without_versions, "schema_fields_mismatch"),
    "rescaled_run_relabelled_version_3": (rescaled_run_relabelled_version_3, "threshold_mismatch"),
    "version_back_after_an_upgrade": (version_back_after_an_upgrade, "schema_version_mixed"),
    "smoothed_without_post_processing": (smoothed_without_post_processing, "smoothed_mismatch"),
    "interval_without_post_processing": (interval_without_post_processing, "interval_mismatch"),
    # the budget in view (docs/formats.md, the spend log's utilisation record)
    "utilisation_one_ppm_up": (utilisation_one_ppm_up, "utilisation_mismatch"),
    "utilisation_empty_bucket_filled": (utilisation_empty_bucket_filled, "utilisation_mismatch"),
    "utilisation_bucket_dropped": (utilisation_bucket_dropped, "utilisation_mismatch"),
    "utilisation_as_a_fraction": (utilisation_as_a_fraction, "utilisation_mismatch"),
    "utilisation_duplicated": (utilisation_duplicated, "utilisation_duplicate"),
    "utilisation_dropped": (utilisation_dropped, "utilisation_missing"),
    "utilisation_after_last_release": (utilisation_after_last_release, "no_release"),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
@pytest.mark.parametrize("name", REGISTRY.names())
def test_tampering_fails_the_audit(genuine: dict[str, Run], name: str, mutation: str) -> None:
    tamper, expected = MUTATIONS[mutation]
    rule = expected if isinstance(expected, str) else expected(name)
    report = tamper(genuine[name]).audit()
    assert rule in report.rules(), report.render()


# ------------------------------------------------------------------------------- post-processing


def test_genuine_smoothed_runs_pass_the_full_audit(smoothed: dict[str, Run]) -> None:
    for name, run in smoothed.items():
        assert all("smoothed" in r and "interval" in r for r in run.releases), name
        report = run.audit()
        assert report.ok and not report.notes, f"{name}: {report.render()}"


def _middle(run: Run) -> int:
    """A slot in the middle whose smoothed histogram and interval are not all zeros."""
    slots = [r["slot"] for r in run.releases if any(r["smoothed"]) and any(high for _, high in r["interval"])]
    return int(slots[len(slots) // 2])


def smoothed_shifted(run: Run) -> Run:
    return _releases(run, _middle(run), lambda r: r.update(smoothed=[x + 100 for x in r["smoothed"]]))


def smoothed_collapsed(run: Run) -> Run:
    return _releases(run, _middle(run), lambda r: r.update(smoothed=[0.0 for _ in r["smoothed"]]))


def interval_shifted(run: Run) -> Run:
    return _releases(run, _middle(run), lambda r: r.update(interval=[[lo + 100, hi + 100] for lo, hi in r["interval"]]))


def interval_collapsed(run: Run) -> Run:
    return _releases(run, _middle(run), lambda r: r.update(interval=[[0.0, 0.0] for _ in r["interval"]]))


def smoothed_dropped(run: Run) -> Run:
    return _releases(run, _middle(run), lambda r: r.pop("smoothed"))


def everything_shifted(run: Run) -> Run:
    """Both fields of every release shifted by 100: no restart of the filter bank explains them."""
    return replace(run, releases=tuple({**r, "smoothed": [x + 100 for x in r["smoothed"]],
                                        "interval": [[lo + 100, hi + 100] for lo, hi in r["interval"]]}
                                       for r in run.releases))


#: name -> (tampering of a run with `postprocess: kalman`, the rules the audit must report).
SMOOTHING_MUTATIONS: dict[str, tuple[Callable[[Run], Run], set[str]]] = {
    "smoothed_shifted": (smoothed_shifted, {"smoothed_mismatch"}),
    "smoothed_collapsed": (smoothed_collapsed, {"smoothed_mismatch"}),
    "interval_shifted": (interval_shifted, {"interval_mismatch"}),
    "interval_collapsed": (interval_collapsed, {"interval_mismatch"}),
    "smoothed_dropped": (smoothed_dropped, {"smoothed_mismatch"}),
    "everything_shifted": (everything_shifted, {"smoothed_mismatch", "interval_mismatch"}),
}


@pytest.mark.parametrize("mutation", SMOOTHING_MUTATIONS)
@pytest.mark.parametrize("name", REGISTRY.names())
def test_tampered_post_processing_fails_the_audit(smoothed: dict[str, Run], name: str, mutation: str) -> None:
    tamper, rules = SMOOTHING_MUTATIONS[mutation]
    report = tamper(smoothed[name]).audit()
    assert rules <= report.rules(), report.render()


def resumed_at(run: Run, slot: int) -> Run:
    """The run as a job that resumed after slot - 1 without state would have smoothed it: a fresh filter
    bank from `slot` on (`PopulationOperator` builds its smoother fresh and `resume_after` seeds only
    the release history), rounded as jobs/common/release.py rounds."""
    smoother = run.config.smoother()
    assert smoother is not None
    releases = []
    for record in run.releases:
        if record["slot"] >= slot:
            out = smoother.step(PublicRelease.from_record(record))
            record = {**record, "smoothed": [round(float(x), 3) for x in out],
                      "interval": [[round(float(lo), 3), round(float(hi), 3)]
                                   for lo, hi in smoother.interval(out, record["population"])]}
        releases.append(record)
    return replace(run, releases=tuple(releases))


def test_resume_after_leaves_the_smoother_fresh(smoothed: dict[str, Run]) -> None:
    """What the auditor's restart mirrors: a job resuming after its last release starts the post-processing anew."""
    config = smoothed["PBD"].config
    operator = PopulationOperator(config, NumpyRandomness(0))
    operator.resume_after(30, (5, 4, 0, 0), 28)
    assert operator.smoother is not None and config.smoother() is not None
    assert operator.smoother.snapshot() == config.smoother().snapshot()  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["PBD", "DPBA", "Adaptive"])
def test_a_resumed_job_restarts_the_post_processing(smoothed: dict[str, Run], name: str) -> None:
    resumed = resumed_at(smoothed[name], 31)
    assert resumed.releases[40]["smoothed"] != smoothed[name].releases[40]["smoothed"], "the restart changes nothing"
    report = resumed.audit()
    assert report.ok, report.render()
    assert report.notes == ("post-processing restarted at slot 31 (a job that resumed after slot 30 without state)",)
    for tamper, rules in SMOOTHING_MUTATIONS.values():
        assert rules <= tamper(resumed).audit().rules()


@pytest.mark.parametrize("name", [name for name in REGISTRY.names() if name != "Adaptive"])
def test_a_run_upgraded_from_version_3_passes(genuine: dict[str, Run], name: str) -> None:
    """A job of release 0.2.0 (version 3) restored by this one goes on in version 4: one step from 3
    to 4 is accepted. Without rescaled releases the two versions' thresholds agree."""
    report = _first_half_as(genuine[name], 3).audit()
    assert report.ok, report.render()


def test_each_release_of_an_upgraded_run_is_read_as_its_version(genuine: dict[str, Run]) -> None:
    """Adaptive's rescaled thresholds: version 4's (the mean cell's) are OBS's error only read as version
    4; the same releases labelled 3 before the upgrade fail there and only there (the threshold, and
    where the worst case would have chosen another budget, the budget too)."""
    run = genuine["Adaptive"]
    cut = run.releases[len(run.releases) // 2]["slot"]
    report = _first_half_as(run, 3).audit()
    assert "threshold_mismatch" in report.rules(), report.render()
    assert report.rules() <= {"threshold_mismatch", "publication_scale"}, report.render()  # OBS's choice moves too
    assert max(v.slot for v in report.violations) < cut, report.render()


def test_a_ledgers_unlabelled_lines_before_its_first_labelled_one_pass(genuine: dict[str, Run]) -> None:
    """A job upgraded from a release before spend lines named their noise: each ledger's lines before
    the upgrade carry no label, those after do; the releases' labels speak for the first. A label
    dropped after a ledger's first labelled line still fails (`spend_line_label_dropped`)."""
    run = genuine["PBD"]
    cut = run.releases[len(run.releases) // 2]["slot"]
    log = [{k: v for k, v in r.items() if k != "noise"} if r["record"] == "spend" and r["slot"] < cut else r
           for r in run.log]
    assert any("noise" not in r for r in log if r["record"] == "spend")
    report = _log(run, log).audit()
    assert report.ok, report.render()
