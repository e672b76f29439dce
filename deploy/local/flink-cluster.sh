#!/usr/bin/env bash
# A standalone Flink session cluster (one JobManager, one TaskManager) on 127.0.0.1, from the Flink
# distribution inside the venv's apache-flink package: the target for `pwevent run --print-submit`
# when no real cluster is at hand (docs/streaming.md, "Submitting to a cluster").
#   flink-cluster.sh start|stop|status [--run-dir DIR] [--slots N]
# `start` prints the REST address (host:port), also written to <run-dir>/rest; the configuration is
# <run-dir>/conf (export FLINK_CONF_DIR=<run-dir>/conf for the `flink` CLI), logs <run-dir>/logs.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/pids.sh
source "$SCRIPT_DIR/pids.sh"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
PYTHON="${PWEVENT_PYTHON:-$REPO_ROOT/.venv/bin/python}"
READY_TIMEOUT=90
STOP_TIMEOUT=30

usage() { echo "usage: $0 start|stop|status [--run-dir DIR] [--slots N]" >&2; exit 2; }
die() { echo "flink-cluster.sh: $*" >&2; exit 1; }

[[ $# -ge 1 ]] || usage
CMD="$1"; shift
RUN_DIR="$REPO_ROOT/.run/flink-cluster"
SLOTS=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --slots) SLOTS="$2"; shift 2 ;;
    *) usage ;;
  esac
done
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
REST_FILE="$RUN_DIR/rest"

# The pid in <run-dir>/<role>.pid if it is the Flink process of that role, or its start script
# before that execs the JVM.
running_pid() { live_pid "$RUN_DIR/$1.pid" "$2" "bin/$1.sh" "bin/flink-console.sh"; }
JM_CLASS=org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint
TM_CLASS=org.apache.flink.runtime.taskexecutor.TaskManagerRunner


write_config() {
  local flink_home="$1" rpc="$2" rest="$3"
  mkdir -p "$RUN_DIR/conf"
  cp "$flink_home/conf/log4j-console.properties" "$RUN_DIR/conf/"
  # The distribution's JVM options (module opens Flink needs on Java 17), then loopback-only settings.
  "$PYTHON" - "$flink_home/conf/config.yaml" >"$RUN_DIR/conf/config.yaml" <<'PY'
import sys, yaml
opts = yaml.safe_load(open(sys.argv[1]))["env"]["java"]["opts"]["all"]
print(f"env.java.opts.all: {opts}")
PY
  cat >>"$RUN_DIR/conf/config.yaml" <<CONF
jobmanager.bind-host: 127.0.0.1
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $rpc
jobmanager.memory.process.size: 1024m
taskmanager.bind-host: 127.0.0.1
taskmanager.host: 127.0.0.1
taskmanager.numberOfTaskSlots: $SLOTS
taskmanager.memory.process.size: 2048m
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $rest
parallelism.default: 1
CONF
}

fail_start() {
  echo "flink-cluster.sh: $1; last lines of the logs in $RUN_DIR/logs:" >&2
  tail -n 20 "$RUN_DIR"/logs/*.out >&2 2>/dev/null || true
  local role
  for role in taskmanager jobmanager; do  # pids this call just started: no reuse guard needed
    [[ -f "$RUN_DIR/$role.pid" ]] && kill -KILL "$(cat "$RUN_DIR/$role.pid")" 2>/dev/null || true
    rm -f "$RUN_DIR/$role.pid"
  done
  exit 1
}

start_cluster() {
  if running_pid jobmanager "$JM_CLASS" >/dev/null && running_pid taskmanager "$TM_CLASS" >/dev/null; then
    cat "$REST_FILE"; return
  fi
  stop_cluster >/dev/null
  local flink_home site rpc rest
  flink_home="$("$PYTHON" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))')"
  site="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  rpc="$(free_port)"; rest="$(free_port)"
  while [[ "$rest" == "$rpc" ]]; do rest="$(free_port)"; done
  write_config "$flink_home" "$rpc" "$rest"
  mkdir -p "$RUN_DIR/logs"
  # Thread-mode Python runs inside the TaskManager's JVM (pemja): it needs the venv's site-packages.
  export FLINK_HOME="$flink_home" FLINK_CONF_DIR="$RUN_DIR/conf" FLINK_LOG_DIR="$RUN_DIR/logs"
  export PYTHONPATH="$site" PATH="$(dirname "$PYTHON"):$PATH"
  # start-foreground execs the JVM, so $! is its pid; setsid keeps it out of the caller's process group.
  setsid "$flink_home/bin/jobmanager.sh" start-foreground >"$RUN_DIR/logs/jobmanager.out" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/jobmanager.pid"
  setsid "$flink_home/bin/taskmanager.sh" start-foreground >"$RUN_DIR/logs/taskmanager.out" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/taskmanager.pid"

  local deadline=$((SECONDS + READY_TIMEOUT))
  until [[ "$(curl -s "http://127.0.0.1:$rest/taskmanagers" 2>/dev/null)" == *'"id"'* ]]; do
    running_pid jobmanager "$JM_CLASS" >/dev/null || fail_start "the JobManager exited during start-up"
    running_pid taskmanager "$TM_CLASS" >/dev/null || fail_start "the TaskManager exited during start-up"
    (( SECONDS < deadline )) || fail_start "no TaskManager registered within ${READY_TIMEOUT}s"
    sleep 0.5
  done
  echo "127.0.0.1:$rest" >"$REST_FILE"
  cat "$REST_FILE"
}

stop_one() {
  local role="$1" class="$2" pid
  pid="$(running_pid "$role" "$class")" || { rm -f "$RUN_DIR/$role.pid"; return; }
  stop_pid "$pid" "$STOP_TIMEOUT"
  rm -f "$RUN_DIR/$role.pid"
}

stop_cluster() {
  stop_one taskmanager "$TM_CLASS"
  stop_one jobmanager "$JM_CLASS"
  rm -f "$REST_FILE"
  echo "stopped"
}

case "$CMD" in
  start) start_cluster ;;
  stop) stop_cluster ;;
  status)
    if running_pid jobmanager "$JM_CLASS" >/dev/null && running_pid taskmanager "$TM_CLASS" >/dev/null; then
      echo "running (REST $(cat "$REST_FILE" 2>/dev/null), conf $RUN_DIR/conf)"
    else echo "not running"; exit 3; fi ;;
  *) usage ;;
esac
