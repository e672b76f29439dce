"""The jars the job adds to Flink: the Kafka connector, the job's own JVM classes, and, for
OAUTHBEARER only, Jackson and jose4j (docs/streaming.md, "Installing from the wheel"; docs/architecture.md,
"Dependencies"; docs/operations.md, "Security").

- The Flink SQL Kafka connector, one self-contained jar of a pinned version. In a checkout
  `deploy/local/fetch-jars.sh` fetches it (with the broker's jars) through Maven; installed, it is
  downloaded from Maven Central (or `$PWEVENT_MAVEN_REPOSITORY`) into the user cache on first use and
  checked against the SHA-256 pinned here; `$PWEVENT_KAFKA_CONNECTOR_JAR` names a jar to use instead.
- Jackson (databind, core, annotations) and jose4j, which the connector leaves out and its
  relocated Kafka client's OAUTHBEARER login needs unrelocated (the token's JSON; the token
  validator classes of the client-credentials login): downloaded like the connector, pinned by
  SHA-256, when `kafka.security` uses OAUTHBEARER.
- Flink's Avro format jar (`flink-sql-avro`, self-contained): its relocated Apache Avro decodes Avro
  events in the JVM (jobs/streaming/jvm/pwevent/flink/avro/AvroFields.java); fetched like the connector
  (`fetch-jars.sh` in a checkout, else Maven Central, pinned by SHA-256) when the events are Avro.
- Flink's S3 file system (`flink-s3-fs-presto`) for a local run whose state is on an object store:
  downloaded like the connector (Maven Central, pinned by SHA-256) into a plugins folder of its own,
  which the run's JVM loads it from (jobs/streaming/object_store.py; docs/operations.md,
  "Checkpoints and savepoints on an object store").
- The job's JVM classes (jobs/streaming/jvm): the wheel carries them compiled (`setup.py` runs
  `deploy/local/build-jvm.sh` when it builds the wheel), so an installed job needs no JDK; a checkout
  compiles them on first use and after every change of the sources, with the same script.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from pwevent.jobs.streaming.kafka_security import KafkaSecurity
from pwevent.jobs.streaming.locations import JVM_JAR_IN_PACKAGE, PACKAGE_ROOT, checkout, jar_cache

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
#: Where the wheel's build (and the workers' copy, locations.python_root) puts the compiled JVM classes.
PACKAGED_JVM_JAR = PACKAGE_ROOT / JVM_JAR_IN_PACKAGE


class JarError(RuntimeError):
    """A jar the job needs is missing and cannot be fetched or built; the message says what to do."""


@dataclass(frozen=True)
class MavenJar:
    """One jar of a Maven repository, pinned by version and SHA-256."""

    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    def url(self, repository: str) -> str:
        folder = f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}"
        return f"{repository.rstrip('/')}/{folder}/{self.file_name}"


#: Must match FLINK_CONNECTOR in deploy/local/fetch-jars.sh (tests/streaming/test_jars.py checks).
KAFKA_CONNECTOR = MavenJar("org.apache.flink", "flink-sql-connector-kafka", "5.0.0-2.2",
                           "5605c691d11a501382c383fecba37a7a552467da5ab7ba904ef5d6f3d62c5616")
#: Must match FLINK_AVRO in deploy/local/fetch-jars.sh (tests/streaming/test_jars.py checks).
FLINK_AVRO = MavenJar("org.apache.flink", "flink-sql-avro", "2.1.0",
                      "32c898a913615429a80b8cdcb1b93616bdb3a083363eb997d2b278d4eee62370")
#: Jackson and jose4j for the connector's OAUTHBEARER login (the versions the Kafka 4.4 broker's POM
#: resolves): the unsecured login needs Jackson, the client-credentials login both.
OAUTHBEARER_JARS = (
    MavenJar("com.fasterxml.jackson.core", "jackson-databind", "2.21.7",
             "1290c2795e93e8a6861a6c4d9ff0d844d32f5ea178362cb2721edf5561e828b1"),
    MavenJar("com.fasterxml.jackson.core", "jackson-core", "2.21.7",
             "8c5623b98f32d5f7e1287ff61ed50e08ab7b11381e991fff89327faabba42261"),
    MavenJar("com.fasterxml.jackson.core", "jackson-annotations", "2.21",
             "53ca085f4a150f703f49e1aabd935bd03b43e1ea3d55d135438292af22cef56b"),
    MavenJar("org.bitbucket.b_c", "jose4j", "0.9.6",
             "7314af50cde9c99e8eaf43eee617a23edcc6bb43036221064355094999d837ef"),
)

#: Flink's S3 file system on Presto's S3 client (schemes s3:// and s3p://; Flink's advice for
#: checkpoints), loaded as a plugin. 2.2.0: Maven Central has no 2.2.1 of it (PyFlink's is 2.2.1);
#: a plugin sees only Flink's stable file system API, which a patch release keeps.
S3_FS_PLUGIN = MavenJar("org.apache.flink", "flink-s3-fs-presto", "2.2.0",
                        "f5aa119d94e55dff89641649a1bc61f3da172a3b445f425c6866d336a4afc320")


def maven_repository() -> str:
    """Where jars are downloaded from: $PWEVENT_MAVEN_REPOSITORY, else Maven Central."""
    return os.environ.get("PWEVENT_MAVEN_REPOSITORY") or MAVEN_CENTRAL


def download(jar: MavenJar, folder: Path, repository: str, timeout_s: float = 60.0) -> Path:
    """`jar` in `folder`, downloaded from `repository` unless already there; a download whose SHA-256
    differs from the pinned one is refused and nothing is kept."""
    target = folder / jar.file_name
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f"{jar.file_name}.part{os.getpid()}"
    url = jar.url(repository)
    print(f"pwevent: downloading {url} into {folder}", file=sys.stderr)
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response, partial.open("wb") as out:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != jar.sha256:
            raise JarError(f"{url}: SHA-256 {digest.hexdigest()} is not the pinned {jar.sha256}; not used")
        partial.replace(target)
    except (urllib.error.URLError, OSError) as err:
        raise JarError(f"cannot download {url}: {err}. Set $PWEVENT_MAVEN_REPOSITORY to a reachable Maven mirror, "
                       "or download the jar by hand and name it in the variable its docs give "
                       "($PWEVENT_KAFKA_CONNECTOR_JAR, $PWEVENT_FLINK_AVRO_JAR)") from None
    finally:
        partial.unlink(missing_ok=True)
    return target


def _flink_jar(artifact: MavenJar, override: str) -> Path:
    """A jar the job puts beside Flink: `$override` when set (a file), else the cached copy, fetched on
    first use (by deploy/local/fetch-jars.sh in a checkout, else from Maven Central or
    $PWEVENT_MAVEN_REPOSITORY)."""
    if os.environ.get(override):
        jar = Path(os.environ[override])
        if not jar.is_file():
            raise JarError(f"${override}: no file {jar}")
        return jar
    folder = jar_cache() / "flink"
    repo = checkout()
    if repo is not None and not (folder / artifact.file_name).is_file():
        subprocess.run([str(repo / "deploy" / "local" / "fetch-jars.sh")], check=True, stdout=subprocess.DEVNULL)
    return download(artifact, folder, maven_repository())


def connector_jar() -> Path:
    """The Flink Kafka connector jar: $PWEVENT_KAFKA_CONNECTOR_JAR, else the cached one, fetched on first use."""
    return _flink_jar(KAFKA_CONNECTOR, "PWEVENT_KAFKA_CONNECTOR_JAR")


def avro_jar() -> Path:
    """Flink's Avro format jar (the JVM decoding of Avro events): $PWEVENT_FLINK_AVRO_JAR (the container
    image), else the cached one, fetched on first use."""
    return _flink_jar(FLINK_AVRO, "PWEVENT_FLINK_AVRO_JAR")


#: With OAUTHBEARER these load once per JVM, from the parent class loader: the relocated Kafka client
#: registers its SASL client as a JVM-wide security provider, so the copy of a second user-code class
#: loader (a mini-cluster's JobManager and TaskManager have one each) is handed the first copy's SASL
#: client, which refuses its callback handler ("Callback handler must be castable to ...").
PARENT_FIRST_KEY = "classloader.parent-first-patterns.additional"
OAUTHBEARER_PARENT_FIRST = "org.apache.flink.kafka.shaded.org.apache.kafka.;com.fasterxml.jackson.;org.jose4j."


def security_jars(security: KafkaSecurity) -> list[Path]:
    """The jars the Java clients need besides the connector for `security`: Jackson and jose4j
    for OAUTHBEARER, none otherwise; fetched into the jar cache on first use."""
    if not (security.sasl and security.sasl_mechanism == "OAUTHBEARER"):
        return []
    return [download(jar, jar_cache() / "flink", maven_repository()) for jar in OAUTHBEARER_JARS]


def s3_plugins_dir() -> Path:
    """A Flink plugins folder holding the S3 file system (`s3-fs-presto/<jar>`), fetched into the
    jar cache on first use: what a local run's JVM loads it from ($FLINK_PLUGINS_DIR)."""
    root = jar_cache() / "flink-plugins"
    download(S3_FS_PLUGIN, root / "s3-fs-presto", maven_repository())
    return root


