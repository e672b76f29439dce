#!/usr/bin/env bash
# Build the Flink lib folder of a local job that exports Prometheus metrics on one address
# (jobs/streaming/jvm-metrics: Flink's Prometheus reporter bound to a host, loopback by default):
#   <cache>/flink-lib-<digest>/   links to PyFlink's lib/*.jar, the stock Prometheus reporter jar of
#                                 PyFlink's plugins/metrics-prometheus, and ours (pwevent-prometheus.jar)
# and print that path. The local job starts PyFlink's gateway with FLINK_LIB_DIR set to it: the
# mini-cluster finds reporters on its class path only (it loads no plugins folder). Quick when
# nothing changed. Needs javac (Java 17).
#   PWEVENT_CACHE  cache dir (default <repo>/.cache/jars)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${PWEVENT_CACHE:-$REPO_ROOT/.cache/jars}"
SRC="$REPO_ROOT/jobs/streaming/jvm-metrics"
PY="${PWEVENT_VENV_PYTHON:-$REPO_ROOT/.venv/bin/python}"
command -v javac >/dev/null || { echo "build-metrics-lib: javac not found on PATH" >&2; exit 1; }

pyflink="$("$PY" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))')"
stock="$(ls "$pyflink"/plugins/metrics-prometheus/flink-metrics-prometheus-*.jar | head -n 1)"
digest="$( (cd "$SRC" && find . -type f | sort | xargs sha256sum; echo "$pyflink") | sha256sum | cut -c1-16)"
out="$CACHE/flink-lib-$digest"
if [[ ! -d "$out" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  javac -Xlint:all,-processing -Werror --release 17 -d "$work/classes" -cp "$pyflink/lib/*:$stock" $(find "$SRC" -name '*.java')
  cp -r "$SRC/META-INF" "$work/classes/"
  mkdir -p "$work/lib"
  jar --create --file "$work/lib/pwevent-prometheus.jar" -C "$work/classes" .
  ln -s "$stock" "$work/lib/"
  for jar in "$pyflink"/lib/*.jar; do ln -s "$jar" "$work/lib/"; done
  mkdir -p "$CACHE"
  mv "$work/lib" "$out"
fi
echo "$out"
