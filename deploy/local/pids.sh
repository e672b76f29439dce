# Sourced by kafka.sh, flink-cluster.sh, schema-registry.sh and s3-server.sh: free loopback ports, and the processes
# they start, found and stopped through the pid files they write (never by name).

# free_port: a port nothing listens on at 127.0.0.1, below the kernel's ephemeral range (jobs/streaming/loopback.py,
# the rule the Python side uses too).
free_port() { python3 "$(dirname "${BASH_SOURCE[0]}")/../../jobs/streaming/loopback.py"; }

# live_pid FILE PATTERN...: prints the pid in FILE if that process is alive and its command line
# matches one of the patterns (a guard against a stale file naming a reused pid).
live_pid() {
  local file="$1" pid pattern
  shift
  [[ -f "$file" ]] || return 1
  pid="$(cat "$file")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  local grep_args=()
  for pattern in "$@"; do grep_args+=(-e "$pattern"); done
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "${grep_args[@]}" || return 1
  echo "$pid"
}

# stop_pid PID SECONDS: SIGTERM, and SIGKILL if the process is still there after SECONDS.
stop_pid() {
  local pid="$1" deadline=$((SECONDS + $2))
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$(basename "$0"): pid $pid still there $2 s after SIGTERM, sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
}

# watch_owner OWNER_PID PID SCRIPT RUN_DIR: in a session of its own (output in RUN_DIR/owner.out),
# waits until process OWNER_PID or PID has exited, and then runs `SCRIPT stop --run-dir RUN_DIR` if
# PID is still there (the script stops it by its pid file, never by name).
watch_owner() {
  setsid bash -c 'while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 2; done
    if kill -0 "$2" 2>/dev/null; then echo "owner $1 gone: stopping pid $2"; "$3" stop --run-dir "$4"; fi' \
    watch-owner "$1" "$2" "$3" "$4" </dev/null >>"$4/owner.out" 2>&1 &
}

# The servers of deploy/local that answer HTTP on loopback (schema-registry.sh, s3-server.sh) share what follows.
# Their scripts set RUN_DIR, PID_FILE, ADDRESS_FILE (where start writes the server's URL), OWNER (empty: no
# watcher), READY_TIMEOUT and STOP_TIMEOUT, and define die, usage, install_server, start_server and running_pid.

# launch_server SCRIPT OUT URL READY_PATH READY_PATTERN COMMAND...: starts COMMAND in a session of its own
# (setsid: it outlives the calling shell's process group, e.g. Ctrl-C in a test runner), output in OUT, its pid
# in PID_FILE, stopped by `SCRIPT stop` once OWNER has exited, then waits until URL+READY_PATH answers and OUT
# holds READY_PATTERN: our own process answering counts, not the port (another server may hold it). A server
# that exits or does not answer within READY_TIMEOUT is an error (die).
launch_server() {
  local script="$1" out="$2" url="$3" ready_path="$4" pattern="$5"
  shift 5
  setsid "$@" >"$out" 2>&1 </dev/null &
  local pid=$! deadline=$((SECONDS + READY_TIMEOUT))
  echo "$pid" >"$PID_FILE"
  [[ -z "$OWNER" ]] || watch_owner "$OWNER" "$pid" "$script" "$RUN_DIR"
  until curl -sf "$url$ready_path" >/dev/null 2>&1 && grep -q "$pattern" "$out"; do
    if ! kill -0 "$pid" 2>/dev/null; then tail -5 "$out" >&2; die "server exited during start-up"; fi
    if (( SECONDS >= deadline )); then stop_pid "$pid" "$STOP_TIMEOUT"; die "no answer on $url within ${READY_TIMEOUT}s"; fi
    sleep 0.2
  done
}

# server_command CMD: what `SCRIPT install|start|stop|status` does (status exits 3 when not running).
server_command() {
  local pid
  case "$1" in
    install) install_server; echo "$BINARY" ;;
    start) start_server ;;
    stop)
      if pid="$(running_pid)"; then stop_pid "$pid" "$STOP_TIMEOUT"; echo "stopped"; else echo "not running"; fi
      rm -f "$PID_FILE" "$ADDRESS_FILE" ;;
    status)
      if pid="$(running_pid)"; then echo "running (pid $pid, $(cat "$ADDRESS_FILE" 2>/dev/null))"
      else echo "not running"; exit 3; fi ;;
    *) usage ;;
  esac
}
