"""The jars of a Maven repository the job and the wheel's build use, pinned by version and SHA-256, and
their download (jobs/streaming/jars.py says where each goes). Standard library only: `setup.py` loads
this file by its path to fetch the jars the JVM classes compile against, in a build environment that
has none of pwevent's dependencies."""

from __future__ import annotations

import hashlib
import os
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


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
#: Flink's S3 file system on Presto's S3 client (schemes s3:// and s3p://; Flink's advice for
#: checkpoints), loaded as a plugin. 2.2.0: Maven Central has no 2.2.1 of it (PyFlink's is 2.2.1);
#: a plugin sees only Flink's stable file system API, which a patch release keeps.
S3_FS_PLUGIN = MavenJar("org.apache.flink", "flink-s3-fs-presto", "2.2.0",
                        "f5aa119d94e55dff89641649a1bc61f3da172a3b445f425c6866d336a4afc320")
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


#: AWS's AWS_MSK_IAM mechanism, not used as published: deploy/local/build-msk-iam.sh builds it with its
#: dependencies relocated into the connector's namespace (jobs/streaming/jvm-msk-iam/pom.xml names the
#: same version) after checking this SHA-256 of the published jar.
AWS_MSK_IAM = MavenJar("software.amazon.msk", "aws-msk-iam-auth", "2.4.0",
                       "8d81eb3a8dbe4a041269e860a5e4b48891c3db2959d768b4715381bec78d97c3")


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
