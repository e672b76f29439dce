"""The Helm chart deploy/helm/pwevent, rendered by `helm template` with its defaults and with each
overlay of its `ci/` folder (tests/deploy/chart.py), and the image it runs (deploy/kubernetes): every
custom resource against its operator's CRD schema (the Flink Kubernetes Operator's FlinkDeployment,
the Prometheus Operator's PodMonitor and PrometheusRule; the CRDs are committed in tests/deploy/data/
at pinned releases, tests/deploy/data/SOURCES), the core kinds (NetworkPolicy, Job, ConfigMaps)
against what they must select and hold, the job's configuration against the job's own check, and
every path, entry point, secret reference and setting against the package and the image
(docs/kubernetes.md). No cluster or container engine."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import distribution, version
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from pwevent.jobs.common.config import ConfigError, parse_config
from pwevent.jobs.streaming.flink_config import flink_configuration
from pwevent.jobs.streaming.job import refuse_insecure_randomness
from pwevent.jobs.streaming.settings import OWNED_FLINK_KEYS, stream_settings
from tests.deploy.chart import CHART, OVERLAYS, RELEASE, helm, job_yaml, one, render, template_args

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "kubernetes"
DATA = Path(__file__).resolve().parent / "data"
#: Keys the cluster sets for the job's Python: the entry point leaves them to `flink run` / the operator.
CLUSTER_SET = {"python.executable", "python.client.executable"}
#: kind -> the CRD file in DATA.
CUSTOM = {"FlinkDeployment": "flinkdeployments.flink.apache.org-v1.yml",
          "PodMonitor": "monitoring.coreos.com_podmonitors.yaml",
          "PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml"}
#: The chart's value sets the tests render: the defaults (None) and every overlay of ci/.
VALUES = [None, *OVERLAYS]


def dockerfile() -> str:
    return (K8S / "Dockerfile").read_text()


def structural(schema: Any) -> Any:
    """The CRD's openAPIV3Schema as JSON Schema: `x-kubernetes-*` markers dropped, and objects with
    declared properties closed (Kubernetes prunes unknown fields silently; here they are errors),
    except where the CRD preserves unknown fields."""
    if isinstance(schema, list):
        return [structural(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: structural(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if "properties" in schema and "additionalProperties" not in schema \
            and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.cache
def crd_validator(kind: str) -> Draft202012Validator:
    """A validator of `kind` from its committed CRD: the served storage version's schema, with the
    resource's apiVersion and kind fixed."""
    crd = yaml.load((DATA / CUSTOM[kind]).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert crd["spec"]["names"]["kind"] == kind
    (served,) = [v for v in crd["spec"]["versions"] if v["served"] and v["storage"]]
    schema = structural(served["schema"]["openAPIV3Schema"])
    schema["properties"].update({"apiVersion": {"const": f"{crd['spec']['group']}/{served['name']}"},
                                 "kind": {"const": kind}, "metadata": {"type": "object"}})
    return Draft202012Validator(schema)


def test_the_crds_are_the_pinned_releases() -> None:
    """Each committed CRD is the file of SOURCES (its sha256); the FlinkDeployment's is operator
    1.13.0's, the lowest release whose CRD knows Flink 2.2 (docs/kubernetes.md)."""
    sources = {}
    for line in (DATA / "SOURCES").read_text().splitlines():
        if line and not line.startswith("#"):
            name, digest, release, commit, _path = line.split()
            sources[name] = (digest, release, commit)
    assert set(sources) == set(CUSTOM.values())
    for name, (digest, _, commit) in sources.items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
        assert re.fullmatch(r"[0-9a-f]{40}", commit), name
    assert sources[CUSTOM["FlinkDeployment"]][1] == "apache/flink-kubernetes-operator@release-1.13.0"
    assert "v2_2" in crd_validator("FlinkDeployment").schema["properties"]["spec"]["properties"]["flinkVersion"]["enum"]


@pytest.mark.parametrize("overlay", VALUES)
def test_helm_lints_the_chart(overlay: str | None) -> None:
    files = ["--values", str(CHART / "ci" / overlay)] if overlay else []
    done = helm("lint", "--strict", str(CHART), *files)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("overlay", VALUES)
@pytest.mark.parametrize("kind", sorted(CUSTOM))
def test_each_custom_resource_is_valid_against_its_crd(kind: str, overlay: str | None) -> None:
    manifest = one(render(overlay), kind)
    errors = sorted(crd_validator(kind).iter_errors(manifest), key=lambda e: list(e.path))
    assert not errors, [f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors]


#: (kind, path under spec, wrong value): a misspelled field, a wrong type, an unknown enum value.
MISTAKES = [
    ("FlinkDeployment", ("job", "upgradeModes"), "savepoint"),
    ("FlinkDeployment", ("job", "upgradeMode"), "rolling"),
    ("FlinkDeployment", ("job", "parallelism"), "two"),
    ("FlinkDeployment", ("taskManager", "resource", "memory"), 4096),
    ("FlinkDeployment", ("jobManager", "replicas"), "one"),
    ("FlinkDeployment", ("flinkVersion",), "v2_9"),
    ("PodMonitor", ("podMetricsEndpoint",), []),
    ("PodMonitor", ("podMetricsEndpoints", 0, "port"), 9249),
    ("PodMonitor", ("selector", "matchLabel"), {"app": "pwevent"}),
    ("PrometheusRule", ("groups", 0, "rules", 1, "labels", "severity"), 2),
    ("PrometheusRule", ("groups", 0, "rule"), []),
]


@pytest.mark.parametrize(("kind", "path", "value"), MISTAKES)
def test_the_schema_check_catches_mistakes(kind: str, path: tuple[Any, ...], value: Any) -> None:
    """The check can fail: each mistake of MISTAKES makes the resource invalid."""
    broken = json.loads(json.dumps(one(render(), kind)))
    target = broken["spec"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert list(crd_validator(kind).iter_errors(broken)), path


@pytest.mark.parametrize(("assignment", "message"), [
    ("upgradeMode=stateless", "upgradeMode: stateless starts the job without its state"),
    ("upgradeMode=rolling", "upgradeMode: rolling is not savepoint or last-state"),
    ("storage.type=nfs", "storage.type: nfs is not s3 or volume"),
    ("job.slot=15 minutes", 'job.slot: "15 minutes" is not a duration'),
    ("job.config.flink.parallelism=3", "job.config.flink.parallelism: the chart sets it"),
    ("job.config.slot=1m", "job.config.slot: set it in the chart's own values"),
])
def test_the_chart_refuses_values_naming_the_field(assignment: str, message: str) -> None:
    done = helm(*template_args(None, assignment))
    assert done.returncode != 0 and message in done.stderr, done.stderr


@pytest.mark.usefixtures("secret_env")
def test_the_job_refuses_a_stateless_upgrade_mode_in_its_own_configuration() -> None:
    """The chart renders the upgrade mode into job.yaml (flink.upgrade_mode); a copy of the
    configuration edited to `stateless` fails the job's start, naming the field."""
    config = job_yaml(render(None))
    assert config["flink"]["upgrade_mode"] == one(render(None), "FlinkDeployment")["spec"]["job"]["upgradeMode"]
    config["flink"]["upgrade_mode"] = "stateless"
    with pytest.raises(ConfigError, match=r"flink\.upgrade_mode: stateless starts the job without its state"):
        stream_settings(parse_config(config), "/opt/pwevent/config")


def secret_refs(pod: dict[str, Any], container: str | None = None) -> dict[str, tuple[str, str]]:
    """Environment variable -> (Secret, key) of a pod's container (the main container of a Flink pod)."""
    (main,) = [c for c in pod["containers"] if c["name"] == (container or c["name"])]
    refs = {variable["name"]: variable["valueFrom"]["secretKeyRef"] for variable in main.get("env", [])
            if "valueFrom" in variable}
    return {name: (ref["name"], ref["key"]) for name, ref in refs.items()}


def deployment_pod(docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    return dict(one(docs, "FlinkDeployment")["spec"]["podTemplate"]["spec"])


def topics_pod(docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    return dict(one(docs, "Job")["spec"]["template"]["spec"])


def named_variables(text: str, config: dict[str, Any]) -> set[str]:
    """The environment variables a job configuration names: `${NAME}` and the signature's key_env."""
    signature = (config.get("requirements") or {}).get("signature")
    return set(re.findall(r"\$\{(\w+)\}", text)) | ({signature["key_env"]} if signature else set())


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every variable the chart's pods get from a Secret, set to a stand-in value."""
    for overlay in VALUES:
        docs = render(overlay)
        for variable in {**secret_refs(deployment_pod(docs), "flink-main-container"), **secret_refs(topics_pod(docs))}:
            monkeypatch.setenv(variable, f"stand-in-{variable}")


@pytest.mark.parametrize("overlay", VALUES)
def test_every_secret_the_configurations_name_comes_from_a_secret_reference(overlay: str | None) -> None:
    """`${NAME}` and the signature's key_env in job.yaml are set from Secrets on the job's pods, and in
    topics.yaml on the topic Job; the topic Job connects as the administrator with its own Secret and
    gets none of the job's. The chart renders no Secret: it only refers to them."""
    docs = render(overlay)
    job_text = one(docs, "ConfigMap", f"{RELEASE}-job-config")["data"]["job.yaml"]
    topics_text = one(docs, "ConfigMap", f"{RELEASE}-topics-config")["data"]["topics.yaml"]
    job_refs = secret_refs(deployment_pod(docs), "flink-main-container")
    topic_refs = secret_refs(topics_pod(docs))
    storage = {name for name in job_refs if name.startswith("AWS_")}
    assert named_variables(job_text, yaml.safe_load(job_text)) == set(job_refs) - storage
    assert named_variables(topics_text, yaml.safe_load(topics_text)) == set(topic_refs)
    assert not set(job_refs.values()) & set(topic_refs.values())
    assert not [doc for doc in docs if doc["kind"] == "Secret"]
    topics_security = yaml.safe_load(topics_text)["kafka"]["security"]
    job_security = yaml.safe_load(job_text)["kafka"]["security"]
    if job_security["protocol"].startswith("SASL_"):
        assert (job_security["username"], topics_security["username"]) == ("pwevent-job", "pwevent-admin")
        assert topic_refs == {"PWEVENT_KAFKA_ADMIN_PASSWORD": ("pwevent-kafka-admin", "password")}
    else:
        assert topic_refs == {} and "username" not in job_security


def test_the_network_policy_admits_the_deployment_the_operator_and_prometheus() -> None:
    """It selects the pods of the FlinkDeployment (Flink labels them `app: <name>`), lets them reach
    each other on every port, and opens only the REST port (to the operator) and the metrics port
    (to Prometheus, the PodMonitor's port) beside that."""
    docs = render(None)
    policy = one(docs, "NetworkPolicy")
    assert policy["apiVersion"] == "networking.k8s.io/v1"
    deployment = one(docs, "FlinkDeployment")
    app = {"app": deployment["metadata"]["name"]}
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": app} and spec["policyTypes"] == ["Ingress"]
    peers = [rule for rule in spec["ingress"] if "ports" not in rule]
    assert peers == [{"from": [{"podSelector": {"matchLabels": app}}]}]
    ports = sorted(port["port"] for rule in spec["ingress"] for port in rule.get("ports", []))
    metrics = int(deployment["spec"]["flinkConfiguration"]["metrics.reporter.prom.port"])
    rest = int(deployment["spec"]["flinkConfiguration"].get("rest.port", 8081))
    assert ports == sorted([rest, metrics])
    monitor = one(docs, "PodMonitor")["spec"]
    container = deployment["spec"]["podTemplate"]["spec"]["containers"][0]
    (endpoint,) = monitor["podMetricsEndpoints"]
    assert {"name": endpoint["port"], "containerPort": metrics} in container["ports"]
    assert monitor["selector"]["matchLabels"] == {**app, "type": "flink-native-kubernetes"}
    assert monitor["jobLabel"] == "app"
    # The label keys and the type are the ones Flink's native Kubernetes support sets on its pods.
    lib = Path(importlib.import_module("pyflink").__file__).parent / "lib"
    dist = lib / f"flink-dist-{version('apache-flink')}.jar"
    constants = zipfile.ZipFile(dist).read("org/apache/flink/kubernetes/utils/Constants.class")
    assert all(word in constants for word in (b"LABEL_APP_KEY", b"flink-native-kubernetes"))


def mount_of(spec: dict[str, Any], volume: str) -> str:
    (container,) = [c for c in spec["containers"] if c["name"] == "flink-main-container"] or spec["containers"]
    (mount,) = [m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume]
    return str(mount)


def check_storage(docs: tuple[dict[str, Any], ...], flink_conf: dict[str, str]) -> None:
    """Checkpoints, savepoints and HA under one root: the object store through Flink's S3 plugin of
    this Flink version, with credentials from a Secret, or the shared volume mounted where the paths
    point."""
    pod = deployment_pod(docs)
    env = {variable["name"]: variable for variable in pod["containers"][0].get("env", [])}
    keys = ("high-availability.storageDir", "execution.checkpointing.dir", "execution.checkpointing.savepoint-dir")
    if flink_conf["execution.checkpointing.dir"].startswith("s3://"):
        root = f"s3://pwevent/{RELEASE}"
        assert {flink_conf[key] for key in keys} == {f"{root}/ha", f"{root}/checkpoints", f"{root}/savepoints"}
        assert env["ENABLE_BUILT_IN_PLUGINS"]["value"] == f"flink-s3-fs-hadoop-{version('apache-flink')}.jar"
        assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= set(env)
        assert not [doc for doc in docs if doc["kind"] == "PersistentVolumeClaim"]
    else:
        volumes = {v["name"]: v for v in pod["volumes"]}
        claim = one(docs, "PersistentVolumeClaim")
        assert volumes["flink-data"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        assert "ReadWriteMany" in claim["spec"]["accessModes"]
        data = mount_of(pod, "flink-data")
        assert all(flink_conf[key].startswith(f"file://{data}/") for key in keys)
        assert "ENABLE_BUILT_IN_PLUGINS" not in env


@pytest.mark.parametrize("overlay", VALUES)
@pytest.mark.usefixtures("secret_env")
def test_the_rendered_deployment_agrees_with_the_job_and_the_image(overlay: str | None) -> None:
    docs = render(overlay)
    deployment = one(docs, "FlinkDeployment")["spec"]
    job, flink_conf = deployment["job"], deployment["flinkConfiguration"]
    docker = dockerfile()
    # The job's own configuration: accepted, and its paths and parallelism are the deployment's.
    settings = stream_settings(parse_config(job_yaml(docs)), "/opt/pwevent/config")
    assert settings.flink.checkpoint_dir == flink_conf["execution.checkpointing.dir"]
    assert settings.flink.parallelism == job["parallelism"]
    assert settings.flink.upgrade_mode == job["upgradeMode"]
    owned = flink_configuration(settings, None)
    for key, value in flink_conf.items():
        if key in OWNED_FLINK_KEYS and key not in CLUSTER_SET:
            assert owned[key] == value, (key, value, owned[key])
    assert owned["execution.checkpointing.num-retained"] == flink_conf["execution.checkpointing.num-retained"]
    assert settings.kafka.security.ca_file is None  # the defaults and overlays trust the image's store
    check_storage(docs, flink_conf)
    assert flink_conf["high-availability.type"] == "kubernetes"
    # The entry point: Flink's Python driver running the job module with the mounted configuration.
    assert job["entryClass"] == "org.apache.flink.client.python.PythonDriver"
    args = job["args"]
    module = args[args.index("-pym") + 1]
    spec = importlib.util.find_spec(module)
    assert spec is not None and callable(importlib.import_module(module).main)
    config_path = args[args.index("--config") + 1]
    volumes = {v["name"]: v for v in deployment["podTemplate"]["spec"]["volumes"]}
    assert Path(config_path).parent == Path(mount_of(deployment["podTemplate"]["spec"], "job-config"))
    config_map = one(docs, "ConfigMap", volumes["job-config"]["configMap"]["name"])
    assert Path(config_path).name in config_map["data"]
    # The image: Flink and the driver jar of the installed apache-flink version, the venv the
    # deployment runs, the jars the entry point finds.
    flink_version = version("apache-flink")
    assert re.search(rf"^ARG FLINK_IMAGE=flink:{re.escape(flink_version)}-", docker, re.M)
    assert job["jarURI"] == f"local:///opt/flink/opt/flink-python-{flink_version}.jar"
    python = "/opt/pwevent/venv/bin/python"
    assert f"uv venv --python 3.11 {python.removesuffix('/bin/python')}" in docker
    assert flink_conf["python.executable"] == flink_conf["python.client.executable"] == python
    assert args[args.index("-pyexec") + 1] == args[args.index("-pyclientexec") + 1] == python
    jvm_jar = re.search(r"PWEVENT_JVM_JAR=(\S+)", docker)
    assert jvm_jar and f"COPY --from=jvm /build/pwevent-jvm.jar {jvm_jar.group(1)}" in docker
    connector = (REPO / "deploy" / "local" / "fetch-jars.sh").read_text()
    connector_version = re.search(r"flink-sql-connector-kafka:([\w.-]+)\"", connector)
    assert connector_version and f"ARG KAFKA_CONNECTOR={connector_version.group(1)}" in docker
    for source in re.findall(r"^COPY (?!--)(.+) \S+$", docker, re.M):  # build context paths exist
        for path in source.split():
            assert (REPO / path).exists(), path
    # Metrics: the stock reporter (its plugin ships in the Flink distribution of this version, as in
    # PyFlink's copy of it), on the port the pods expose and announce for scraping.
    factory = flink_conf["metrics.reporter.prom.factory.class"]
    plugin = Path(importlib.import_module("pyflink").__file__).parent / "plugins" / "metrics-prometheus"
    jars = list(plugin.glob("flink-metrics-prometheus-*.jar"))
    assert jars and factory.replace(".", "/") + ".class" in zipfile.ZipFile(jars[0]).namelist()
    port = flink_conf["metrics.reporter.prom.port"]
    assert deployment["podTemplate"]["metadata"]["annotations"]["prometheus.io/port"] == port
    container = deployment["podTemplate"]["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": int(port)} in container["ports"]


@pytest.mark.usefixtures("secret_env")
def test_the_deployment_never_carries_test_randomness() -> None:
    """No seed, no numpy-fast noise and no test switch anywhere in the chart, the image or the
    Kubernetes page; the job's configuration is production noise, which the entry point accepts
    without the switch (docs/streaming.md, "Test randomness")."""
    config = parse_config(job_yaml(render(None)))
    assert config.noise == "opendp"
    refuse_insecure_randomness(config.noise, None, allowed=False)
    paths = [*CHART.rglob("*"), *K8S.rglob("*"), REPO / "docs" / "kubernetes.md"]
    texts = {path: path.read_text() for path in paths if path.is_file()}
    assert [path for path, text in texts.items() if re.search(r"--seed|numpy-fast|test-randomness", text)] == []


@pytest.mark.parametrize("overlay", VALUES)
@pytest.mark.usefixtures("secret_env")
def test_the_topic_job_runs_create_topics_as_the_administrator(overlay: str | None, tmp_path: Path) -> None:
    docs = render(overlay)
    job = topics_pod(docs)
    (container,) = job["containers"]
    command = container["command"]
    assert f"COPY deploy/local/create-topics.py {command[1]}" in dockerfile()
    assert command[0] == "/opt/pwevent/venv/bin/python"
    spec = importlib.util.spec_from_file_location("create_topics", REPO / "deploy" / "local" / "create-topics.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config_path = command[command.index("--job-config") + 1]
    config_mount = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}["topics-config"]
    assert Path(config_path).parent == Path(config_mount)
    config_map = one(docs, "ConfigMap", {v["name"]: v for v in job["volumes"]}["topics-config"]["configMap"]["name"])
    local = tmp_path / Path(config_path).name  # the ConfigMap's file, where this machine can read it
    local.write_text(config_map["data"][Path(config_path).name])
    args = module.parse_args([str(local) if word == config_path else word for word in command[2:]])
    assert module.wanted_topics(args)["pwevent.events"] == 4 and args.replication_factor == 3
    assert args.role_retention
    # The same topics and brokers as the job's.
    kafka = job_yaml(docs)["kafka"]
    assert args.bootstrap == kafka["bootstrap"]
    assert set(module.wanted_topics(args)) == set(kafka["topics"].values())
    # A hook: the topics exist before the FlinkDeployment is applied.
    assert one(docs, "Job")["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert config_map["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"


# Builds the job graph from the deployment's job configuration, as the entry point does (no broker
# is contacted before execution), and lists each stream node's uid; a child process keeps the
# gateway JVM out of pytest.
GRAPH = """
import json, sys, yaml
from pwevent.jobs.common.config import parse_config
from pwevent.jobs.streaming.settings import stream_settings
from pwevent.jobs.streaming.graph import build_pipeline
from pwevent.jobs.streaming.job import make_environment
config = parse_config(yaml.safe_load(sys.argv[1]))
settings = stream_settings(config, "/opt/pwevent/config")
env, t_env = make_environment(settings, None)
build_pipeline(env, t_env, config, settings, None)
graph = env._generate_stream_graph(False)
nodes = [[n.getOperatorName(), n.getTransformationUID()] for n in graph.getStreamNodes().toArray()]
print("NODES " + json.dumps(nodes))
"""


@pytest.mark.flink
@pytest.mark.usefixtures("secret_env")
def test_the_deployment_config_builds_the_job_graph_with_a_uid_on_every_operator(tmp_path: Path) -> None:
    text = one(render(None), "ConfigMap", f"{RELEASE}-job-config")["data"]["job.yaml"]
    done = subprocess.run([sys.executable, "-c", GRAPH, text], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""})
    lines = [line for line in done.stdout.splitlines() if line.startswith("NODES ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    nodes = json.loads(lines[0].removeprefix("NODES "))
    assert any("Population" in name for name, _ in nodes) and any("Window" in name for name, _ in nodes)
    missing = [name for name, uid in nodes if not uid]
    assert not missing, missing
    uids = [uid for _, uid in nodes]
    assert len(set(uids)) == len(uids)


def test_the_image_copies_every_folder_the_package_is_built_from() -> None:
    """`uv pip install /build` builds the package from pyproject.toml, whose dependencies (pydantic
    among them) the image gets that way: every package folder it names must be in /build, or the
    build stops at its metadata step."""
    folders = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values()
    copied = dict(re.findall(r"^COPY (?!--)(\S+) /build/(\S+)$", dockerfile(), re.M))
    assert {folder: copied.get(folder) for folder in folders} == {folder: folder for folder in folders}


# --- the Dockerfile's stages, users and downloads (docs/kubernetes.md, "Building the image") ----------

LOCAL_BASE = K8S / "local-base"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line.strip() else "")
            for line in joined.splitlines() if line.strip()]


def stages(text: str) -> list[list[tuple[str, str]]]:
    """The instructions of each build stage, its FROM first."""
    out: list[list[tuple[str, str]]] = []
    for instruction in instructions(text):
        if instruction[0] == "FROM":
            out.append([])
        if out:
            out[-1].append(instruction)
    return out


def runs_as(stage: list[tuple[str, str]], first_user: str) -> list[tuple[str, str]]:
    """(user, command) of every RUN of a stage whose base image ends as `first_user`."""
    user, out = first_user, []
    for name, args in stage:
        if name == "USER":
            user = args.strip()
        elif name == "RUN":
            out.append((user, args))
    return out


def test_every_run_on_the_flink_base_runs_as_root_and_the_image_ends_as_flink() -> None:
    """Since Flink 2.2 the official image's last instruction is `USER flink` (apache/flink-docker,
    2.2/scala_2.12-java17-ubuntu/Dockerfile); the local base ends the same way. The runtime stage's
    RUNs write under /opt/pwevent, /usr/local and /root: each must run as root, and the image must
    end as the flink user again."""
    base = instructions((LOCAL_BASE / "Containerfile").read_text())
    assert [args for name, args in base if name == "USER"] == ["flink"]
    assert all(user == "root" for user, _ in runs_as(base, first_user="root"))
    flink_stages = [stage for stage in stages(dockerfile()) if stage[0][1].split()[0] == "${FLINK_IMAGE}"]
    runtime = [stage for stage in flink_stages if " AS " not in stage[0][1].upper()]
    assert len(runtime) == 1 and runtime[0] == stages(dockerfile())[-1]
    runs = runs_as(runtime[0], first_user="flink")
    assert runs and all(user == "root" for user, _ in runs), [(user, cmd[:60]) for user, cmd in runs if user != "root"]
    assert runtime[0][-1] == ("USER", "flink")
    # The check itself: the stage as it was (no USER root) is caught.
    broken = [(name, args) for name, args in runtime[0] if (name, args) != ("USER", "root")]
    assert any(user != "root" for user, _ in runs_as(broken, first_user="flink"))


@pytest.mark.parametrize(("variable", "artifact", "target"), [
    ("KAFKA_CONNECTOR", "flink-sql-connector-kafka", "/build/connector.jar"),
    ("FLINK_AVRO", "flink-sql-avro", "/build/flink-avro.jar")])
def test_the_downloaded_jars_are_verified_against_a_pinned_sha512(variable: str, artifact: str, target: str) -> None:
    """The connector and Flink's Avro jar come from Maven Central and are checked against the SHA-512
    pinned in the Dockerfile before anything uses them; a pin is the SHA-512 of the jar whose SHA-1
    Maven Central publishes (the one named in the Dockerfile) and of the jar fetch-jars.sh cached
    for the local runs."""
    docker = dockerfile()
    version = re.search(rf"^ARG {variable}=(\S+)$", docker, re.M)
    pinned = re.search(rf"^ARG {variable}_SHA512=([0-9a-f]{{128}})$", docker, re.M)
    published_sha1 = re.search(rf"{artifact}-\S+\.jar \(Maven Central publishes only a \.sha1 for it,\s*#\s*"
                               r"([0-9a-f]{40})", docker)
    assert version and pinned and published_sha1
    (jvm,) = [stage for stage in stages(docker) if stage[0][1].upper().endswith(" AS JVM")]
    assert re.search(r"^ARG MAVEN_REPOSITORY=https://repo1\.maven\.org/maven2$", docker, re.M)
    assert ("ARG", "MAVEN_REPOSITORY") in jvm
    url = f"${{MAVEN_REPOSITORY}}/org/apache/flink/{artifact}/${{{variable}}}/{artifact}-${{{variable}}}.jar"
    download = jvm.index(("ADD", f"{url} {target}"))
    check = download + 1  # the RUN right after the download checks it
    assert jvm[check][0] == "RUN"
    assert f'echo "${{{variable}_SHA512}}  {target}" | sha512sum --check --strict -' in jvm[check][1]
    assert ("ARG", f"{variable}_SHA512") in jvm
    assert all(target not in args for name, args in jvm[:download] if name == "RUN")
    cached = REPO / ".cache" / "jars" / "flink" / f"{artifact}-{version.group(1)}.jar"
    assert cached.is_file(), f"no {cached}: run deploy/local/setup.sh (fetch-jars.sh)"
    data = cached.read_bytes()
    assert hashlib.sha1(data).hexdigest() == published_sha1.group(1)
    assert hashlib.sha512(data).hexdigest() == pinned.group(1)


def test_the_image_carries_one_copy_of_flinks_jars() -> None:
    """PyFlink's pip packages carry the Flink distribution's jars a second time; the RUN that installs
    the project removes every folder of theirs that holds a jar (in the same RUN: a later one would
    not shrink the image), and nothing points PyFlink back at its own copy (FLINK_HOME stays the base
    image's /opt/flink)."""
    (install,) = [args for name, args in stages(dockerfile())[-1] if name == "RUN" and "/build[" in args]
    site = re.search(r"pyflink=(\S+/site-packages/pyflink)", install)
    assert site and site.group(1) == "/opt/pwevent/venv/lib/python3.11/site-packages/pyflink"
    removed = [path.replace('"$pyflink/', "").rstrip('"') for path in re.findall(r'"\$pyflink/[^"]+"', install)]
    assert re.search(r"rm -rf " + re.escape(" ".join(f'"$pyflink/{path}"' for path in removed)), install)
    jars = []
    for dist in ("apache-flink", "apache-flink-libraries"):
        files = distribution(dist).files or []
        jars += [str(f) for f in files if str(f).endswith(".jar")]
    assert any(jar.startswith("pyflink/lib/flink-dist-") for jar in jars)
    kept = [jar for jar in jars if not any(jar == f"pyflink/{p}" or jar.startswith(f"pyflink/{p}/") for p in removed)]
    assert not kept, kept
    assert not re.search(r"^ENV\b.*\bFLINK_HOME=", dockerfile(), re.M)
    assert "ENV FLINK_HOME=/opt/flink" in (LOCAL_BASE / "Containerfile").read_text()


def test_the_local_base_has_the_official_layout() -> None:
    """What the job image and the operator rely on: /opt/flink as FLINK_HOME and working directory,
    the system user flink with uid and gid 9999 and that home, the entry point and its default."""
    base = instructions((LOCAL_BASE / "Containerfile").read_text())
    text = " ".join(f"{name} {args}" for name, args in base)
    assert "groupadd --system --gid=9999 flink" in text
    assert "useradd --system --home-dir $FLINK_HOME --uid=9999 --gid=flink flink" in text
    assert ("WORKDIR", "$FLINK_HOME") in base and ("COPY", "docker-entrypoint.sh /") in base
    assert base[-3:] == [("ENTRYPOINT", '["/docker-entrypoint.sh"]'), ("EXPOSE", "6123 8081"), ("CMD", '["help"]')]


@pytest.fixture
def fake_flink(tmp_path: Path) -> Path:
    """A FLINK_HOME whose scripts print how they were called."""
    home = tmp_path / "flink"
    (home / "bin").mkdir(parents=True)
    (home / "conf").mkdir()
    for script in ("config-parser-utils.sh", "jobmanager.sh", "standalone-job.sh", "taskmanager.sh",
                   "historyserver.sh"):
        path = home / "bin" / script
        path.write_text(f'#!/usr/bin/env bash\necho "{script} $*" >>"$FLINK_HOME/calls"\n')
        path.chmod(0o755)
    return home


def entrypoint(home: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    done = subprocess.run([str(LOCAL_BASE / "docker-entrypoint.sh"), *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "FLINK_HOME": str(home), "DISABLE_JEMALLOC": "true", **env})
    calls = (home / "calls").read_text().splitlines() if (home / "calls").exists() else []
    (home / "calls").unlink(missing_ok=True)
    return done, calls


def test_the_local_entry_point_starts_each_process_as_the_official_one_does(fake_flink: Path) -> None:
    parser = f"config-parser-utils.sh {fake_flink}/conf {fake_flink}/bin {fake_flink}/lib"
    done, calls = entrypoint(fake_flink, "standalone-job", "--job-classname", "C", "-pym", "m",
                             JOB_MANAGER_RPC_ADDRESS="jm.example", TASK_MANAGER_NUMBER_OF_TASK_SLOTS="2",
                             FLINK_PROPERTIES="rest.port: 9000\n\n blob.server.port: ${BLOB}\n", BLOB="7000")
    assert done.returncode == 0, done.stderr
    assert calls == [f"{parser} -Djobmanager.rpc.address=jm.example -Dblob.server.port=6124 -Dquery.server.port=6125 "
                     "-Dtaskmanager.numberOfTaskSlots=2",
                     f"{parser} -Drest.port=9000 -Dblob.server.port=7000",  # after the image's own: these win
                     "standalone-job.sh start-foreground --job-classname C -pym m"]
    for command, script in (("jobmanager", "jobmanager.sh"), ("taskmanager", "taskmanager.sh"),
                            ("history-server", "historyserver.sh")):
        done, calls = entrypoint(fake_flink, command, "-Dx=y", JOB_MANAGER_RPC_ADDRESS="jm")
        assert done.returncode == 0 and calls[-1] == f"{script} start-foreground -Dx=y", (command, calls)
    done, calls = entrypoint(fake_flink, "help", JOB_MANAGER_RPC_ADDRESS="jm")
    assert done.returncode == 0 and "Usage:" in done.stdout and "standalone-job" in done.stdout
    done, calls = entrypoint(fake_flink, "sh", "-c", "echo passed through", JOB_MANAGER_RPC_ADDRESS="jm")
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "passed through"
    done, _ = entrypoint(fake_flink, "jobmanager", JOB_MANAGER_RPC_ADDRESS="jm", ENABLE_BUILT_IN_PLUGINS="none.jar")
    assert done.returncode == 1 and "Plugin none.jar does not exist" in done.stdout


def test_the_pods_run_as_the_images_flink_user_with_volumes_it_can_write() -> None:
    """The image ends as `flink`, uid and gid 9999 (the official image's and the local base's): the pod
    template runs as that user, and fsGroup makes mounted volumes (the checkpoints) writable by it."""
    base = (K8S / "local-base" / "Containerfile").read_text()
    assert "--gid=9999 flink" in base and "--uid=9999" in base
    context = deployment_pod(render(None))["securityContext"]
    assert context == {"runAsUser": 9999, "runAsGroup": 9999, "fsGroup": 9999}
    assert topics_pod(render(None))["securityContext"] == {"runAsUser": 9999, "runAsGroup": 9999}


def test_the_image_installs_the_project_with_the_stream_and_kerberos_extras() -> None:
    """PyFlink is the optional extra `stream` (pyproject.toml): an image installed without it has no job.
    `gssapi` (the extra `kerberos`) is installed before the project, with the build tools it needs
    only in its own RUN, at the version the extra allows."""
    text = (K8S / "Dockerfile").read_text()
    installs = [line for line in text.splitlines() if "uv pip install" in line]
    assert len(installs) == 2, installs
    assert '"/build[stream,kerberos]"' in installs[1], installs
    assert '"gssapi==${GSSAPI}"' in installs[0], installs
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(dep.startswith("apache-flink") for dep in extras["stream"])
    pinned = re.search(r"^ARG GSSAPI=(\S+)$", text, re.M)
    assert pinned and extras["kerberos"] == ["gssapi>=1.8"]
    assert tuple(int(x) for x in pinned.group(1).split(".")) >= (1, 8)
    (build,) = [args for name, args in stages(dockerfile())[-1] if name == "RUN" and "gssapi==" in args]
    assert "apt-get purge" in build and "apt-mark manual $kept libgssapi-krb5-2" in build
