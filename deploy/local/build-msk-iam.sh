#!/usr/bin/env bash
# Build AWS's aws-msk-iam-auth relocated into the Flink Kafka connector's namespace (the AWS_MSK_IAM
# SASL mechanism of the job's Java clients; docs/operations.md, "Security"): Maven's shade plugin on
# jobs/streaming/jvm-msk-iam/pom.xml, with the library's dependencies (the AWS SDK's auth, STS, SSO)
# in the same jar and org.apache.kafka relocated to org.apache.flink.kafka.shaded.org.apache.kafka.
# The published jar Maven resolves must have the SHA-256 pinned in jobs/streaming/maven_jars.py
# (AWS_MSK_IAM), else nothing is built. Prints the jar's path:
#   <cache>/msk-iam/pwevent-msk-iam-<version>-<digest>.jar   (digest: of the POM and the pin)
# Quick when it is there. Needs mvn (Maven Central, or the mirror of ~/.m2/settings.xml) and Java 17.
#   PWEVENT_CACHE  cache dir (default <repo>/.cache/jars)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${PWEVENT_CACHE:-$REPO_ROOT/.cache/jars}"
POM="$REPO_ROOT/jobs/streaming/jvm-msk-iam/pom.xml"
die() { echo "build-msk-iam: $*" >&2; exit 1; }
command -v mvn >/dev/null || die "mvn not found on PATH"

# The pin: group, artifact, version and SHA-256 of maven_jars.AWS_MSK_IAM (standard library only).
read -r group artifact version sha256 < <(python3 - "$REPO_ROOT/jobs/streaming/maven_jars.py" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("maven_jars", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules["maven_jars"] = module  # dataclasses looks its module up
spec.loader.exec_module(module)
jar = module.AWS_MSK_IAM
print(jar.group, jar.artifact, jar.version, jar.sha256)
PY
)
grep -q "<artifactId>$artifact</artifactId>" "$POM" && grep -q "<version>$version</version>" "$POM" \
  || die "$POM does not build $artifact $version (the pin of jobs/streaming/maven_jars.py)"
digest="$( (cat "$POM"; echo "$sha256") | sha256sum | cut -c1-16)"
out="$CACHE/msk-iam/pwevent-msk-iam-$version-$digest.jar"
if [[ ! -f "$out" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  cp "$POM" "$work/pom.xml"
  mvn -q -B -f "$work/pom.xml" package >"$work/mvn.log" 2>&1 \
    || { grep -a ERROR "$work/mvn.log" | sed 's/\x1b\[[0-9;]*m//g' | head -n 3 >&2; die "mvn package failed"; }
  repo_local="$(mvn -q -B -Dstyle.color=never -f "$work/pom.xml" help:evaluate -Dexpression=settings.localRepository \
    -DforceStdout 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g')"
  published="$repo_local/${group//.//}/$artifact/$version/$artifact-$version.jar"
  [[ -f "$published" ]] || die "the published $artifact-$version.jar is not in $repo_local"
  got="$(sha256sum "$published" | cut -d' ' -f1)"
  [[ "$got" == "$sha256" ]] || die "$published: SHA-256 $got is not the pinned $sha256; not used"
  mkdir -p "$(dirname "$out")"
  mv "$work/target/pwevent-msk-iam-$version.jar" "$out.part$$" && mv "$out.part$$" "$out"
fi
echo "$out"
