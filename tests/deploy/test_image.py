"""The built job image (deploy/local/build-image.sh), where one exists: its file system and its Python,
and (PWEVENT_IMAGE_RUN=1) the application-mode run against a local broker up to a committed release
(deploy/local/build-image-run.sh). Skipped without the image: CI does not build it (docs/kubernetes.md,
"Building the image")."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("PWEVENT_IMAGE", "localhost/pwevent:dev")
STORAGE = Path(os.environ.get("PWEVENT_IMAGE_STORAGE", REPO / ".cache" / "containers"))
BUILDAH = ["buildah", "--root", str(STORAGE / "root"), "--runroot", str(STORAGE / "run")]
SITE = "opt/pwevent/venv/lib/python3.11/site-packages"


def have_image() -> bool:
    if shutil.which("buildah") is None or os.geteuid() != 0 or not STORAGE.exists():
        return False
    found = subprocess.run([*BUILDAH, "inspect", "--type", "image", IMAGE], capture_output=True, timeout=60)
    return found.returncode == 0


pytestmark = pytest.mark.skipif(not have_image(), reason=f"no image {IMAGE} (deploy/local/build-image.sh, as root)")


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    """The image's root file system, mounted read-only through a working container."""
    container = subprocess.run([*BUILDAH, "from", "--pull-never", IMAGE], capture_output=True, text=True,
                               timeout=120, check=True).stdout.strip().splitlines()[-1]
    try:
        mounted = subprocess.run([*BUILDAH, "mount", container], capture_output=True, text=True, timeout=60,
                                 check=True).stdout.strip()
        yield Path(mounted)
    finally:
        subprocess.run([*BUILDAH, "rm", container], capture_output=True, timeout=120, check=False)


