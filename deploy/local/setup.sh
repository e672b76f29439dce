#!/usr/bin/env bash
# Everything a fresh machine needs, idempotent: the venv with the project and its test tools,
# the Kafka / Flink connector jars, Prometheus (Debian's package: promtool and the server, for the
# alert-rule and scraping tests; needs root and apt the first time) and the Schema Registry of the
# tests (rivven-schema, built once per machine with cargo: deploy/local/schema-registry.sh). Quick
# when nothing changed.
#   PWEVENT_PYTHON  interpreter to build the venv from (default: python3.11, else python3)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$REPO_ROOT/.venv"
PY="${PWEVENT_PYTHON:-$(command -v python3.11 || command -v python3)}"

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup: creating $VENV with $PY" >&2
  "$PY" -m venv "$VENV"
fi
# Reinstall only when pyproject.toml changed since the last successful install.
stamp="$VENV/.pwevent-installed"
want="$(sha256sum "$REPO_ROOT/pyproject.toml" | cut -d' ' -f1)"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "setup: installing pwevent and its dependencies (first time: a few minutes)" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip setuptools wheel
  "$VENV/bin/python" -m pip install -q -e "$REPO_ROOT[test]"
  echo "$want" >"$stamp"
fi
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  echo "setup: installing Debian's prometheus package (promtool and the server, for the tests)" >&2
  # The package's service is not started: the tests start their own server on loopback
  # (invoke-rc.d asks policy-rc.d; 101 = action forbidden). An existing policy is left alone; ours
  # is removed when this script ends, whichever way.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
bash "$REPO_ROOT/deploy/local/fetch-jars.sh" >/dev/null
bash "$REPO_ROOT/deploy/local/build-jvm.sh" >/dev/null
bash "$REPO_ROOT/deploy/local/schema-registry.sh" install >/dev/null
echo "setup: ready ($VENV)" >&2
