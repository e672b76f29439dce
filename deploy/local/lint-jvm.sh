#!/usr/bin/env bash
# Lint the project's Java (jobs/streaming/jvm, jvm-test, jvm-metrics, benchmarks/*.java and
# deploy/local/*.java) with Checkstyle and the rules of deploy/local/checkstyle.xml. Maven fetches
# Checkstyle and its dependencies into the jar cache on first use. Exit status: non-zero on any
# violation. deploy/local/lint.sh runs it after ruff and mypy.
#   PWEVENT_CACHE   cache dir (default <repo>/.cache/jars)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${PWEVENT_CACHE:-$REPO_ROOT/.cache/jars}"
# the newest Checkstyle that runs on Java 17 (13.x needs Java 21)
VERSION="12.3.1"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

die() { echo "lint-jvm: $*" >&2; exit 1; }
command -v java >/dev/null || die "java not found on PATH"

jars="$CACHE/checkstyle-$VERSION"
if [[ ! -f "$jars/checkstyle-$VERSION.jar" ]]; then
  command -v mvn >/dev/null || die "mvn not found on PATH"
  # Maven Central has no self-contained Checkstyle jar: copy the jar and its runtime dependencies,
  # named in a throwaway pom, into a folder of their own.
  fetch="$(mktemp -d)"
  trap 'rm -rf "$fetch"' EXIT
  cat >"$fetch/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>local</groupId><artifactId>checkstyle-fetch</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies><dependency>
    <groupId>com.puppycrawl.tools</groupId><artifactId>checkstyle</artifactId><version>$VERSION</version>
  </dependency></dependencies>
</project>
EOF
  (cd "$fetch" && mvn -q -B "$DEP_PLUGIN:copy-dependencies" -DincludeScope=runtime -DoutputDirectory="$fetch/jars" \
    >"$fetch/mvn.log" 2>&1) || { cat "$fetch/mvn.log" >&2; die "could not fetch com.puppycrawl.tools:checkstyle:$VERSION"; }
  mkdir -p "$CACHE"
  rm -rf "$jars"
  mv "$fetch/jars" "$jars"
fi

cd "$REPO_ROOT"
java -cp "$jars/*" com.puppycrawl.tools.checkstyle.Main -c deploy/local/checkstyle.xml \
  jobs/streaming/jvm jobs/streaming/jvm-test jobs/streaming/jvm-metrics benchmarks/*.java deploy/local/*.java
