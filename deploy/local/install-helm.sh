#!/usr/bin/env bash
# Helm, for the chart's tests (tests/deploy/test_kubernetes.py and test_rules.py: helm lint and helm template of
# deploy/helm/pwevent), built from its Go module at a pinned version into <repo>/.cache/bin/helm.
# Quick when that version is there; the first build takes minutes.
#   PWEVENT_GO  the go command (default: go on PATH, else /usr/local/go/bin/go)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HELM_VERSION=v4.3.2
HELM="$REPO_ROOT/.cache/bin/helm"
GO="${PWEVENT_GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "$GO" ]] || { echo "install-helm: no Go toolchain (set PWEVENT_GO); Helm $HELM_VERSION is built from its module" >&2; exit 1; }
# The module version the binary was built from (`helm version` says only v4.3 without release ldflags).
built() { [[ -x "$HELM" ]] && "$GO" version -m "$HELM" | grep -qE "^\s+mod\s+helm\.sh/helm/v4\s+$HELM_VERSION\s"; }
built && exit 0
echo "install-helm: building Helm $HELM_VERSION into $HELM (first time: a few minutes)" >&2
GOBIN="$(dirname "$HELM")" "$GO" install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
built
