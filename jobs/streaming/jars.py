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
- AWS's `aws-msk-iam-auth` for `sasl_mechanism: AWS_MSK_IAM`, with its dependencies and relocated into
  the connector's namespace (the published jar implements Kafka's own classes, which the connector
  relocates): built in a checkout by `deploy/local/build-msk-iam.sh` (Maven's shade plugin; the
  published jar's SHA-256 pinned in maven_jars.AWS_MSK_IAM); `$PWEVENT_MSK_IAM_JAR` names a built one.
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

import os
import subprocess
import sys
from pathlib import Path

from pwevent.jobs.streaming.kafka_security import KafkaSecurity
from pwevent.jobs.streaming.locations import JVM_JAR_IN_PACKAGE, PACKAGE_ROOT, checkout, jar_cache
from pwevent.jobs.streaming.maven_jars import (
    AWS_MSK_IAM,
    FLINK_AVRO,
    KAFKA_CONNECTOR,
    MAVEN_CENTRAL,
    OAUTHBEARER_JARS,
    S3_FS_PLUGIN,
    JarError,
    MavenJar,
    download,
)


def maven_repository() -> str:
    """Where jars are downloaded from: $PWEVENT_MAVEN_REPOSITORY, else Maven Central."""
    return os.environ.get("PWEVENT_MAVEN_REPOSITORY") or MAVEN_CENTRAL


#: Where the wheel's build (and the workers' copy, locations.python_root) puts the compiled JVM classes.
PACKAGED_JVM_JAR = PACKAGE_ROOT / JVM_JAR_IN_PACKAGE


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
#: client, which refuses its callback handler ("Callback handler must be castable to ..."). AWS's
#: IAMLoginModule registers its SASL client JVM-wide too: with AWS_MSK_IAM, the Kafka client and it.
PARENT_FIRST_KEY = "classloader.parent-first-patterns.additional"
OAUTHBEARER_PARENT_FIRST = "org.apache.flink.kafka.shaded.org.apache.kafka.;com.fasterxml.jackson.;org.jose4j."
MSK_IAM_PARENT_FIRST = "org.apache.flink.kafka.shaded.org.apache.kafka.;software.amazon.msk."


def parent_first_patterns(security: KafkaSecurity) -> str | None:
    """`classloader.parent-first-patterns.additional` of a local run whose Java clients use `security`
    (its `security_jars` are then on the gateway's class path, the parent class loader), or None."""
    if not security.sasl:
        return None
    return {"OAUTHBEARER": OAUTHBEARER_PARENT_FIRST, "AWS_MSK_IAM": MSK_IAM_PARENT_FIRST}.get(security.sasl_mechanism)


def prebuilt_jar(variable: str) -> Path | None:
    """The jar the environment variable `variable` names (None when it is unset or empty); JarError
    naming the variable when there is no such file."""
    named = os.environ.get(variable)
    if not named:
        return None
    if not Path(named).is_file():
        raise JarError(f"${variable}: no file {named}")
    return Path(named)


def msk_iam_jar() -> Path:
    """aws-msk-iam-auth relocated into the connector's namespace: $PWEVENT_MSK_IAM_JAR (a built one),
    else built in a checkout by deploy/local/build-msk-iam.sh (cached)."""
    prebuilt = prebuilt_jar("PWEVENT_MSK_IAM_JAR")
    if prebuilt is not None:
        return prebuilt
    repo = checkout()
    if repo is None:
        raise JarError(f"sasl_mechanism AWS_MSK_IAM needs {AWS_MSK_IAM.artifact} {AWS_MSK_IAM.version} relocated into "
                       "the Kafka connector's namespace: build it in a checkout with deploy/local/build-msk-iam.sh and "
                       "name it in $PWEVENT_MSK_IAM_JAR (docs/operations.md, 'Security')")
    built = subprocess.run([str(repo / "deploy" / "local" / "build-msk-iam.sh")], capture_output=True, text=True)
    if built.returncode != 0:
        raise JarError(f"deploy/local/build-msk-iam.sh failed: {built.stderr.strip()[-800:]}")
    return Path(built.stdout.strip().splitlines()[-1])


def security_jars(security: KafkaSecurity) -> list[Path]:
    """The jars the Java clients need besides the connector for `security`: Jackson and jose4j
    for OAUTHBEARER (fetched into the jar cache on first use), then the jars of its own login callback
    handler (`oauth.login_callback_handler.jars`); the relocated aws-msk-iam-auth for AWS_MSK_IAM
    (`msk_iam_jar`); none otherwise."""
    if security.sasl and security.sasl_mechanism == "AWS_MSK_IAM":
        return [msk_iam_jar()]
    if not (security.sasl and security.sasl_mechanism == "OAUTHBEARER"):
        return []
    jars = [download(jar, jar_cache() / "flink", maven_repository()) for jar in OAUTHBEARER_JARS]
    handler = security.oauth.login_callback_handler if security.oauth is not None else None
    return jars + ([Path(jar) for jar in handler.jars] if handler is not None else [])


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
    prebuilt = prebuilt_jar("PWEVENT_JVM_JAR")
    if prebuilt is not None:
        return prebuilt
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
