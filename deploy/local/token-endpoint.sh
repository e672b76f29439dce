#!/usr/bin/env bash
# An OAuth 2 identity provider on 127.0.0.1 for the OAUTHBEARER broker of kafka.sh (`--secure
# oauth-jwks`) and its tests: deploy/local/token-endpoint.py, the client-credentials grant answered
# with RS256-signed JWTs (iss: its base URL, aud: kafka, sub: the client id) and its key as a JWKS.
#   token-endpoint.sh start|stop|status --run-dir DIR --secrets DIR [--owner PID]
# Each client is a file <secrets>/<client id> holding its secret (kafka.sh's users). `start` prints
# the base URL and writes it to DIR/endpoint: the grant is at <base>/oauth2/token, the key set at
# <base>/jwks. The signing key (DIR/signing-key.pem, mode 600) and the port are made at the first start
# and kept by later ones. The server's pid is in DIR/token-endpoint.pid, its log (one line per grant
# or refusal, no secret) in DIR/token-endpoint.out. Needs the venv's Python with `cryptography`
# (the test extra; PWEVENT_PYTHON overrides).
# --owner PID (start): a watcher in its own session stops the server, by its pid, once PID has exited.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/pids.sh
source "$SCRIPT_DIR/pids.sh"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
PY="${PWEVENT_PYTHON:-$REPO_ROOT/.venv/bin/python}"
READY_TIMEOUT=30
STOP_TIMEOUT=10

usage() { echo "usage: $0 start|stop|status --run-dir DIR --secrets DIR [--owner PID]" >&2; exit 2; }
die() { echo "token-endpoint.sh: $*" >&2; exit 1; }

[[ $# -ge 1 ]] || usage
CMD="$1"; shift
RUN_DIR=""
SECRETS_DIR=""
OWNER=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --secrets) SECRETS_DIR="$2"; shift 2 ;;
    --owner) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; OWNER="$2"; shift 2 ;;
    *) usage ;;
  esac
done
[[ -n "$RUN_DIR" ]] || usage
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
PID_FILE="$RUN_DIR/token-endpoint.pid"
ADDRESS_FILE="$RUN_DIR/endpoint"

install_server() { :; }
running_pid() { live_pid "$PID_FILE" "token-endpoint\.py"; }

start_server() {
  [[ -n "$SECRETS_DIR" && -d "$SECRETS_DIR" ]] || die "--secrets: no folder ${SECRETS_DIR:-given}"
  if pid="$(running_pid)"; then cat "$ADDRESS_FILE"; return; fi
  local port
  if [[ -s "$RUN_DIR/port" ]]; then port="$(cat "$RUN_DIR/port")"; else port="$(free_port)"; fi
  echo "$port" >"$RUN_DIR/port"
  local url="http://127.0.0.1:$port"
  launch_server "$SCRIPT_DIR/token-endpoint.sh" "$RUN_DIR/token-endpoint.out" "$url" /jwks "token endpoint $url" \
    "$PY" "$SCRIPT_DIR/token-endpoint.py" --port "$port" --secrets "$(cd "$SECRETS_DIR" && pwd)" \
    --key "$RUN_DIR/signing-key.pem"
  echo "$url" >"$ADDRESS_FILE"
  echo "$url"
}

server_command "$CMD"
