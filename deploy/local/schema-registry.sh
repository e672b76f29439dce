#!/usr/bin/env bash
# A Confluent-compatible Schema Registry on 127.0.0.1 for local runs and tests: Rivven's
# `rivven-schema` server (crates.io, Apache-2.0; in-memory storage, BACKWARD compatibility, no
# authentication), built from source with cargo.
#   schema-registry.sh install|start|stop|status [--run-dir DIR] [--port N] [--owner PID]
# install: builds the pinned version once into ~/.cache/pwevent/tools (PWEVENT_TOOLS overrides; shared
# by every clone on the machine, keyed by version); start installs it first when it is missing.
# start prints the URL and writes it to <run-dir>/url (default run dir <repo>/.run/schema-registry);
# the server logs every request to <run-dir>/registry.out.
# --owner PID (start): a watcher in its own session stops the server, by its pid, once PID has exited.
# Schemas live in memory only: a restarted server has none.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/pids.sh
source "$SCRIPT_DIR/pids.sh"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
VERSION=0.0.22
FEATURES=server,avro,cli
TOOL_ROOT="${PWEVENT_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/pwevent/tools}/rivven-schema-$VERSION"
BINARY="$TOOL_ROOT/bin/rivven-schema"
READY_TIMEOUT=30
STOP_TIMEOUT=10
BUILD_TIMEOUT=1800

usage() {
  echo "usage: $0 install|start|stop|status [--run-dir DIR] [--port N] [--owner PID]" >&2
  exit 2
}
die() { echo "schema-registry.sh: $*" >&2; exit 1; }

[[ $# -ge 1 ]] || usage
CMD="$1"; shift
RUN_DIR="$REPO_ROOT/.run/schema-registry"
PORT=""
OWNER=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --port) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; PORT="$2"; shift 2 ;;
    --owner) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; OWNER="$2"; shift 2 ;;
    *) usage ;;
  esac
done
PID_FILE="$RUN_DIR/registry.pid"
ADDRESS_FILE="$RUN_DIR/url"

install_server() {
  [[ -x "$BINARY" ]] && return 0
  command -v cargo >/dev/null || die "cargo not found: install Rust (https://rustup.rs) to build rivven-schema"
  echo "schema-registry.sh: building rivven-schema $VERSION with cargo (first time: a few minutes)" >&2
  mkdir -p "$TOOL_ROOT"
  local log="$TOOL_ROOT/build.log"
  timeout "$BUILD_TIMEOUT" cargo install rivven-schema --version "$VERSION" --locked --no-default-features \
    --features "$FEATURES" --root "$TOOL_ROOT" >"$log" 2>&1 || { tail -20 "$log" >&2; die "cargo install failed ($log)"; }
  [[ -x "$BINARY" ]] || die "cargo install left no $BINARY"
}

running_pid() { live_pid "$PID_FILE" "rivven-schema"; }

start_server() {
  install_server
  mkdir -p "$RUN_DIR"
  if pid="$(running_pid)"; then echo "schema-registry.sh: already running (pid $pid)" >&2; cat "$ADDRESS_FILE"; return; fi
  [[ -n "$PORT" ]] || PORT="$(free_port)"
  local url="http://127.0.0.1:$PORT"
  launch_server "$SCRIPT_DIR/schema-registry.sh" "$RUN_DIR/registry.out" "$url" /health "listening on" \
    env NO_COLOR=1 "$BINARY" --log-level debug serve --host 127.0.0.1 --port "$PORT"
  echo "$url" >"$ADDRESS_FILE"
  echo "$url"
}

server_command "$CMD"