def jvm_jar() -> Path:
    """The job's JVM classes: the prebuilt jar named by $PWEVENT_JVM_JAR (the container image,
    deploy/kubernetes/Dockerfile), else compiled from a checkout's sources (cached by their digest),
    else the jar the wheel carries."""
    prebuilt = os.environ.get("PWEVENT_JVM_JAR")
    if prebuilt:
        if not Path(prebuilt).is_file():
            raise JarError(f"$PWEVENT_JVM_JAR: no file {prebuilt}")
        return Path(prebuilt)
    repo = checkout()
    if repo is not None:
        built = subprocess.run([str(repo / "deploy" / "local" / "build-jvm.sh")], check=True, capture_output=True,
                               text=True, env={**os.environ, "PWEVENT_VENV_PYTHON": sys.executable})
        return Path(built.stdout.strip().splitlines()[-1])
    if PACKAGED_JVM_JAR.is_file():
        return PACKAGED_JVM_JAR
    raise JarError(f"{PACKAGED_JVM_JAR} is missing: this installation was built without the job's JVM classes. "
                   "Build the wheel from a checkout set up by deploy/local/setup.sh (docs/streaming.md, "
                   "'Installing from the wheel')")


def metrics_lib() -> Path:
    """PyFlink's lib folder plus the job's loopback Prometheus reporter (jobs/streaming/jvm-metrics),
    built into the jar cache on first use; a checkout only (docs/operations.md, "Metrics")."""
    repo = checkout()
    if repo is None:
        raise JarError("flink.prometheus on the local run needs a checkout (deploy/local/build-metrics-lib.sh "
                       "builds the reporter); on a cluster configure Flink's own reporter instead "
                       "(docs/operations.md, 'Metrics')")
    built = subprocess.run([str(repo / "deploy" / "local" / "build-metrics-lib.sh")], check=True, capture_output=True,
                           text=True, env={**os.environ, "PWEVENT_VENV_PYTHON": sys.executable})
    return Path(built.stdout.strip().splitlines()[-1])
