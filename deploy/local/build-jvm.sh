#!/usr/bin/env bash
# Compile the job's JVM pieces (jobs/streaming/jvm: the Java operators and SQL functions, in the
# packages pwevent.flink.{time,parsing,avro,membership,counting,release,contract}; docs/architecture.md), with
# every javac lint warning an error, against the venv's Flink, the Kafka connector and Flink's Avro jar, into
#   <cache>/pwevent-jvm-<digest of the sources>.jar
# and print that path. Quick when the sources did not change. Needs javac (Java 17).
#   PWEVENT_CACHE  cache dir (default <repo>/.cache/jars)
#   PWEVENT_VENV_PYTHON  the Python whose PyFlink jars the classes compile against (default
#                        <repo>/.venv/bin/python; the wheel's build, setup.py, passes its own)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${PWEVENT_CACHE:-$REPO_ROOT/.cache/jars}"
SRC="$REPO_ROOT/jobs/streaming/jvm"
PY="${PWEVENT_VENV_PYTHON:-$REPO_ROOT/.venv/bin/python}"
command -v javac >/dev/null || { echo "build-jvm: javac not found on PATH" >&2; exit 1; }

digest="$(cd "$SRC" && find . -name '*.java' | sort | xargs sha256sum | sha256sum | cut -c1-16)"
jar="$CACHE/pwevent-jvm-$digest.jar"
if [[ ! -f "$jar" ]]; then
  # pyflink/lib: of apache-flink, or of apache-flink-libraries alone (the wheel's build; a namespace package)
  flink_lib="$("$PY" -c 'import os, pyflink; print(os.path.join(list(pyflink.__path__)[0], "lib"))')"
  connector="$(ls "$CACHE"/flink/flink-sql-connector-kafka-*.jar | head -n 1)"
# Flink's Avro jar (AvroFields decodes with its Apache Avro): a cache from before it is completed
avro="$(ls "$CACHE"/flink/flink-sql-avro-*.jar 2>/dev/null | head -n 1 || true)"
[[ -n "$avro" ]] || { bash "$REPO_ROOT/deploy/local/fetch-jars.sh" >/dev/null; avro="$(ls "$CACHE"/flink/flink-sql-avro-*.jar | head -n 1)"; }
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  javac -Xlint:all,-processing -Werror --release 17 -d "$work/classes" -cp "$flink_lib/*:$connector:$avro" $(find "$SRC" -name '*.java')
  mkdir -p "$CACHE"
  jar --create --file "$work/out.jar" -C "$work/classes" .
  mv "$work/out.jar" "$jar"
fi
echo "$jar"
