#!/usr/bin/env bash
# A standalone Flink session cluster (one JobManager, N TaskManagers) on 127.0.0.1, from the Flink
# distribution inside the venv's apache-flink package: the target for `pwevent run --print-submit`
# when no real cluster is at hand (docs/streaming.md, "Submitting to a cluster").
#   flink-cluster.sh start|stop|status [--run-dir DIR] [--slots N] [--taskmanagers N]
# `start` (N TaskManagers, default 1, each its own JVM with `--slots` slots, default 2) returns once
# all N have registered and prints the REST address (host:port), also written to <run-dir>/rest; the
# configuration is <run-dir>/conf (export FLINK_CONF_DIR=<run-dir>/conf for the `flink` CLI), logs
# <run-dir>/logs. Pid files: <run-dir>/jobmanager.pid, <run-dir>/taskmanager-<i>.pid; `stop` stops
# every process named by one of them, by pid.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/pids.sh
source "$SCRIPT_DIR/pids.sh"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
PYTHON="${PWEVENT_PYTHON:-$REPO_ROOT/.venv/bin/python}"
READY_TIMEOUT=150  # N TaskManager JVMs starting at once on a busy 2-core machine
STOP_TIMEOUT=30

usage() { echo "usage: $0 start|stop|status [--run-dir DIR] [--slots N] [--taskmanagers N]" >&2; exit 2; }
die() { echo "flink-cluster.sh: $*" >&2; exit 1; }

[[ $# -ge 1 ]] || usage
CMD="$1"; shift
RUN_DIR="$REPO_ROOT/.run/flink-cluster"
SLOTS=2
TASKMANAGERS=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --slots) SLOTS="$2"; shift 2 ;;
    --taskmanagers) TASKMANAGERS="$2"; shift 2 ;;
    *) usage ;;
  esac
done
[[ "$SLOTS" =~ ^[1-9][0-9]*$ && "$TASKMANAGERS" =~ ^[1-9][0-9]*$ ]] || die "--slots and --taskmanagers take a positive integer"
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
REST_FILE="$RUN_DIR/rest"

# The pid in <run-dir>/<name>.pid if it is the Flink process of that role (JVM class), or its start
# script before that execs the JVM.
running_pid() { live_pid "$RUN_DIR/$1.pid" "$2" "bin/${1%%-*}.sh" "bin/flink-console.sh"; }
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
taskmanager.memory.process.size: 1536m
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $rest
parallelism.default: 1
io.tmp.dirs: $RUN_DIR/tmp
CONF
}

fail_start() {
  echo "flink-cluster.sh: $1; last lines of the logs in $RUN_DIR/logs:" >&2
  tail -n 20 "$RUN_DIR"/logs/*.out >&2 2>/dev/null || true
  local file
  for file in "$RUN_DIR"/taskmanager-*.pid "$RUN_DIR/jobmanager.pid"; do  # pids this call just started
    [[ -f "$file" ]] && kill -KILL "$(cat "$file")" 2>/dev/null || true
    rm -f "$file"
  done
  exit 1
}

# The pid-file names (without .pid) of the TaskManagers this run folder has pid files for.
taskmanager_names() {
  local file
  for file in "$RUN_DIR"/taskmanager-*.pid; do [[ -f "$file" ]] && basename "$file" .pid; done
  return 0
}

# How many TaskManagers the REST endpoint lists as registered (0 when it does not answer).
registered() {
  { curl -s "http://127.0.0.1:$1/taskmanagers" 2>/dev/null || true; } | "$PYTHON" -c \
    'import json, sys
try: print(len(json.load(sys.stdin)["taskmanagers"]))
except Exception: print(0)'
}

# All processes of a started cluster alive: the JobManager and exactly $1 TaskManagers.
all_running() {
  running_pid jobmanager "$JM_CLASS" >/dev/null || return 1
  local names=() name
  mapfile -t names < <(taskmanager_names)
  [[ ${#names[@]} -ge 1 && ( -z "${1:-}" || ${#names[@]} -eq $1 ) ]] || return 1
  for name in "${names[@]}"; do running_pid "$name" "$TM_CLASS" >/dev/null || return 1; done
}

start_cluster() {
  if all_running "$TASKMANAGERS" && [[ -f "$REST_FILE" ]]; then
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
  # FLINK_PID_DIR: flink-console.sh's own bookkeeping (it names log files after it), kept in the run
  # folder instead of the machine-wide /tmp default.
  mkdir -p "$RUN_DIR/flink-pids"
  export FLINK_HOME="$flink_home" FLINK_CONF_DIR="$RUN_DIR/conf" FLINK_LOG_DIR="$RUN_DIR/logs"
  export FLINK_PID_DIR="$RUN_DIR/flink-pids"
  export PYTHONPATH="$site" PATH="$(dirname "$PYTHON"):$PATH"
  # start-foreground execs the JVM, so $! is its pid; setsid keeps it out of the caller's process group.
  setsid "$flink_home/bin/jobmanager.sh" start-foreground >"$RUN_DIR/logs/jobmanager.out" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/jobmanager.pid"
  # Each TaskManager: its own log folder; its RPC, data and metrics ports are chosen by the OS (the
  # defaults, port 0), so several share the loopback address.
  local i
  for ((i = 1; i <= TASKMANAGERS; i++)); do
    mkdir -p "$RUN_DIR/logs/taskmanager-$i"
    FLINK_LOG_DIR="$RUN_DIR/logs/taskmanager-$i" setsid "$flink_home/bin/taskmanager.sh" start-foreground \
      >"$RUN_DIR/logs/taskmanager-$i.out" 2>&1 </dev/null &
    echo $! >"$RUN_DIR/taskmanager-$i.pid"
  done

  # Start-up watches the pids this call just started by `kill -0` (as kafka.sh does): their command
  # lines change while the launch scripts exec one another, and read empty in the middle of an exec.
  local deadline=$((SECONDS + READY_TIMEOUT)) count=0
  until (( count >= TASKMANAGERS )); do
    kill -0 "$(cat "$RUN_DIR/jobmanager.pid")" 2>/dev/null || fail_start "the JobManager exited during start-up"
    for ((i = 1; i <= TASKMANAGERS; i++)); do
      kill -0 "$(cat "$RUN_DIR/taskmanager-$i.pid")" 2>/dev/null || fail_start "TaskManager $i exited during start-up"
    done
    (( SECONDS < deadline )) || fail_start "$count of $TASKMANAGERS TaskManagers registered within ${READY_TIMEOUT}s"
    sleep 0.5
    count="$(registered "$rest")"
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
  local name
  for name in $(taskmanager_names) taskmanager; do  # taskmanager.pid: a run folder of an older version
    stop_one "$name" "$TM_CLASS"
  done
  stop_one jobmanager "$JM_CLASS"
  rm -f "$REST_FILE"
  echo "stopped"
}

case "$CMD" in
  start) start_cluster ;;
  stop) stop_cluster ;;
  status)
    if all_running; then
      rest="$(cat "$REST_FILE" 2>/dev/null || echo "?:0")"
      echo "running (REST $rest, conf $RUN_DIR/conf, $(registered "${rest##*:}") TaskManagers registered)"
      echo "jobmanager pid $(running_pid jobmanager "$JM_CLASS")"
      for name in $(taskmanager_names); do echo "$name pid $(running_pid "$name" "$TM_CLASS")"; done
    else echo "not running"; exit 3; fi ;;
  *) usage ;;
esac
