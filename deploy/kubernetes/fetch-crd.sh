#!/usr/bin/env bash
# Fetch the Flink Kubernetes Operator's FlinkDeployment CRD (its openAPIV3Schema) into the cache, for
# the static check of deploy/kubernetes/flink-deployment.yaml (tests/deploy/test_kubernetes.py).
# The CRD ships inside the operator's API jar on Maven Central; it is fetched like the connector
# jars (Maven, a throwaway POM), never committed. Prints the path of the extracted CRD file.
#   PWEVENT_CACHE              cache dir (default <repo>/.cache/jars)
#   PWEVENT_OPERATOR_VERSION   operator API version (default 1.10.0; 1.11+ did not resolve here)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${PWEVENT_CACHE:-$REPO_ROOT/.cache/jars}"
VERSION="${PWEVENT_OPERATOR_VERSION:-1.10.0}"
ARTIFACT="org.apache.flink:flink-kubernetes-operator-api:$VERSION"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
CRD_ENTRY="META-INF/fabric8/flinkdeployments.flink.apache.org-v1.yml"
OUT_DIR="$CACHE/kubernetes-operator-$VERSION"
CRD="$OUT_DIR/flinkdeployments.flink.apache.org-v1.yml"

die() { echo "fetch-crd: $*" >&2; exit 1; }
if [[ ! -f "$CRD" ]]; then
  command -v mvn >/dev/null || die "mvn not found on PATH"
  command -v unzip >/dev/null || die "unzip not found on PATH"
  WORK="$(mktemp -d)"
  trap 'rm -rf "$WORK"' EXIT
  # `copy` fetches the one artifact without its (large) dependency tree.
  mvn -q -B "$DEP_PLUGIN:copy" -Dartifact="$ARTIFACT" -DoutputDirectory="$WORK" >"$WORK/mvn.log" 2>&1 \
    || { grep -a ERROR "$WORK/mvn.log" | head -n 1 >&2; die "could not fetch $ARTIFACT"; }
  jar="$WORK/flink-kubernetes-operator-api-$VERSION.jar"
  [[ -f "$jar" ]] || die "$ARTIFACT: jar missing after download"
  mkdir -p "$OUT_DIR"
  unzip -p "$jar" "$CRD_ENTRY" >"$WORK/crd.yml" || die "$CRD_ENTRY not in $jar"
  [[ -s "$WORK/crd.yml" ]] || die "$CRD_ENTRY is empty in $jar"
  mv "$WORK/crd.yml" "$CRD"
fi
echo "$CRD"
