#!/usr/bin/env bash
# Everything a fresh machine needs, idempotent: the venv with the project and its test tools, the
# Kafka / Flink connector jars and the job's JVM classes. With --tests (deploy/local/test.sh) also what
# only the tests need: Debian's packages of the tests (needs root and apt the first time): Prometheus
# (promtool and the server, for the alert-rule and scraping tests) and MIT Kerberos (the KDC of
# deploy/local/kdc.sh, and the development files the Python package gssapi builds against, for the
# GSSAPI tests), then gssapi itself (built once per machine), and the Schema Registry of the tests
# (rivven-schema, built once per machine with cargo: deploy/local/schema-registry.sh), the S3 server
# of the object-store tests (Moto, a venv once per machine: deploy/local/s3-server.sh) and Helm for
# the chart's tests (built once per checkout with go: deploy/local/install-helm.sh). Quick when
# nothing changed.
#   deploy/local/setup.sh [--tests] [--help]
#   PWEVENT_PYTHON  interpreter to build the venv from (default: python3.11, else python3)
#   PWEVENT_WHEELS  the wheelhouse of the dependencies (default ~/.cache/pwevent/wheels)
set -euo pipefail

TESTS=0
case "${1:-}" in
  "") ;;
  --tests) TESTS=1 ;;
  -h|--help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0 [--tests]" >&2; exit 2 ;;
esac
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
# The dependencies' wheels are kept per pyproject.toml in a wheelhouse, so that a fresh clone
# installs without asking the package index (its answers took from 15 s to 4 minutes); an install
# from it that fails for any reason is done again from the index.
WHEELS="${PWEVENT_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/pwevent/wheels}/$want"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "setup: installing pwevent and its dependencies (first time: a few minutes)" >&2
  pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
  if [[ -f "$WHEELS/complete" ]] && "${pip[@]}" --no-index --find-links "$WHEELS" --upgrade setuptools wheel \
      && "${pip[@]}" --no-index --find-links "$WHEELS" --no-build-isolation -e "$REPO_ROOT[test]"; then
    echo "setup: installed from the wheelhouse $WHEELS" >&2
  else
    [[ ! -f "$WHEELS/complete" ]] || echo "setup: the wheelhouse did not serve; installing from the index" >&2
    "${pip[@]}" --upgrade pip setuptools wheel
    "${pip[@]}" -e "$REPO_ROOT[test]"
    # One wheelhouse: the latest pyproject.toml's (only folders named by such a hash are removed).
    mkdir -p "$(dirname "$WHEELS")"
    find "$(dirname "$WHEELS")" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended \
      -regex '.*/[0-9a-f]{64}' -exec rm -rf {} +
    mkdir -p "$WHEELS"
    if "$VENV/bin/python" -m pip freeze -q --exclude-editable --disable-pip-version-check >"$WHEELS/installed.txt" \
        && "$VENV/bin/python" -m pip wheel -q --disable-pip-version-check -w "$WHEELS" -r "$WHEELS/installed.txt" \
          setuptools wheel >/dev/null; then
      touch "$WHEELS/complete"
    else
      echo "setup: no wheelhouse this time (the next set-up asks the index again)" >&2
    fi
  fi
  echo "$want" >"$stamp"
fi
bash "$REPO_ROOT/deploy/local/fetch-jars.sh" >/dev/null
bash "$REPO_ROOT/deploy/local/build-jvm.sh" >/dev/null
if [[ $TESTS -eq 0 ]]; then
  echo "setup: ready ($VENV)" >&2
  exit 0
fi
# Debian's packages, each with a command it provides: what is missing is installed in one go.
declare -A DEBIAN=([promtool]=prometheus [prometheus]=prometheus [krb5kdc]=krb5-kdc [kadmin.local]=krb5-admin-server
                   [krb5-config]=libkrb5-dev)
missing=()
for tool in "${!DEBIAN[@]}"; do
  command -v "$tool" >/dev/null || missing+=("${DEBIAN[$tool]}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "setup: installing Debian's ${missing[*]} (for the tests)" >&2
  # The packages' services are not started: the tests start their own servers on loopback
  # (invoke-rc.d asks policy-rc.d; 101 = action forbidden). An existing policy is left alone; ours
  # is removed when this script ends, whichever way.
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# gssapi (kafka-python's GSSAPI; pwevent's extra `kerberos`, docs/operations.md): no wheel on the
# index, so its wheel is built once against the system's Kerberos and kept beside the wheelhouse.
if ! "$VENV/bin/python" -c 'import gssapi' 2>/dev/null; then
  GSSAPI_WHEELS="${XDG_CACHE_HOME:-$HOME/.cache}/pwevent/gssapi-wheels"
  pip=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
  if ! "${pip[@]}" --no-index --find-links "$GSSAPI_WHEELS" gssapi 2>/dev/null; then
    echo "setup: building the Python package gssapi (once per machine)" >&2
    "$VENV/bin/python" -m pip wheel -q --disable-pip-version-check -w "$GSSAPI_WHEELS" gssapi >/dev/null
    "${pip[@]}" --no-index --find-links "$GSSAPI_WHEELS" gssapi
  fi
fi
bash "$REPO_ROOT/deploy/local/schema-registry.sh" install >/dev/null
bash "$REPO_ROOT/deploy/local/s3-server.sh" install >/dev/null
bash "$REPO_ROOT/deploy/local/install-helm.sh"
echo "setup: ready for the tests ($VENV)" >&2
