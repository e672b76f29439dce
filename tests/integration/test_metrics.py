"""The job's own metrics, scraped from the Prometheus endpoint of a running job (mini-cluster, the
reporter on loopback; docs/operations.md, "Metrics"), against what the job wrote to its topics, in
both execution modes; and a real Prometheus server (Debian's package) scraping that endpoint, which
must hold every documented metric as a number and every series the alert rules and the dashboard
select (the Helm chart's rules for 1-minute slots, its grafana-dashboard.json), scraping the job as the
chart's deployment (the scrape job and namespace the rules and the dashboard select)."""

from __future__ import annotations

import http.client
import json
import math
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from pwevent.jobs.common.reasons import Reason
from pwevent.jobs.streaming.loopback import free_loopback_port
from pwevent.jobs.streaming.produce import produce_files
from tests.deploy.chart import CHART, NAMESPACE, RELEASE, rule_groups
from tests.integration.conftest import SEED, SLOT_MS, TEST_ORIGIN_MS, check_releases, generate

pytestmark = [pytest.mark.kafka, pytest.mark.flink]

SAMPLE = re.compile(r'^(flink_\w+?pwevent_(\w+))\{([^}]*)\}\s+(\S+)$')
REPO = Path(__file__).resolve().parents[2]
PREFIX = "flink_taskmanager_job_task_operator_pwevent_"
#: A series selector in a PromQL expression: a metric name with its optional label matchers.
SELECTOR = re.compile(r'\b(up|flink_\w+)(\{[^}]*\})?')
#: How often `scrape` asks an endpoint that closed the connection without an answer.
SCRAPE_TRIES = 5


def scrape(port: int, keep: Path | None = None) -> dict[str, list[tuple[dict[str, str], float]]]:
    """pwevent metric name -> [(labels, value)] from the endpoint. A metric in a key/value group
    (`add_group("kind", "publish").counter("releases")`) is named with the key (`kind_releases`) and
    labelled with the value (`kind="publish"`) by Flink's Prometheus reporter. A scrape the endpoint
    ends without an answer (seen once, three test workers beside a loaded job) is asked again, up to
    `SCRAPE_TRIES` times, as Prometheus scrapes again at its next interval."""
    for attempt in range(1, SCRAPE_TRIES + 1):
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            break
        except (http.client.RemoteDisconnected, ConnectionResetError):
            if attempt == SCRAPE_TRIES:
                raise
            time.sleep(0.5)
    if keep is not None:
        keep.write_text(text)
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(3)))
            out[match.group(2)].append((labels, float(match.group(4))))
    return out


def total(metrics: dict[str, Any], name: str, **where: str) -> float:
    return sum(v for labels, v in metrics.get(name, []) if all(labels.get(k) == w for k, w in where.items()))


def documented_metrics() -> list[str]:
    """The metric names of docs/operations.md's table under "## Metrics"."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text[text.index("\n## Metrics\n"):].split("\n## ", 2)[1]
    return re.findall(r"^\| `(\w+)` \|", section, re.M)


#: The chart's rules for the test's 1-minute slots.
RULES_OVERLAY = "1-minute-values.yaml"


def dashboard_queries() -> list[str]:
    """The dashboard's queries with its variables set to the deployment the test scrapes."""
    dashboard = json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    return [target["expr"].replace("$namespace", NAMESPACE).replace("$job", RELEASE)
            for panel in dashboard["panels"] for target in panel.get("targets", [])]


def watched_selectors() -> set[str]:
    """Every series selector of the alert rules and of the dashboard's queries."""
    rules = rule_groups(RULES_OVERLAY)
    exprs = [r["expr"] for group in rules["groups"] for r in group["rules"]] + dashboard_queries()
    return {name + (labels or "") for expr in exprs for name, labels in SELECTOR.findall(expr)}


