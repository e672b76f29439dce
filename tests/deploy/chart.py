"""The Helm chart deploy/helm/pwevent as the tests see it: rendered by `helm template` (the Helm that
deploy/local/install-helm.sh builds into .cache/bin) with its default values or an overlay under
its `ci/` folder, as a list of manifests. No cluster."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "pwevent"
HELM = REPO / ".cache" / "bin" / "helm"
#: The release and namespace the tests render the chart as: the FlinkDeployment's name, the scrape
#: job and the namespace of every series the alert rules select.
RELEASE = "pwevent"
NAMESPACE = "privacy"
#: The overlays the tests render besides the defaults (the defaults: 15-minute slots, S3 storage,
#: SASL_SSL with signed requirements; the overlay: 1-minute slots, a shared volume, plaintext Kafka).
OVERLAYS = sorted(path.name for path in (CHART / "ci").glob("*-values.yaml"))


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    assert HELM.is_file(), f"no {HELM}: deploy/local/setup.sh builds it (deploy/local/install-helm.sh)"
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=120, check=False)


def template_args(overlay: str | None, *sets: str, release: str = RELEASE) -> list[str]:
    """`helm template`'s arguments for the chart as `release` in NAMESPACE, with an overlay of `ci/`
    and `--set` assignments."""
    files = ["--values", str(CHART / "ci" / overlay)] if overlay else []
    return ["template", release, str(CHART), "--namespace", NAMESPACE, *files,
            *(arg for assignment in sets for arg in ("--set", assignment))]


@functools.cache
def render(overlay: str | None = None, *sets: str, release: str = RELEASE) -> tuple[dict[str, Any], ...]:
    """The manifests of the chart rendered as `release` with its defaults, an overlay and assignments."""
    done = helm(*template_args(overlay, *sets, release=release))
    assert done.returncode == 0, done.stderr
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def one(docs: tuple[dict[str, Any], ...], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one manifest of `kind` (named `name`, if given)."""
    found = [doc for doc in docs if doc["kind"] == kind and name in (None, doc["metadata"]["name"])]
    assert len(found) == 1, (kind, name, [doc["metadata"]["name"] for doc in found])
    return found[0]


def job_yaml(docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    """The job's configuration (job.yaml of the job's ConfigMap)."""
    return dict(yaml.safe_load(one(docs, "ConfigMap", f"{RELEASE}-job-config")["data"]["job.yaml"]))


def rule_groups(overlay: str | None = None, *sets: str, release: str = RELEASE) -> dict[str, Any]:
    """The PrometheusRule's spec: a rules file (`groups:`) for Prometheus' rule_files."""
    return dict(one(render(overlay, *sets, release=release), "PrometheusRule")["spec"])
