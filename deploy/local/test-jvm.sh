#!/usr/bin/env bash
# Run the JUnit tests of the job's JVM pieces (jobs/streaming/jvm-test, against jobs/streaming/jvm as
# built by build-jvm.sh and the venv's Flink jars) with JUnit's console launcher, which Maven fetches
# into the jar cache on first use. Exit status: the launcher's (non-zero when a test fails or none
# is found). deploy/local/test.sh runs it before pytest.
#   test-jvm.sh --main CLASS [ARG...]   compile the same way, then run CLASS's main (a class of
#                                       jvm-test; stdin and stdout its own) instead of the tests
#   PWEVENT_CACHE   cache dir (default <repo>/.cache/jars)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${PWEVENT_CACHE:-$REPO_ROOT/.cache/jars}"
PY="${PWEVENT_VENV_PYTHON:-$REPO_ROOT/.venv/bin/python}"
LAUNCHER_VERSIONS="1.14.1 6.0.1"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

die() { echo "test-jvm: $*" >&2; exit 1; }
command -v javac >/dev/null || die "javac not found on PATH"

launcher="$(ls "$CACHE"/junit/junit-platform-console-standalone-*.jar 2>/dev/null | head -n 1 || true)"
if [[ -z "$launcher" ]]; then
  command -v mvn >/dev/null || die "mvn not found on PATH"
  mkdir -p "$CACHE/junit"
  for v in $LAUNCHER_VERSIONS; do
    if mvn -q -B "$DEP_PLUGIN:copy" -Dartifact="org.junit.platform:junit-platform-console-standalone:$v" \
        -DoutputDirectory="$CACHE/junit" >"$CACHE/junit/mvn.log" 2>&1; then
      break
    fi
  done
  launcher="$(ls "$CACHE"/junit/junit-platform-console-standalone-*.jar 2>/dev/null | head -n 1 || true)"
  [[ -n "$launcher" ]] || die "could not fetch junit-platform-console-standalone ($LAUNCHER_VERSIONS): $CACHE/junit/mvn.log"
fi

job_jar="$(bash "$REPO_ROOT/deploy/local/build-jvm.sh")"
flink_lib="$("$PY" -c 'import os, pyflink; print(os.path.join(os.path.dirname(pyflink.__file__), "lib"))')"
connector="$(ls "$CACHE"/flink/flink-sql-connector-kafka-*.jar | head -n 1)"
# Flink's Avro jar (AvroFields decodes with its Apache Avro): a cache from before it is completed
avro="$(ls "$CACHE"/flink/flink-sql-avro-*.jar 2>/dev/null | head -n 1 || true)"
[[ -n "$avro" ]] || { bash "$REPO_ROOT/deploy/local/fetch-jars.sh" >/dev/null; avro="$(ls "$CACHE"/flink/flink-sql-avro-*.jar | head -n 1)"; }
# Flink's operator test harness (flink-runtime's test jar, and the latches it uses) of the venv's Flink
flink_version="$(basename "$(ls "$flink_lib"/flink-dist-*.jar | head -n 1)" .jar)"
flink_version="${flink_version#flink-dist-}"
harness=""
for artifact in "flink-runtime:$flink_version:jar:tests" "flink-test-utils-junit:$flink_version"; do
  name="${artifact%%:*}"
  jar="$(ls "$CACHE"/junit/"$name-$flink_version"*.jar 2>/dev/null | head -n 1 || true)"
  if [[ -z "$jar" ]]; then
    command -v mvn >/dev/null || die "mvn not found on PATH"
    mkdir -p "$CACHE/junit"
    mvn -q -B "$DEP_PLUGIN:copy" -Dartifact="org.apache.flink:$artifact" -DoutputDirectory="$CACHE/junit" \
      >"$CACHE/junit/mvn-$name.log" 2>&1 || die "could not fetch org.apache.flink:$artifact: $CACHE/junit/mvn-$name.log"
    jar="$(ls "$CACHE"/junit/"$name-$flink_version"*.jar | head -n 1)"
  fi
  harness="$harness:$jar"
done
# spelled out: the launcher's --class-path takes no wildcards
classpath="$job_jar:$(ls "$flink_lib"/*.jar | tr '\n' ':')$connector:$avro$harness"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# -try: Flink's test harnesses declare close() throws Exception, which try-with-resources warns about
javac -Xlint:all,-processing,-try -Werror --release 17 -d "$work/classes" -cp "$classpath:$launcher" \
  $(find "$REPO_ROOT/jobs/streaming/jvm-test" -name '*.java')
cd "$REPO_ROOT"
if [[ "${1:-}" == "--main" ]]; then
  java -cp "$work/classes:$classpath" "${@:2}"
  exit 0
fi
# A small heap, as a TaskManager may have: a hostile collection length must not need a big one.
java -Xmx256m -jar "$launcher" execute --disable-banner --fail-if-no-tests --details=summary \
  -cp "$work/classes:$classpath" --scan-classpath "$work/classes" \
  --config=junit.platform.output.capture.stdout=true
