"""`pwevent replay` end to end on small streams, and rejects with every reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pwevent.jobs.cli.main import main
from pwevent.jobs.common.config import parse_config
from pwevent.jobs.common.files import DEMO_ORIGIN, write_synthetic
from pwevent.jobs.common.slots import duration_arg
from pwevent.jobs.common.synthetic import SyntheticStream
from pwevent.jobs.offline.audit import audit_file
from pwevent.jobs.offline.replay import run_replay
from pwevent.operators.registry import REGISTRY


def read(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle]


def config_for(name, **extra):
    raw = {"mechanism": name, "slot": "60s", "origin": DEMO_ORIGIN, "domain": {"type": "binary"},
           **REGISTRY.get(name).global_keys(120, 0.6), "caps": {"max_w": 200}}
    raw.update(extra)
    return parse_config(raw)


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    out = {}
    for dynamic in (False, True):
        folder = tmp_path_factory.mktemp("dyn" if dynamic else "fixed")
        write_synthetic(SyntheticStream("Sin", 60, 150, seed=3), str(folder), 0.6, 120, 60_000, dynamic,
                        types=3, change_every=50)
        out[dynamic] = folder
    return out


@pytest.mark.parametrize("name", REGISTRY.names())
def test_every_mechanism_end_to_end(name, streams, tmp_path):
    config = config_for(name)
    folder = streams[config.mechanism_spec().dynamic]
    outs = {k: str(tmp_path / f"{k}.jsonl") for k in ("releases", "spend", "truth", "rejects")}
    summary = run_replay(config, str(folder / "events.jsonl"), str(folder / "requirements.jsonl"),
                         outs["releases"], outs["spend"], outs["truth"], outs["rejects"], seed=5)
    releases, truth = read(outs["releases"]), read(outs["truth"])
    assert [r["slot"] for r in releases] == list(range(1, 151))
    assert all(r["kind"] in ("publish", "skip", "nullify") for r in releases)
    assert all(len(r["counts"]) == 2 and all(isinstance(c, int) for c in r["counts"]) for r in releases)
    assert all(sum(t["counts"]) == 60 for t in truth)
    assert summary.users == 60 and not summary.rejects
    assert releases[0]["population"] == 60
    # a skip or nullify repeats the last release
    for before, after in zip(releases, releases[1:], strict=False):
        if after["kind"] != "publish":
            assert after["counts"] == before["counts"]
    report = audit_file(outs["spend"])
    assert report.ok, report.render()
    assert report.spend_lines > 0


def test_seed_reproduces_and_default_is_secure(streams, tmp_path):
    folder = streams[False]
    runs = []
    for i, seed in enumerate((9, 9, None)):
        path = str(tmp_path / f"r{i}.jsonl")
        summary = run_replay(config_for("PBD"), str(folder / "events.jsonl"), str(folder / "requirements.jsonl"),
                             path, str(tmp_path / f"s{i}.jsonl"), seed=seed)
        runs.append((read(path), summary.noise))
    assert runs[0][0] == runs[1][0]
    assert "seeded" in runs[0][1] and runs[2][1] == "opendp-discrete-laplace"
    assert runs[2][0][0]["noise"] == "opendp-discrete-laplace"


def test_several_events_of_a_user_in_a_slot_collapse_to_the_last(tmp_path):
    (tmp_path / "req.jsonl").write_text(json.dumps({"user": "a", "time": 0, "w": 2, "epsilon": 1.0}) + "\n")
    events = [{"user": "a", "time": 10, "value": 0}, {"user": "a", "time": 30, "value": 1},
              {"user": "a", "time": 20, "value": 0}]
    (tmp_path / "ev.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    config = config_for("PBD", origin=0, slot="1s")
    run_replay(config, str(tmp_path / "ev.jsonl"), str(tmp_path / "req.jsonl"), str(tmp_path / "rel.jsonl"),
               str(tmp_path / "spend.jsonl"), str(tmp_path / "truth.jsonl"), seed=1)
    assert read(tmp_path / "truth.jsonl")[0]["counts"] == [0, 1]


def test_rejects_carry_every_reason(tmp_path):
    requirements = [
        {"user": "a", "time": "1970-01-01T00:00:00Z", "w": 3, "epsilon": 1.0},
        {"user": "b", "time": 0, "w": 0, "epsilon": 1.0},  # invalid: w < 1
        {"user": "c", "time": 0, "w": 3, "epsilon": -1},  # invalid: epsilon <= 0
        {"user": "d", "time": 0, "w": 3, "epsilon": 1e9},  # invalid: over the cap
        {"user": "a", "time": 1500, "w": 5, "epsilon": 1.0},  # change under a fixed mechanism
        {"user": "a", "time": 1600, "w": 3, "epsilon": 1.0},  # same again: fine, not a change
    ]
    events = [
        '{"user": "a", "time": 100, "value": 1}',
        '{"user": "a", "time": 200,',  # unparsable
        '{"user": "a", "value": 1}',  # missing field
        '{"user": "a", "time": "yesterday", "value": 1}',  # mistyped
        '{"user": "zed", "time": 300, "value": 1}',  # unknown user
        '{"user": "a", "time": 400, "value": 7}',  # out of domain
        '{"user": "a", "time": -5000, "value": 1}',  # before the origin
        '{"user": "a", "time": 2100, "value": 0}',
    ]
    (tmp_path / "req.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requirements))
    (tmp_path / "ev.jsonl").write_text("\n".join(events) + "\n")
    config = config_for("PBD", origin=0, slot="1s", caps={"max_epsilon": 10})
    summary = run_replay(config, str(tmp_path / "ev.jsonl"), str(tmp_path / "req.jsonl"),
                         str(tmp_path / "rel.jsonl"), str(tmp_path / "spend.jsonl"), None,
                         str(tmp_path / "rejects.jsonl"), seed=1)
    rejects = read(tmp_path / "rejects.jsonl")
    assert summary.rejects == {
        "invalid_requirement": 3, "requirement_change_under_fixed_mechanism": 1, "unparsable": 1,
        "missing_field": 1, "mistyped_field": 1, "unknown_user": 1, "out_of_domain": 1, "before_origin": 1,
    }
    assert all({"source", "position", "reason", "detail", "original"} <= set(r) for r in rejects)
    unparsable = next(r for r in rejects if r["reason"] == "unparsable")
    assert unparsable["original"] == events[1] and unparsable["position"].endswith("ev.jsonl:2")
    assert len(read(tmp_path / "rel.jsonl")) == 3  # the valid records still made their slots


def test_dynamic_rejects_fixed_form_and_reports_infeasible_backward(tmp_path):
    def dyn(user, time, bw, be, fw, fe):
        return {"user": user, "time": time, "backward": {"w": bw, "epsilon": be}, "forward": {"w": fw, "epsilon": fe}}

    requirements = [dyn("a", 0, 4, 4.0, 4, 4.0), {"user": "b", "time": 0, "w": 3, "epsilon": 1.0},
                    dyn("a", 3000, 4, 0.01, 4, 4.0)]
    events = [{"user": "a", "time": t * 1000 + 1, "value": t % 2} for t in range(6)]
    (tmp_path / "req.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requirements))
    (tmp_path / "ev.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    config = config_for("DPBD", origin=0, slot="1s")
    summary = run_replay(config, str(tmp_path / "ev.jsonl"), str(tmp_path / "req.jsonl"),
                         str(tmp_path / "rel.jsonl"), str(tmp_path / "spend.jsonl"), None,
                         str(tmp_path / "rejects.jsonl"), seed=2)
    assert summary.rejects["invalid_requirement"] == 1
    assert summary.rejects["infeasible_backward_requirement_projected"] >= 1
    spends = [r for r in read(tmp_path / "spend.jsonl") if r["record"] == "spend"]
    projected = [r for r in spends if "projected_backward" in r]
    assert projected and all(r["spend1"] == 0 and r["spend2"] == 0 for r in projected)
    assert audit_file(str(tmp_path / "spend.jsonl")).ok


def test_every_valid_event_moves_time_and_only_valid_ones(tmp_path):
    """docs/streaming.md, "Which records move time": the last slot is that of the last valid event
    (or requirement), whether or not its user is registered: a user without a requirement in force,
    or whose only requirement is refused (stricter than the baseline's global one), moves time as
    the job's ValidTime has it, and its events are `unknown_user`. A record the parser refuses,
    however far ahead, adds no slot. Every run releases the same first slots."""
    requirements = [{"user": "a", "time": 0, "w": 120, "epsilon": 1.0},
                    {"user": "late", "time": 2500, "w": 120, "epsilon": 1.0},  # registered from slot 3
                    {"user": "strict", "time": 0, "w": 400, "epsilon": 0.1}]   # refused: never registered
    valid = ['{"user": "a", "time": 100, "value": 1}', '{"user": "a", "time": 1100, "value": 0}',
             '{"user": "late", "time": 2100, "value": 1}']
    refused = ['{"user": "a", "time": 70000, "value": -1}',              # out of the domain
               '{"user": "a", "time": 1000, "value": 1, "time": 80000}']  # a repeated key
    unknown = ['{"user": "late", "time": 1900, "value": 1}',            # unknown at slot 2
               '{"user": "ghost", "time": 5000, "value": 1}',            # never registered: slot 6
               '{"user": "strict", "time": 4000, "value": 1}']           # its requirement was refused
    (tmp_path / "req.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requirements))
    runs = {}
    for name, lines in (("valid", valid), ("refused", valid + refused), ("unknown", valid + unknown)):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
        summary = run_replay(config_for("BD", origin=0, slot="1s"), str(tmp_path / f"{name}.jsonl"),
                             str(tmp_path / "req.jsonl"), str(tmp_path / f"{name}-rel.jsonl"),
                             str(tmp_path / f"{name}-spend.jsonl"), None, str(tmp_path / f"{name}-rej.jsonl"), seed=1)
        runs[name] = (summary, read(tmp_path / f"{name}-rel.jsonl"), read(tmp_path / f"{name}-spend.jsonl"))
    valid_summary, valid_releases, valid_spend = runs["valid"]
    refused_summary, refused_releases, refused_spend = runs["refused"]
    unknown_summary, unknown_releases, _ = runs["unknown"]
    assert valid_summary.slots == refused_summary.slots == 3
    assert refused_releases == valid_releases and refused_spend == valid_spend
    assert refused_summary.rejects - valid_summary.rejects == {"out_of_domain": 1, "duplicate_key": 1}
    assert unknown_summary.slots == 6
    assert [r["slot"] for r in unknown_releases] == list(range(1, 7))
    assert unknown_summary.rejects - valid_summary.rejects == {"unknown_user": 3}


def test_baseline_refuses_users_stricter_than_its_global_requirement(tmp_path):
    (tmp_path / "req.jsonl").write_text(json.dumps({"user": "a", "time": 0, "w": 400, "epsilon": 0.1}) + "\n")
    (tmp_path / "ev.jsonl").write_text("")
    summary = run_replay(config_for("BD", origin=0), str(tmp_path / "ev.jsonl"), str(tmp_path / "req.jsonl"),
                         str(tmp_path / "rel.jsonl"), str(tmp_path / "spend.jsonl"), seed=1)
    assert summary.rejects == {"invalid_requirement": 1}


def test_cli_replay_and_audit(streams, tmp_path, capsys):
    folder = streams[False]
    config = tmp_path / "c.yaml"
    config.write_text(f"mechanism: PBA\nslot: 60s\norigin: '{DEMO_ORIGIN}'\ndomain: {{type: binary}}\n")
    spend = str(tmp_path / "spend.jsonl")
    code = main(["replay", "--config", str(config), "--events", str(folder / "events.jsonl"), "--requirements",
                 str(folder / "requirements.jsonl"), "--releases-out", str(tmp_path / "r.jsonl"),
                 "--spend-log", spend, "--seed", "3", "--quiet", "--through", "150"])
    assert code == 0
    assert "decisions:" in capsys.readouterr().out
    assert main(["audit", "--spend-log", spend]) == 0
    broken = tmp_path / "broken.jsonl"
    lines = read(spend)
    for record in lines:
        if record["record"] == "spend" and record["kind"] == "publish":
            record["spend2"] *= 3
    broken.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert main(["audit", "--spend-log", str(broken)]) == 1
    assert "VIOLATIONS" in capsys.readouterr().out


def test_cli_help_explains_every_command(capsys):
    for command in ([], ["replay"], ["audit"], ["generate"], ["demo"]):
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--help"])
        assert exit_.value.code == 0
        assert len(capsys.readouterr().out) > 200


def test_truth_matches_the_generated_values(tmp_path):
    stream = SyntheticStream("Log", 30, 20, seed=4)
    write_synthetic(stream, str(tmp_path), 0.6, 120, 60_000)
    run_replay(config_for("Uniform"), str(tmp_path / "events.jsonl"), str(tmp_path / "requirements.jsonl"),
               str(tmp_path / "r.jsonl"), str(tmp_path / "s.jsonl"), str(tmp_path / "t.jsonl"), seed=1)
    expected = [np.bincount(v, minlength=2).tolist() for v in stream.values()]
    assert [t["counts"] for t in read(tmp_path / "t.jsonl")] == expected


@pytest.mark.parametrize("name", ["PBD", "Adaptive"])  # Adaptive: rescaled releases, their kept_share read back
def test_releases_carry_the_causal_smoothing_unless_turned_off(streams, tmp_path, name):
    from pwevent.operators.postprocess import KalmanSmoother, PublicRelease

    folder = streams[False]
    paths = {}
    for mode in ("kalman", "none"):
        paths[mode] = str(tmp_path / f"{mode}.jsonl")
        run_replay(config_for(name, postprocess=mode), str(folder / "events.jsonl"),
                   str(folder / "requirements.jsonl"), paths[mode], str(tmp_path / f"s-{mode}.jsonl"), seed=4)
    smoothed, raw = read(paths["kalman"]), read(paths["none"])
    assert all("smoothed" not in r for r in raw)
    assert [r["counts"] for r in smoothed] == [r["counts"] for r in raw]  # smoothing never feeds back
    again = KalmanSmoother(2)
    for record in smoothed:
        assert len(record["smoothed"]) == 2 and all(0 <= x <= record["population"] for x in record["smoothed"])
        # a consumer of the release topic recomputes it from the public records alone
        assert again.step(PublicRelease.from_record(record)) == pytest.approx(record["smoothed"], abs=2e-3)
    assert any(r["kept_share"] is not None for r in smoothed) == (name == "Adaptive")


@pytest.mark.parametrize("argv", [["generate", "--out", "x", "--slot", "0s"],
                                  ["produce", "--config", "c.yaml", "--pace", "1.5s"],
                                  ["tail", "--config", "c.yaml", "--timeout", "0"],
                                  ["tail", "--config", "c.yaml", "--idle-exit", "-3"],
                                  ["tail", "--config", "c.yaml", "--timeout", "9" * 400],
                                  ["stop", "--jobmanager", "127.0.0.1:1", "--timeout", "5 minutes"]])
def test_a_bad_duration_argument_is_a_usage_error_naming_it(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert f"argument {argv[-2]}: the value must be a positive duration" in capsys.readouterr().err


def test_every_duration_option_takes_a_unit_or_a_number_of_seconds() -> None:
    """One convention for `--timeout`, `--idle-exit`, `--pace` and `--slot` on every command."""
    assert [duration_arg(text) for text in ("500ms", "2s", "5m", "1h", "1d", "30", "2.5", " 7 ")] == [
        500, 2_000, 300_000, 3_600_000, 86_400_000, 30_000, 2_500, 7_000]


def test_adaptive_replay_switches_and_passes_the_full_audit(streams, tmp_path, capsys):
    """`pwevent replay` with the default mechanism (a short evidence window, a loose drift test and a
    loose level test, so that after the probe, which finds this 60-user stream dense, it switches
    between even spending and absorption), then `pwevent audit` in full: every release names its family
    and is schema-valid, the three families are used, and the audit of every user's windows passes
    (docs/mechanisms.md section 14)."""
    import jsonschema
    import yaml

    from pwevent.jobs.common.config import load_config

    folder = streams[False]
    config = tmp_path / "adaptive.yaml"
    config.write_text(yaml.safe_dump({"slot": "60s", "origin": DEMO_ORIGIN, "domain": {"type": "binary"},
                                      "adaptive": {"evidence": 4, "static_drift": 100.0, "level_margin": 0.0},
                                      "caps": {"max_w": 200}, "noise": "numpy-fast"}))
    assert load_config(str(config)).mechanism == "Adaptive"  # the default
    files = {k: str(tmp_path / f"{k}.jsonl") for k in ("releases", "spend")}
    inputs = ["--requirements", str(folder / "requirements.jsonl")]
    assert main(["replay", "--config", str(config), "--events", str(folder / "events.jsonl"), *inputs,
                 "--releases-out", files["releases"], "--spend-log", files["spend"], "--seed", "5", "--quiet",
                 "--through", "150"]) == 0
    releases = read(files["releases"])
    validator = jsonschema.Draft202012Validator(json.loads(
        (Path(__file__).parents[2] / "docs" / "schemas" / "release.schema.json").read_text()))
    for release in releases:
        validator.validate(release)
    assert {r["mechanism"] for r in releases} == {"Adaptive"}
    assert {r["family"] for r in releases} == {"Sample", "Uniform", "PBA"}
    assert releases[0]["family"] == "Sample" and releases[1]["family"] == "Uniform"
    capsys.readouterr()
    assert main(["audit", "--spend-log", files["spend"], *inputs, "--releases", files["releases"],
                 "--config", str(config)]) == 0, capsys.readouterr().out


def test_the_horizon_not_the_last_event_decides_the_slots(tmp_path):
    """Issue 40's reproduction: five users with events in slots 1-10, with and without one more event
    of one user in slot 12. Through the same horizon (12) both runs release slots 1-12, under every
    mechanism; without a horizon (research runs over a finished dataset) the tail event decides."""
    requirements = [{"user": f"u{n}", "time": 0, "w": 120, "epsilon": 1.0} for n in range(5)]
    (tmp_path / "req.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requirements))
    events = [json.dumps({"user": f"u{n}", "time": (slot - 1) * 1000 + n, "value": (n + slot) % 2})
              for slot in range(1, 11) for n in range(5)]
    tail = json.dumps({"user": "u0", "time": 11_500, "value": 1})
    for name in REGISTRY.names():
        slots = {}
        for label, lines in (("without", events), ("with", [*events, tail])):
            path = tmp_path / f"{name}-{label}.jsonl"
            path.write_text("\n".join(lines) + "\n")
            for through in (12, None):
                rel = tmp_path / f"{name}-{label}-{through}-rel.jsonl"
                run_replay(config_for(name, origin=0, slot="1s"), str(path), str(tmp_path / "req.jsonl"), str(rel),
                           str(tmp_path / "spend.jsonl"), seed=1, through=through)
                slots[label, through] = [r["slot"] for r in read(rel)]
        assert slots["with", 12] == slots["without", 12] == list(range(1, 13)), name
        assert (slots["with", None], slots["without", None]) == (list(range(1, 13)), list(range(1, 11))), name


def test_the_replay_asks_for_a_public_horizon(tmp_path, capsys):
    """`pwevent replay --through` takes a slot number or a time (its slot); without it, argparse
    refuses (exit 2); a time before the origin is a configuration error naming the option."""
    config = tmp_path / "c.yaml"
    config.write_text("mechanism: PBD\nslot: 60s\norigin: '2024-01-01T00:00:00Z'\ndomain: {type: binary}\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    base = ["replay", "--quiet", "--config", str(config), "--events", str(empty), "--requirements", str(empty),
            "--releases-out", str(tmp_path / "r.jsonl"), "--spend-log", str(tmp_path / "s.jsonl")]
    with pytest.raises(SystemExit) as refused:
        main(base)
    assert refused.value.code == 2 and "--through" in capsys.readouterr().err
    assert main([*base, "--through", "2024-01-01T00:10:30Z"]) == 0
    assert [r["slot"] for r in read(tmp_path / "r.jsonl")] == list(range(1, 12))
    assert main([*base, "--through", "3"]) == 0
    assert len(read(tmp_path / "r.jsonl")) == 3
    assert main([*base, "--through", "2023-12-31T23:00:00Z"]) == 2
    assert "--through 2023-12-31T23:00:00Z lies before the configured origin" in capsys.readouterr().err


@pytest.mark.parametrize(("adaptive", "bursts"), [({}, [1, 2, 32, 62, 92]), ({"day": 1}, [1, 2, 26, 50, 74, 98])])
def test_the_replay_takes_adaptives_day_from_the_slot(tmp_path, adaptive, bursts):
    """`slot: 1h` gives Adaptive 24 slots in a day: with every window 24 slots (one day), every gap
    between bursts after slot 2 is a quarter of a day longer (30 slots: 32, 62, 92; docs/mechanisms.md
    section 14); `adaptive.day: 1` keeps every period at 24 slots.
    Either way the full audit passes."""
    requirements = [{"user": f"u{n}", "time": 0, "w": 24, "epsilon": 1.0} for n in range(40)]
    (tmp_path / "req.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requirements))
    events = [json.dumps({"user": f"u{slot % 40}", "time": (slot - 1) * 3_600_000 + 7, "value": slot % 2})
              for slot in range(1, 111)]
    (tmp_path / "events.jsonl").write_text("\n".join(events) + "\n")
    config = config_for("Adaptive", origin=0, slot="1h", noise="numpy-fast", adaptive=adaptive)
    paths = {k: str(tmp_path / f"{k}.jsonl") for k in ("releases", "spend")}
    run_replay(config, str(tmp_path / "events.jsonl"), str(tmp_path / "req.jsonl"), paths["releases"], paths["spend"],
               seed=3, through=110)
    releases = read(paths["releases"])
    assert {r["family"] for r in releases} == {"Sample"}
    assert [r["slot"] for r in releases if r["kind"] == "publish"][:len(bursts)] == bursts
    report = audit_file(paths["spend"], str(tmp_path / "req.jsonl"), paths["releases"], config)
    assert report.ok, report
