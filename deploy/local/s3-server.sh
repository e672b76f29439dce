#!/usr/bin/env bash
# An S3-compatible object store on 127.0.0.1 for local runs and tests: Moto's server (`moto_server`,
# PyPI, Apache-2.0; S3 API only as installed here, objects in memory, path-style requests, any
# credentials accepted), where the job keeps checkpoints and savepoints under flink.checkpoint_dir:
# s3://... (docs/operations.md, "Checkpoints and savepoints on an object store").
#   s3-server.sh install|start|stop|status [--run-dir DIR] [--port N] [--bucket NAME] [--owner PID]
# install: a venv with the pinned Moto once into ~/.cache/pwevent/tools (PWEVENT_TOOLS overrides;
# shared by every clone on the machine, keyed by version); start installs it first when it is missing.
# start prints the endpoint URL and writes it to <run-dir>/endpoint (default run dir <repo>/.run/s3);
# --bucket NAME creates that bucket once the server answers. The server logs every request to
# <run-dir>/s3.out.
# --owner PID (start): a watcher in its own session stops the server, by its pid, once PID has exited.
# Objects live in memory only: a restarted server has none.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/pids.sh
source "$SCRIPT_DIR/pids.sh"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
VERSION=5.2.5
# Moto's S3 and its server (Flask); not moto[server], which brings every AWS service's dependencies.
REQUIREMENTS=("moto[s3]==$VERSION" "flask==3.1.3" "flask-cors==6.0.5")
TOOL_ROOT="${PWEVENT_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/pwevent/tools}/moto-$VERSION"
BINARY="$TOOL_ROOT/bin/moto_server"
PY="${PWEVENT_PYTHON:-$(command -v python3.11 || command -v python3)}"
READY_TIMEOUT=30
STOP_TIMEOUT=10
INSTALL_TIMEOUT=600

usage() {
  echo "usage: $0 install|start|stop|status [--run-dir DIR] [--port N] [--bucket NAME] [--owner PID]" >&2
  exit 2
}
die() { echo "s3-server.sh: $*" >&2; exit 1; }

[[ $# -ge 1 ]] || usage
CMD="$1"; shift
# --help: the header above.
case "$CMD" in -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
RUN_DIR="$REPO_ROOT/.run/s3"
PORT=""
BUCKET=""
OWNER=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --port) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; PORT="$2"; shift 2 ;;
    --bucket) [[ "${2:-}" =~ ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$ ]] || die "--bucket: not an S3 bucket name: ${2:-}"
      BUCKET="$2"; shift 2 ;;
    --owner) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; OWNER="$2"; shift 2 ;;
    *) usage ;;
  esac
done
PID_FILE="$RUN_DIR/s3.pid"
ADDRESS_FILE="$RUN_DIR/endpoint"

install_server() {
  [[ -f "$TOOL_ROOT/.complete" ]] && return 0
  echo "s3-server.sh: installing Moto $VERSION into $TOOL_ROOT (first time: a minute)" >&2
  # Built where it stays (a venv's scripts name their interpreter by path); complete once marked so.
  rm -rf "$TOOL_ROOT"
  mkdir -p "$TOOL_ROOT"
  local log="$TOOL_ROOT/install.log"
  { "$PY" -m venv "$TOOL_ROOT" &&
    timeout "$INSTALL_TIMEOUT" "$TOOL_ROOT/bin/python" -m pip install -q --disable-pip-version-check \
      "${REQUIREMENTS[@]}"; } >"$log" 2>&1 || { tail -20 "$log" >&2; die "install failed ($log)"; }
  [[ -x "$BINARY" ]] || die "the install left no $BINARY"
  touch "$TOOL_ROOT/.complete"
}

running_pid() { live_pid "$PID_FILE" "moto_server"; }

start_server() {
  install_server
  mkdir -p "$RUN_DIR"
  if pid="$(running_pid)"; then echo "s3-server.sh: already running (pid $pid)" >&2; cat "$ADDRESS_FILE"; return; fi
  [[ -n "$PORT" ]] || PORT="$(free_port)"
  local url="http://127.0.0.1:$PORT"
  launch_server "$SCRIPT_DIR/s3-server.sh" "$RUN_DIR/s3.out" "$url" / "Running on $url" \
    "$BINARY" -H 127.0.0.1 -p "$PORT"
  if [[ -n "$BUCKET" ]]; then
    curl -sf -X PUT "$url/$BUCKET" >/dev/null \
      || { stop_pid "$(cat "$PID_FILE")" "$STOP_TIMEOUT"; die "could not create bucket $BUCKET"; }
  fi
  echo "$url" >"$ADDRESS_FILE"
  echo "$url"
}

server_command "$CMD"
