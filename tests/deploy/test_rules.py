"""The alert rules (deploy/kubernetes/prometheus-rule.yaml, and pwevent-rules.yml for a Prometheus
without the operator) with Debian's promtool: `promtool check rules`, and `promtool test rules` with
input series that make each alert fire and, in a healthy run and just below each threshold, stay
quiet. Mutated rules must fail those tests (docs/operations.md, "Alert rules")."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "kubernetes"
OPERATIONS = REPO / "docs" / "operations.md"
P = "flink_taskmanager_job_task_operator_pwevent_"
JOB = 'job_name="pwevent_PBD"'

#: A running, healthy job, sampled every minute for 130 minutes: a slot decided every minute, event
#: time at the wall clock, half the budget used, 0.1 dead letters per second, nothing late.
HEALTHY = {
    f'{P}kind_releases{{kind="publish"}}': "0+1x130",
    f"{P}watermark_ms": "0+60000x130",
    f'{P}level_budget_utilisation_ppm{{level="w40_eps0_6"}}': "500000x130",
    f'{P}reason_dead_letters{{reason="unparsable"}}': "0+6x130",
    f'{P}reason_dead_letters{{reason="unauthenticated_requirement"}}': "0x130",
    f"{P}late_records": "0x130",
    'up{job="pwevent", instance="10.0.0.7:9249"}': "1x130",
    f"flink_jobmanager_job_numRestarts{{{JOB}}}": "0x130",
    f"flink_jobmanager_job_numberOfFailedCheckpoints{{{JOB}}}": "0x130",
}

#: alert -> (series replacing HEALTHY's, minute it is expected firing, its labels besides the
#: rule's, minute it must still be quiet (before `for` has elapsed, or just below the threshold)).
FIRING: dict[str, tuple[dict[str, str], int, dict[str, str], int]] = {
    "PweventJobDown": ({f'{P}kind_releases{{kind="publish"}}': "0+1x10 stale"}, 20, {}, 14),
    "PweventMetricsTargetDown": ({'up{job="pwevent", instance="10.0.0.7:9249"}': "1x10 0x20"}, 20,
                                 {"job": "pwevent", "instance": "10.0.0.7:9249"}, 13),
    "PweventNoRelease": ({f'{P}kind_releases{{kind="publish"}}': "0+1x10 10x20"}, 20, {}, 14),
    "PweventWatermarkLag": ({f"{P}watermark_ms": "0+60000x10 600000x30"}, 40, {}, 24),
    "PweventBudgetPinned": ({f'{P}level_budget_utilisation_ppm{{level="w40_eps0_6"}}': "1000000x130"}, 125,
                            {"level": "w40_eps0_6"}, 110),
    "PweventDeadLetterRate": ({f'{P}reason_dead_letters{{reason="unparsable"}}': "0+120x40"}, 30,
                              {"reason": "unparsable"}, 8),
    "PweventLateRecords": ({f"{P}late_records": "0x10 1x30"}, 20, {}, 10),
    "PweventUnauthenticatedRequirement": (
        {f'{P}reason_dead_letters{{reason="unauthenticated_requirement"}}': "0x10 1x30"}, 20, {}, 10),
    "PweventRestarting": ({f"flink_jobmanager_job_numRestarts{{{JOB}}}": "0x10 1x30"}, 15,
                          {"job_name": "pwevent_PBD"}, 10),
    "PweventCheckpointsFailing": ({f"flink_jobmanager_job_numberOfFailedCheckpoints{{{JOB}}}": "0x10 2x30"}, 15,
                                  {"job_name": "pwevent_PBD"}, 10),
}

#: Just below a threshold, all the time: quiet. (Budget: one slot with 1 % left in the 120 minutes.)
NEAR_MISSES = {
    "PweventBudgetPinned": {f'{P}level_budget_utilisation_ppm{{level="w40_eps0_6"}}': "1000000x60 990000 1000000x69"},
    "PweventDeadLetterRate": {f'{P}reason_dead_letters{{reason="unparsable"}}': "0+60x130"},
    "PweventWatermarkLag": {f"{P}watermark_ms": "-540000+60000x130"},
}


def rule_file() -> dict[str, Any]:
    return dict(yaml.safe_load((K8S / "pwevent-rules.yml").read_text()))


def alerts(rules: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for group in rules["groups"] for r in group["rules"] if "alert" in r}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    assert tool, "promtool not on PATH: deploy/local/setup.sh --tests installs Debian's prometheus package"
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False)


def unit_tests(rules: dict[str, Any]) -> dict[str, Any]:
    """promtool's test file: the healthy run with every alert quiet, then one run per alert that
    makes it fire (and shows it quiet before), and the near misses."""
    by_name = alerts(rules)

    def series(changes: dict[str, str]) -> list[dict[str, str]]:
        return [{"series": name, "values": values} for name, values in {**HEALTHY, **changes}.items()]

    def quiet(minute: int, names: list[str]) -> list[dict[str, Any]]:
        return [{"eval_time": f"{minute}m", "alertname": name, "exp_alerts": []} for name in names]

    tests = [{"interval": "1m", "input_series": series({}), "alert_rule_test": quiet(30, list(by_name))
              + quiet(125, list(by_name))}]
    for name, (changes, minute, labels, before) in FIRING.items():
        rule = by_name[name]
        fired = {"exp_labels": {**rule.get("labels", {}), **labels}, "exp_annotations": rule["annotations"]}
        tests.append({"interval": "1m", "input_series": series(changes), "alert_rule_test": quiet(before, [name])
                      + [{"eval_time": f"{minute}m", "alertname": name, "exp_alerts": [fired]}]})
    for name, changes in NEAR_MISSES.items():
        tests.append({"interval": "1m", "input_series": series(changes),
                      "alert_rule_test": quiet(FIRING[name][1], [name]) + quiet(125, [name])})
    return {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}


def run_unit_tests(rules: dict[str, Any], folder: Path) -> subprocess.CompletedProcess[str]:
    (folder / "rules.yml").write_text(yaml.safe_dump(rules))
    (folder / "tests.yml").write_text(yaml.safe_dump(unit_tests(rules), width=200))
    return promtool("test", "rules", "tests.yml", cwd=folder)


def test_the_plain_rules_file_is_the_prometheus_rule_spec() -> None:
    (rule,) = [doc for doc in yaml.safe_load_all((K8S / "prometheus-rule.yaml").read_text()) if doc]
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"] == rule_file()


def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(K8S / "pwevent-rules.yml"), cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in rule_file()['groups'])} rules found" in done.stdout


def test_every_alert_fires_on_its_series_and_stays_quiet_otherwise(tmp_path: Path) -> None:
    rules = rule_file()
    assert set(FIRING) == set(alerts(rules))  # every alert has its firing run
    done = run_unit_tests(rules, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def mutate(rules: dict[str, Any], name: str, expr: str) -> dict[str, Any]:
    mutated = json.loads(json.dumps(rules))
    alerts(mutated)[name]["expr"] = expr
    return mutated


@pytest.mark.parametrize("name", sorted(FIRING))
def test_an_alert_that_never_fires_or_always_fires_fails_the_rule_tests(name: str, tmp_path: Path) -> None:
    """The rule tests can fail: each alert's firing run catches a rule that never fires, and its
    quiet evaluations catch one that always does."""
    for expr in ("vector(1) == 0", "vector(1)"):
        done = run_unit_tests(mutate(rule_file(), name, expr), tmp_path)
        assert done.returncode != 0 and name in done.stdout + done.stderr, (expr, done.stdout)


def test_the_job_down_alert_needs_absent(tmp_path: Path) -> None:
    """Without `absent()` the rule watches a series that is gone when the job is down."""
    rules = rule_file()
    expr = alerts(rules)["PweventJobDown"]["expr"]
    inner = re.fullmatch(r"absent\((.+)\)", expr)
    assert inner, expr
    done = run_unit_tests(mutate(rules, "PweventJobDown", inner.group(1)), tmp_path)
    assert done.returncode != 0 and "PweventJobDown" in done.stdout + done.stderr, done.stdout


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_alert_has_a_severity_and_a_runbook_section() -> None:
    anchors = {slug(line.lstrip("#")) for line in OPERATIONS.read_text().splitlines() if line.startswith("#")}
    for name, rule in alerts(rule_file()).items():
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        page, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert page == "docs/operations.md" and anchor in anchors, (name, anchor)
        assert rule["annotations"]["summary"], name
