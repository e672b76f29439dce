#!/usr/bin/env bash
# Refresh the CRDs that tests/deploy/test_kubernetes.py validates the manifests against, committed in
# tests/deploy/data/ with their source in tests/deploy/data/SOURCES (release tag, commit, sha256).
# Reads the CRDs from clones of the two operators' repositories at a release tag:
#   git clone --bare https://github.com/apache/flink-kubernetes-operator
#   git clone --bare https://github.com/prometheus-operator/prometheus-operator
#   deploy/kubernetes/fetch-crd.sh FLINK_OPERATOR_GIT_DIR PROMETHEUS_OPERATOR_GIT_DIR
#   PWEVENT_FLINK_OPERATOR_TAG       default release-1.13.0 (the lowest release whose CRD has v2_2)
#   PWEVENT_PROMETHEUS_OPERATOR_TAG  default v0.93.0
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DATA="$REPO_ROOT/tests/deploy/data"
[[ $# -eq 2 ]] || { echo "usage: $0 FLINK_OPERATOR_GIT_DIR PROMETHEUS_OPERATOR_GIT_DIR" >&2; exit 2; }
FLINK_TAG="${PWEVENT_FLINK_OPERATOR_TAG:-release-1.13.0}"
PROM_TAG="${PWEVENT_PROMETHEUS_OPERATOR_TAG:-v0.93.0}"

sources="$(mktemp)"
trap 'rm -f "$sources"' EXIT
# copy GIT_DIR REPOSITORY TAG PATH: the file at the tag into $DATA, and its line in SOURCES.
copy() {
  local commit name
  commit="$(git --git-dir "$1" rev-parse "$3^{commit}")"
  name="$(basename "$4")"
  git --git-dir "$1" show "$commit:$4" >"$DATA/$name"
  echo "$name $(sha256sum "$DATA/$name" | cut -d' ' -f1) $2@$3 $commit $4" >>"$sources"
}
copy "$1" apache/flink-kubernetes-operator "$FLINK_TAG" helm/flink-kubernetes-operator/crds/flinkdeployments.flink.apache.org-v1.yml
copy "$2" prometheus-operator/prometheus-operator "$PROM_TAG" example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml
copy "$2" prometheus-operator/prometheus-operator "$PROM_TAG" example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml
{ echo "# file sha256 repository@tag commit path (written by deploy/kubernetes/fetch-crd.sh)"; cat "$sources"; } \
  >"$DATA/SOURCES"
cat "$DATA/SOURCES"
