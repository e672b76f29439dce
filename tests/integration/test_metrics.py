"""The job's own metrics, scraped from the Prometheus endpoint of a running job (mini-cluster, the
reporter on loopback; docs/operations.md, "Metrics"), against what the job wrote to its topics."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from pwevent.jobs.streaming.produce import produce_files
from tests.integration.conftest import SEED, SLOT_MS, check_releases, generate

pytestmark = [pytest.mark.kafka, pytest.mark.flink]

SAMPLE = re.compile(r'^(flink_\w+?pwevent_(\w+))\{([^}]*)\}\s+(\S+)$')


def scrape(port: int, keep: Path | None = None) -> dict[str, list[tuple[dict[str, str], float]]]:
    """pwevent metric name -> [(labels, value)] from the endpoint. A metric in a key/value group
    (`add_group("kind", "publish").counter("releases")`) is named with the key (`kind_releases`) and
    labelled with the value (`kind="publish"`) by Flink's Prometheus reporter."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_running_job_exports_its_privacy_metrics(streaming_job: Any) -> None:
    slots, users = 5, 20
    port = free_port()
    job = streaming_job("PBA", {"flink": {"close_after": "1s", "source_idleness": "3s",
                                          "prometheus": {"port": str(port)}}})
    events, requirements = generate(job.folder, users=users, slots=slots)
    with open(events, "a") as handle:  # dead letters of two reasons
        handle.write('not json\n{"user": "u1", "time": "2024-01-01T00:00:30Z"}\n')
    produce_files(job.kafka, job.config, events, requirements, 0.0)
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
    dead = Counter(m.json()["reason"] for m in job.read("dead_letters", idle_s=1.0))
    job.stop()

    for kind in ("publish", "skip", "nullify"):
        assert total(metrics, "kind_releases", kind=kind) >= kinds[kind], (kind, metrics.get("kind_releases"))
    assert total(metrics, "kind_releases") == max(by_slot)  # every slot decided once, none twice
    assert total(metrics, "registered_users") == users
    assert total(metrics, "ledger_classes") >= 1
    assert total(metrics, "last_decided_slot") == max(by_slot)
    last = by_slot[max(by_slot)]
    assert total(metrics, "obs_threshold_milli") == round((last["threshold"] or 0.0) * 1000)
    assert total(metrics, "watermark_ms") >= (max(by_slot) - 1) * SLOT_MS + 1_704_067_200_000
    levels = metrics["level_budget_utilisation_ppm"]
    assert levels and all(0 <= v <= 1_000_000 for _, v in levels), levels
    assert all(labels["level"].startswith("w40_") for labels, _ in levels), levels  # the synthetic users' w
    assert any(v > 0 for _, v in levels)
    # Against what the job wrote to its dead-letter topic (on a loaded machine a starved partition can
    # close a slot early and make records late: the counts must say so too).
    want = dead
    assert want["unparsable"] == 1 and want["missing_field"] == 1, want
    reasons = {labels["reason"] for labels, _ in metrics["reason_dead_letters"]}
    for reason in reasons:
        assert total(metrics, "reason_dead_letters", reason=reason) == want.get(reason, 0), reason
    assert total(metrics, "late_records") == want.get("late", 0)
    # Every reason is registered, at zero until it happens (so a rate alert has a series to watch).
    assert total(metrics, "reason_dead_letters", reason="too_far_ahead") == 0
    assert len(reasons) >= 15