@contextmanager
def prometheus_server(folder: Path, target_port: int) -> Iterator[Any]:
    """A Prometheus server on a free loopback port, storing under `folder`, scraping the job's
    reporter every second as the chart's deployment (scrape job RELEASE, label namespace NAMESPACE)
    with the chart's rules loaded; yields a function PromQL -> result vector. Stopped by its pid when
    the block ends."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus not on PATH: deploy/local/setup.sh --tests installs Debian's prometheus package"
    port = free_loopback_port()
    (folder / "rules.yml").write_text(yaml.safe_dump(rule_groups(RULES_OVERLAY)))
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "rule_files": [str(folder / "rules.yml")],
              "scrape_configs": [{"job_name": RELEASE,
                                  "static_configs": [{"targets": [f"127.0.0.1:{target_port}"],
                                                      "labels": {"namespace": NAMESPACE}}]}]}
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = open(folder / "prometheus.log", "wb")
    server = subprocess.Popen([binary, f"--config.file={folder / 'prometheus.yml'}",
                               f"--storage.tsdb.path={folder / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                              stdout=log, stderr=subprocess.STDOUT)

    def query(promql: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        answer = json.load(urllib.request.urlopen(url, timeout=10))
        assert answer["status"] == "success", (promql, answer)
        return list(answer["data"]["result"])

    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, (folder / "prometheus.log").read_text()[-3000:]
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, "prometheus not ready in 60 s"
                time.sleep(0.5)
        yield query
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
        log.close()


def check_prometheus_holds_the_metrics(query: Any, metrics: dict[str, Any]) -> None:
    """Every documented metric is in Prometheus as a finite number, each summing to what the
    endpoint itself shows (`metrics`, whose values the test checks against the topics), the rules'
    recorded lag too, every series the rules and the dashboard select exists, and every dashboard
    query is answered. Polled until scraped (bounded)."""
    def sums() -> dict[str, float]:  # NaN for a metric without series
        out = {}
        for name in documented_metrics():
            samples = query(PREFIX + name)
            out[name] = sum(float(sample["value"][1]) for sample in samples) if samples else math.nan
        return out

    expected = {name: total(metrics, name) for name in documented_metrics()}
    assert "kind_releases" in expected and "watermark_ms" in expected, expected  # the table was found
    selectors = sorted(watched_selectors()) + ["pwevent:watermark_lag_seconds"]
    deadline = time.monotonic() + 60
    while True:
        found, missing = sums(), [promql for promql in selectors if not query(promql)]
        if (found == expected and not missing) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert found == expected and not missing, (found, expected, missing)
    for promql in selectors:
        values = [float(sample["value"][1]) for sample in query(promql)]
        assert all(math.isfinite(v) for v in values), (promql, values)
    for promql in dashboard_queries():
        query(promql)  # asserts the status: success


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_running_job_exports_its_privacy_metrics(streaming_job: Any, mode: str) -> None:
    slots, users = 5, 20
    port = free_loopback_port()
    job = streaming_job("PBA", {"flink": {"execution_mode": mode,
                                          "prometheus": {"port": str(port)}}})
    events, requirements = generate(job.folder, users=users, slots=slots)
    with open(events, "a") as handle:  # dead letters of two reasons
        handle.write('not json\n{"user": "u1", "time": "2024-01-01T00:00:30Z"}\n')
    produce_files(job.kafka, job.config, events, requirements, 0.0)
    with prometheus_server(job.folder, port) as query:
        job.start(seed=SEED)
        releases = job.wait_releases(slots, timeout=240)
        by_slot = check_releases(releases, slots)
        kinds = Counter(r["kind"] for r in releases)

        # The counters are updated when a slot is decided, before its release commits: poll until they
        # account for every committed release (bounded; no assertion on time).
        deadline = time.monotonic() + 60
        metrics = scrape(port)
        while total(metrics, "kind_releases") < len(releases) and time.monotonic() < deadline:
            time.sleep(1.0)
            metrics = scrape(port)
        metrics = scrape(port, job.folder / "metrics.txt")
        # the schedule goes on releasing (a slot a minute): what the scrape saw lies between the
        # releases committed before it and those committed after it
        after = {r["slot"]: r for r in (m.json() for m in job.read("releases", idle_s=1.0))}
        check_prometheus_holds_the_metrics(query, metrics)
        dead = Counter(m.json()["reason"] for m in job.read("dead_letters", idle_s=1.0))
        job.stop()

    for kind in ("publish", "skip", "nullify"):
        assert total(metrics, "kind_releases", kind=kind) >= kinds[kind], (kind, metrics.get("kind_releases"))
    decided = total(metrics, "kind_releases")  # every slot decided once, none twice
    assert max(by_slot) <= decided <= max(after) + 1, (max(by_slot), decided, max(after))
    assert total(metrics, "registered_users") == users
    assert total(metrics, "ledger_classes") >= 1
    assert total(metrics, "last_decided_slot") == decided
    if decided in after:
        assert total(metrics, "obs_threshold_milli") == round((after[decided]["threshold"] or 0.0) * 1000)
    assert total(metrics, "watermark_ms") >= (decided - 1) * SLOT_MS + TEST_ORIGIN_MS
    buckets = metrics["window_budget_utilisation_ppm"]
    assert sorted(labels["window"] for labels, _ in buckets) == ["w1000_up", "w100_999", "w10_99", "w1_9"], buckets
    assert all(0 <= v <= 1_000_000 for _, v in buckets), buckets
    # the synthetic users' w = 40: only that bucket spends
    assert [labels["window"] for labels, v in buckets if v > 0] == ["w10_99"], buckets
    # Against what the job wrote to its dead-letter topic (on a loaded machine a starved partition can
    # close a slot early and make records late: the counts must say so too).
    want = dead
    assert want["unparsable"] == 1 and want["missing_field"] == 1, want
    reasons = {labels["reason"] for labels, _ in metrics["reason_dead_letters"]}
    for reason in reasons:
        assert total(metrics, "reason_dead_letters", reason=reason) == want.get(reason, 0), reason
    assert total(metrics, "late_records") == want.get("late", 0)
    # Every reason is registered, at zero until it happens (so a rate alert has a series to watch).
    assert total(metrics, "reason_dead_letters", reason=Reason.TOO_FAR_AHEAD.value) == 0
    assert len(reasons) >= 15
