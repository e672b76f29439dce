"""The alert rules the chart renders (deploy/helm/pwevent, templates/prometheus-rule.yaml) with
Debian's promtool, for 15-minute slots (the chart's defaults) and 1-minute slots (ci/1-minute-values.yaml):
`promtool check rules`, and `promtool test rules` with input series of a healthy job in which no alert
fires, one run per alert whose series make it fire (and show it quiet before), near misses that stay
quiet, and two deployments of which one is down or stuck. The thresholds the tests expect are
computed here from the rendered job.yaml's slot and release delay and the chart's margins, not read
from the rules. Mutated rules must fail the tests (docs/operations.md, "Alert rules")."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from pwevent.jobs.common.slots import parse_duration_ms
from tests.deploy.chart import NAMESPACE, RELEASE, job_yaml, render, rule_groups

REPO = Path(__file__).resolve().parents[2]
OPERATIONS = REPO / "docs" / "operations.md"
P = "flink_taskmanager_job_task_operator_pwevent_"
PENDING = "flink_taskmanager_job_task_operator_pendingRecords"
#: A second deployment in the same namespace, healthy, for the tests of one deployment down.
OTHER = "other"
#: The chart's margins (values.yaml, alerts), in minutes.
NO_RELEASE_MARGIN, WATERMARK_MARGIN, CONSUMER_LAG_FOR = 5, 10, 15
CONSUMER_LAG_RECORDS = 100_000
#: When an alert's trouble starts in its firing run (minute).
TROUBLE = 10
#: The window bucket whose budget the runs pin (its longest window, 9 slots, keeps the runs short).
PINNED = "w1_9"


@dataclass(frozen=True)
class Timing:
    """A deployment's slot and release delay (minutes), from its rendered job.yaml."""

    overlay: str | None
    slot: int
    delay: int

    @classmethod
    def of(cls, overlay: str | None) -> Timing:
        config = job_yaml(render(overlay))
        return cls(overlay, parse_duration_ms(config["slot"]) // 60_000,
                   parse_duration_ms(config["flink"]["release_delay"]) // 60_000)

    @property
    def no_release(self) -> int:
        return self.slot + self.delay + NO_RELEASE_MARGIN

    @property
    def lag(self) -> int:
        return self.slot + self.delay + WATERMARK_MARGIN

    @property
    def consumer_for(self) -> int:
        return self.slot + self.delay + CONSUMER_LAG_FOR

    @property
    def budget_window(self) -> int:
        """The longest window of the bucket PINNED (w up to 9 slots), in minutes."""
        return 9 * self.slot

    @property
    def length(self) -> int:
        """Minutes of input: past the budget window, with room for the alerts after it."""
        return self.budget_window + 30

    def releases(self, length: int, until: int | None = None) -> str:
        """The release counter over `length` minutes: one decided slot per slot length (frozen from
        `until` on)."""
        return " ".join(str(min(m, length if until is None else until) // self.slot) for m in range(length + 1))

    def watermark(self, length: int, shift: int = 0, until: int | None = None) -> str:
        """The Population's event time over `length` minutes: the end of the last decided slot (a
        slot is decided `delay` after its end), `shift` minutes further behind, frozen from `until` on."""
        def at(m: int) -> int:
            m = min(m, length if until is None else until)
            return max(0, (m - self.delay) // self.slot * self.slot - shift) * 60_000
        return " ".join(str(at(m)) for m in range(length + 1))


TIMINGS = {"15-minute": None, "1-minute": "1-minute-values.yaml"}


def labels(job: str = RELEASE, **more: str) -> str:
    return ", ".join(f'{k}="{v}"' for k, v in {"namespace": NAMESPACE, "job": job, **more}.items())


def healthy(t: Timing, job: str = RELEASE, length: int | None = None) -> dict[str, str]:
    """A running, healthy deployment sampled every minute for `length` minutes (default: the
    timing's): a slot decided every slot length, event time a slot and the delay behind at most, half
    the budget of two window buckets used, 0.1 dead letters per second, nothing late, 1,000 records
    unread."""
    n = t.length if length is None else length
    return {
        f'{P}kind_releases{{{labels(job, kind="publish")}}}': t.releases(n),
        f"{P}watermark_ms{{{labels(job)}}}": t.watermark(n),
        f'{P}window_budget_utilisation_ppm{{{labels(job, window="w10_99")}}}': f"500000x{n}",
        f'{P}window_budget_utilisation_ppm{{{labels(job, window=PINNED)}}}': f"500000x{n}",
        f'{P}reason_dead_letters{{{labels(job, reason="unparsable")}}}': f"0+6x{n}",
        f'{P}reason_dead_letters{{{labels(job, reason="unauthenticated_requirement")}}}': f"0x{n}",
        f"{P}late_records{{{labels(job)}}}": f"0x{n}",
        f'{PENDING}{{{labels(job, operator_name="Source:_kafka_events")}}}': f"1000x{n}",
        f'up{{{labels(job, instance="10.0.0.7:9249")}}}': f"1x{n}",
        f"flink_jobmanager_job_numRestarts{{{labels(job)}}}": f"0x{n}",
        f"flink_jobmanager_job_numberOfFailedCheckpoints{{{labels(job)}}}": f"0x{n}",
    }


@dataclass(frozen=True)
class Firing:
    """An alert's firing run: series replacing the healthy ones, the minute it fires, its labels
    besides the rule's, and the minute it must still be quiet."""

    series: dict[str, str]
    fires: int
    labels: dict[str, str]
    quiet: int


def firing(t: Timing) -> dict[str, Firing]:
    own = {"namespace": NAMESPACE, "job": RELEASE}
    frozen = TROUBLE * t.slot  # the last slot decided, right after its release
    stuck_watermark = max(0, (frozen - t.delay) // t.slot * t.slot)
    n = t.length
    return {
        "PweventJobDown": Firing({f'{P}kind_releases{{{labels(kind="publish")}}}': "0x10 stale"}, 20, own, 14),
        "PweventMetricsTargetDown": Firing({f'up{{{labels(instance="10.0.0.7:9249")}}}': f"1x10 0x{n - 10}"}, 20,
                                           {**own, "instance": "10.0.0.7:9249"}, 13),
        "PweventNoRelease": Firing({f'{P}kind_releases{{{labels(kind="publish")}}}': t.releases(n, until=frozen)},
                                   frozen + t.no_release + 2, own, frozen + t.slot),
        "PweventWatermarkLag": Firing({f"{P}watermark_ms{{{labels()}}}": t.watermark(n, until=frozen)},
                                      stuck_watermark + t.lag + 7, own, stuck_watermark + t.lag + 3),
        "PweventConsumerLag": Firing(
            {f'{PENDING}{{{labels(operator_name="Source:_kafka_events")}}}': f"1000x{TROUBLE} 200000x{n - TROUBLE}"},
            TROUBLE + t.consumer_for + 2, own, TROUBLE + t.consumer_for - 2),
        "PweventBudgetPinned": Firing(
            {f'{P}window_budget_utilisation_ppm{{{labels(window=PINNED)}}}': f"1000000x{n}"},
            t.budget_window + 5, {**own, "window": PINNED}, t.budget_window - 5),
        "PweventDeadLetterRate": Firing({f'{P}reason_dead_letters{{{labels(reason="unparsable")}}}': f"0+120x{n}"}, 30,
                                        {**own, "reason": "unparsable"}, 8),
        "PweventLateRecords": Firing({f"{P}late_records{{{labels()}}}": f"0x10 1x{n - 10}"}, 20, own, 10),
        "PweventUnauthenticatedRequirement": Firing(
            {f'{P}reason_dead_letters{{{labels(reason="unauthenticated_requirement")}}}': f"0x10 1x{n - 10}"},
            20, own, 10),
        "PweventRestarting": Firing(
            {f"flink_jobmanager_job_numRestarts{{{labels()}}}": f"0x10 1x{n - 10}"}, 15, own, 10),
        "PweventCheckpointsFailing": Firing(
            {f"flink_jobmanager_job_numberOfFailedCheckpoints{{{labels()}}}": f"0x10 2x{n - 10}"}, 15, own, 10),
    }


def near_misses(t: Timing) -> dict[str, dict[str, str]]:
    """Just below a threshold, all the time: quiet (budget: a slot with 1 % left in every window)."""
    n, every = t.length, t.budget_window // 2
    return {
        "PweventBudgetPinned": {f'{P}window_budget_utilisation_ppm{{{labels(window=PINNED)}}}':
                                " ".join("990000" if m % every == every - 1 else "1000000" for m in range(n + 1))},
        "PweventDeadLetterRate": {f'{P}reason_dead_letters{{{labels(reason="unparsable")}}}': f"0+60x{n}"},
        "PweventWatermarkLag": {f"{P}watermark_ms{{{labels()}}}": t.watermark(n, shift=WATERMARK_MARGIN - 1)},
        "PweventConsumerLag": {f'{PENDING}{{{labels(operator_name="Source:_kafka_events")}}}':
                               f"{CONSUMER_LAG_RECORDS}x{n}"},
    }


def alerts(rules: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for group in rules["groups"] for r in group["rules"] if "alert" in r}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    assert tool, "promtool not on PATH: deploy/local/setup.sh --tests installs Debian's prometheus package"
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=300, cwd=cwd, check=False)


def quiet(minutes: list[int], names: list[str]) -> list[dict[str, Any]]:
    return [{"eval_time": f"{minute}m", "alertname": name, "exp_alerts": []} for minute in minutes for name in names]


def fired(rule: dict[str, Any], minute: int, extra: dict[str, str]) -> dict[str, Any]:
    expected = {"exp_labels": {**rule.get("labels", {}), **extra}, "exp_annotations": rule["annotations"]}
    return {"eval_time": f"{minute}m", "alertname": rule["alert"], "exp_alerts": [expected]}


def promtool_run(series: dict[str, str], checks: list[dict[str, Any]]) -> dict[str, Any]:
    """One of promtool's test runs: input series at 1-minute steps and the alerts' expected states."""
    return {"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in series.items()],
            "alert_rule_test": checks}


def healthy_run(rules: dict[str, Any], t: Timing) -> dict[str, Any]:
    """The healthy run: every alert quiet at every minute of its first three slots and at its end."""
    early = list(range(1, 3 * t.slot + t.delay + 12))
    return promtool_run(healthy(t), quiet([*early, t.length], list(alerts(rules))))


def firing_run(rules: dict[str, Any], t: Timing, name: str) -> dict[str, Any]:
    """The run whose series make alert `name` fire (and show it quiet before)."""
    case = firing(t)[name]
    return promtool_run({**healthy(t), **case.series},
                        quiet([case.quiet], [name]) + [fired(alerts(rules)[name], case.fires, case.labels)])


def unit_tests(rules: dict[str, Any], t: Timing) -> list[dict[str, Any]]:
    """promtool's tests: the healthy run, then one firing run per alert, and the near misses."""
    tests = [healthy_run(rules, t)] + [firing_run(rules, t, name) for name in firing(t)]
    for name, series in near_misses(t).items():
        tests.append(promtool_run({**healthy(t), **series}, quiet([firing(t)[name].fires, t.length], [name])))
    return tests


def run_unit_tests(rule_files: dict[str, dict[str, Any]], tests: list[dict[str, Any]],
                   folder: Path) -> subprocess.CompletedProcess[str]:
    for name, rules in rule_files.items():
        (folder / name).write_text(yaml.safe_dump(rules))
    (folder / "tests.yml").write_text(yaml.safe_dump(
        {"rule_files": sorted(rule_files), "evaluation_interval": "1m", "tests": tests}, width=200))
    return promtool("test", "rules", "tests.yml", cwd=folder)


@pytest.mark.parametrize("timing", sorted(TIMINGS))
def test_promtool_checks_the_rules(timing: str, tmp_path: Path) -> None:
    rules = rule_groups(TIMINGS[timing])
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    done = promtool("check", "rules", "rules.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in rules['groups'])} rules found" in done.stdout


@pytest.mark.parametrize("timing", sorted(TIMINGS))
def test_every_alert_fires_on_its_series_and_stays_quiet_otherwise(timing: str, tmp_path: Path) -> None:
    rules, t = rule_groups(TIMINGS[timing]), Timing.of(TIMINGS[timing])
    assert set(firing(t)) == set(alerts(rules))  # every alert has its firing run
    done = run_unit_tests({"rules.yml": rules}, unit_tests(rules, t), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_the_thresholds_follow_the_slot_length() -> None:
    """The 15-minute deployment's rules wait longer than the 1-minute one's: what a healthy
    15-minute job does (a release every 15 minutes) is not an outage."""
    long, short = (alerts(rule_groups(TIMINGS[name]))["PweventNoRelease"]["expr"] for name in ("15-minute", "1-minute"))
    assert "[1260s]" in long and "[420s]" in short, (long, short)


@pytest.mark.parametrize("timing", sorted(TIMINGS))
@pytest.mark.parametrize("trouble", ["down", "stuck"])
def test_two_deployments_alert_apart(timing: str, trouble: str, tmp_path: Path) -> None:
    """Two deployments in one namespace, each with the chart's rules for itself; one is healthy. When
    the other's series vanish, its PweventJobDown fires; when its releases stop, its PweventNoRelease;
    neither for the healthy one."""
    t = Timing.of(TIMINGS[timing])
    ours, theirs = rule_groups(TIMINGS[timing]), rule_groups(TIMINGS[timing], release=OTHER)
    if trouble == "down":  # every series of ours ends at minute 10
        name, minute = "PweventJobDown", 20
        series = {key: f"{values} stale" for key, values in healthy(t, length=10).items()}
    else:
        name, minute = "PweventNoRelease", TROUBLE * t.slot + t.no_release + 2
        stuck = t.releases(t.length, until=TROUBLE * t.slot)
        series = {**healthy(t), f'{P}kind_releases{{{labels(kind="publish")}}}': stuck}
    series.update(healthy(t, OTHER))
    rule = alerts(ours)[name]
    checks = [fired(rule, minute, {"namespace": NAMESPACE, "job": RELEASE})]
    test = {"interval": "1m", "input_series": [{"series": k, "values": v} for k, v in series.items()],
            "alert_rule_test": checks}
    done = run_unit_tests({"ours.yml": ours, "theirs.yml": theirs}, [test], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def mutate(rules: dict[str, Any], name: str, expr: str) -> dict[str, Any]:
    mutated = json.loads(json.dumps(rules))
    alerts(mutated)[name]["expr"] = expr
    return mutated


@pytest.mark.parametrize("name", sorted(firing(Timing(None, 1, 1))))
def test_an_alert_that_never_fires_or_always_fires_fails_the_rule_tests(name: str, tmp_path: Path) -> None:
    """The rule tests can fail: each alert's firing run catches a rule that never fires, and the
    healthy run's quiet evaluations catch one that always does (the 1-minute rules, whose runs are
    short; only those two runs of the suite, which is what the mutants meet first)."""
    overlay = TIMINGS["1-minute"]
    rules, t = rule_groups(overlay), Timing.of(overlay)
    for expr, catches in (("vector(1) == 0", firing_run(rules, t, name)), ("vector(1)", healthy_run(rules, t))):
        done = run_unit_tests({"rules.yml": mutate(rules, name, expr)}, [catches], tmp_path)
        assert done.returncode != 0 and name in done.stdout + done.stderr, (expr, done.stdout)


def test_the_no_release_alert_of_a_1_minute_slot_fires_on_a_healthy_15_minute_job(tmp_path: Path) -> None:
    """The fixed 5-minute window of the rules before the chart, on the shipped 15-minute slots: the
    healthy run catches it (it fired at minutes 14 and 25)."""
    rules, t = rule_groups(None), Timing.of(None)
    wrong = mutate(rules, "PweventNoRelease", re.sub(r"\[\d+s\]", "[5m]", alerts(rules)["PweventNoRelease"]["expr"]))
    done = run_unit_tests({"rules.yml": wrong}, [healthy_run(rules, t)], tmp_path)
    assert done.returncode != 0 and "PweventNoRelease" in done.stdout + done.stderr, done.stdout


def test_the_job_down_alert_needs_absent(tmp_path: Path) -> None:
    """Without `absent()` the rule watches a series that is gone when the job is down."""
    overlay = TIMINGS["1-minute"]
    rules, t = rule_groups(overlay), Timing.of(overlay)
    expr = alerts(rules)["PweventJobDown"]["expr"]
    inner = re.fullmatch(r"absent\((.+)\)", expr)
    assert inner, expr
    done = run_unit_tests({"rules.yml": mutate(rules, "PweventJobDown", inner.group(1))},
                          [firing_run(rules, t, "PweventJobDown")], tmp_path)
    assert done.returncode != 0 and "PweventJobDown" in done.stdout + done.stderr, done.stdout


def test_every_rule_selects_and_keeps_the_deployment() -> None:
    """Every series selector names the namespace and the scrape job; every aggregation keeps both."""
    rules = rule_groups(None)
    for rule in (r for group in rules["groups"] for r in group["rules"]):
        expr = rule["expr"]
        for selector in re.findall(r"\b(?:up|flink_\w+|pwevent:\w+)(\{[^}]*\})?", expr):
            assert f'namespace="{NAMESPACE}", job="{RELEASE}"' in selector, (rule.get("alert"), selector)
        for grouping in re.findall(r"\b(?:sum|max|min|avg|count)\s+by\s*\(([^)]*)\)", expr):
            assert {"namespace", "job"} <= {label.strip() for label in grouping.split(",")}, (rule.get("alert"), expr)


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_alert_has_a_severity_and_a_runbook_section() -> None:
    anchors = {slug(line.lstrip("#")) for line in OPERATIONS.read_text().splitlines() if line.startswith("#")}
    for name, rule in alerts(rule_groups(None)).items():
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        page, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert page == "docs/operations.md" and anchor in anchors, (name, anchor)
        assert rule["annotations"]["summary"], name
