# Sourced by kafka.sh, flink-cluster.sh and schema-registry.sh: free loopback ports, and the processes they start, found
# and stopped through the pid files they write (never by name).

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