def test_the_image_config_runs_as_flink_with_the_official_entry_point() -> None:
    config = json.loads(subprocess.run([*BUILDAH, "inspect", "--type", "image", IMAGE], capture_output=True,
                                       text=True, timeout=60, check=True).stdout)["OCIv1"]["config"]
    assert config["User"] == "flink"
    assert config["Entrypoint"] == ["/docker-entrypoint.sh"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["FLINK_HOME"] == "/opt/flink"
    assert env["PWEVENT_JVM_JAR"] == "/opt/pwevent/lib/pwevent-jvm.jar"
    assert "UV_NATIVE_TLS" not in env  # a build argument only


def test_the_image_file_system(root: Path) -> None:
    """uid 9999; one copy of Flink's jars (none in the venv); the verified connector, readable, in
    /opt/flink/lib; no uv, no compiler; Kerberos' library; the jars and files the manifests name."""
    assert re.search(r"^flink:x:9999:9999::/opt/flink:", (root / "etc" / "passwd").read_text(), re.M)
    venv_jars = [str(p.relative_to(root)) for p in (root / SITE).rglob("*.jar")]
    assert not [jar for jar in venv_jars if "/pyflink/" in jar], venv_jars
    docker = (REPO / "deploy" / "kubernetes" / "Dockerfile").read_text()
    version = re.search(r"^ARG KAFKA_CONNECTOR=(\S+)$", docker, re.M)
    pinned = re.search(r"^ARG KAFKA_CONNECTOR_SHA512=(\S+)$", docker, re.M)
    assert version and pinned
    connector = root / "opt" / "flink" / "lib" / f"flink-sql-connector-kafka-{version.group(1)}.jar"
    assert hashlib.sha512(connector.read_bytes()).hexdigest() == pinned.group(1)
    assert connector.stat().st_mode & 0o444 == 0o444
    lib = sorted(p.name for p in (root / "opt" / "flink" / "lib").glob("*.jar"))
    assert sum(name.startswith("flink-dist-") for name in lib) == 1
    assert not (root / "usr" / "local" / "bin" / "uv").exists()  # mounted for the build steps only
    assert not list((root / "usr" / "bin").glob("gcc*"))  # gssapi's build tools were removed again
    assert (root / "usr" / "lib" / "x86_64-linux-gnu" / "libgssapi_krb5.so.2").exists()  # its runtime library stays
    for path in ("opt/flink/opt/flink-python-2.2.1.jar", "opt/pwevent/lib/pwevent-jvm.jar",
                 "opt/pwevent/create-topics.py", "opt/flink/plugins/metrics-prometheus", "docker-entrypoint.sh"):
        assert (root / path).exists(), path


def run_python(probe: str, *podman_options: str) -> subprocess.CompletedProcess[str]:
    """`python -c probe` in a container of the image (its user, flink), with `podman_options` (no
    network unless they give one)."""
    if shutil.which("podman") is None:
        pytest.skip("podman not installed")
    runtime = shutil.which(os.environ.get("PWEVENT_OCI_RUNTIME", "runc"))
    if runtime is None:
        pytest.skip("runc not installed")
    network = () if "--network" in podman_options else ("--network", "none")
    return subprocess.run(["podman", "--root", str(STORAGE / "root"), "--runroot", str(STORAGE / "run"), "--runtime",
                           runtime, "--cgroup-manager", "cgroupfs", "--events-backend", "file", "run", "--rm",
                           *network, *podman_options, "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
                           IMAGE, "python", "-c", probe], capture_output=True, text=True, timeout=300)


def test_the_image_python_finds_flink_in_opt_flink() -> None:
    """As the flink user in a container: the job module imports and PyFlink's Flink home is /opt/flink."""
    probe = ("import os, pwevent.jobs.streaming.job, pyflink\n"
             "from pyflink.find_flink_home import _find_flink_home\n"
             "own_lib = os.path.join(os.path.dirname(pyflink.__file__), 'lib')\n"
             "print(os.getuid(), _find_flink_home(), os.path.isdir(own_lib))")
    done = run_python(probe)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "9999 /opt/flink False"


def test_the_image_python_logs_in_with_kerberos(tmp_path: Path) -> None:
    """GSSAPI from the image's Python (the extra `kerberos`): as the flink user, pwevent's login from a
    keytab against a KDC on the host's loopback (deploy/local/kdc.sh), then a service ticket for the
    broker's principal, which is what kafka-python's GSSAPI asks the library for."""
    kdc = tmp_path / "kdc"
    script = REPO / "deploy" / "local" / "kdc.sh"
    subprocess.run(["bash", str(script), "start", "--run-dir", str(kdc), "--principals", "pwevent-job kafka/localhost"],
                   check=True, capture_output=True, timeout=120)
    try:
        mounted = tmp_path / "mounted"
        mounted.mkdir(mode=0o755)
        for name in ("krb5.conf", "keytabs/pwevent-job.keytab"):  # readable by the image's user, as a Secret is
            target = mounted / Path(name).name
            target.write_bytes((kdc / name).read_bytes())
            target.chmod(0o644)
        probe = ("import gssapi\n"
                 "from pwevent.jobs.streaming.kafka_kerberos import python_login\n"
                 "python_login('pwevent-job@PWEVENT.LOCAL', '/etc/pwevent/pwevent-job.keytab',\n"
                 "             '/etc/pwevent/krb5.conf')\n"
                 "service = gssapi.Name('kafka@localhost', gssapi.NameType.hostbased_service)\n"
                 "context = gssapi.SecurityContext(name=service, usage='initiate')\n"
                 "token = context.step()\n"
                 "print(gssapi.Credentials(usage='initiate').name, len(token) > 0)")
        done = run_python(probe, "--network", "host", "--volume", f"{mounted}:/etc/pwevent:ro")
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip().splitlines()[-1] == "pwevent-job@PWEVENT.LOCAL True"
        log = (kdc / "kdc.log").read_text(errors="replace")
        assert re.search(r"TGS_REQ .*pwevent-job@PWEVENT\.LOCAL for kafka/localhost@PWEVENT\.LOCAL", log), log[-2000:]
    finally:
        subprocess.run(["bash", str(script), "stop", "--run-dir", str(kdc)], capture_output=True, timeout=60)


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.flink
@pytest.mark.skipif(os.environ.get("PWEVENT_IMAGE_RUN") != "1", reason="PWEVENT_IMAGE_RUN=1 runs the image (~5 min)")
def test_the_image_runs_the_job_in_application_mode_to_a_release(tmp_path: Path) -> None:
    done = subprocess.run([str(REPO / "deploy" / "local" / "build-image-run.sh"), "--image", IMAGE, "--run-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    assert re.search(r"build-image-run: [1-9]\d* committed release\(s\)", done.stdout), done.stdout[-2000:]
