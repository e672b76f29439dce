#!/usr/bin/env bash
# Build the Flink plugins folder of a job that exports Prometheus metrics on one address
# (jobs/streaming/jvm-metrics: Flink's Prometheus reporter bound to a host, loopback by default):
#   <cache>/flink-plugins-<digest>/   PyFlink's own plugin folders (links) plus pwevent-prometheus/
#                                     (the stock reporter jar and ours, one plugin class loader)
# and print that path (the job sets FLINK_PLUGINS_DIR to it). Quick when nothing changed. Needs javac.
#   PWEVENT_CACHE  cache dir (default <repo>/.cache/jars)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${PWEVENT_CACHE:-$REPO_ROOT/.cache/jars}"
SRC="$REPO_ROOT/jobs/streaming/jvm-metrics"
PY="${PWEVENT_VENV_PYTHON:-$REPO_ROOT/.venv/bin/python}"
command -v javac >/dev/null || { echo "build-metrics-plugin: javac not found on PATH" >&2; exit 1; }

pyflink="$("$PY" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))')"
stock="$(ls "$pyflink"/plugins/metrics-prometheus/flink-metrics-prometheus-*.jar | head -n 1)"
digest="$( (cd "$SRC" && find . -type f | sort | xargs sha256sum; echo "$stock") | sha256sum | cut -c1-16)"
out="$CACHE/flink-plugins-$digest"
if [[ ! -d "$out" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  javac -nowarn --release 17 -d "$work/classes" -cp "$pyflink/lib/*:$stock" $(find "$SRC" -name '*.java')
  cp -r "$SRC/META-INF" "$work/classes/"
  mkdir -p "$work/plugins/pwevent-prometheus"
  jar --create --file "$work/plugins/pwevent-prometheus/pwevent-prometheus.jar" -C "$work/classes" .
  cp "$stock" "$work/plugins/pwevent-prometheus/"
  for plugin in "$pyflink"/plugins/*/; do
    name="$(basename "$plugin")"
    [[ "$name" == metrics-prometheus ]] || ln -s "$plugin" "$work/plugins/$name"
  done
  mkdir -p "$CACHE"
  mv "$work/plugins" "$out"
fi
echo "$out"
