#!/usr/bin/env bash
# Entry point of the local Flink base image (deploy/kubernetes/local-base/Containerfile), written to
# behave like the official image's /docker-entrypoint.sh of Flink 2.2 (apache/flink-docker):
#   jobmanager | standalone-job | taskmanager | history-server [ARGS]  start that process in the
#                                          foreground (bin/<process>.sh start-foreground ARGS)
#   help                                   usage
#   anything else                          run as a command (pass-through)
# Before starting it writes into conf/config.yaml: jobmanager.rpc.address ($JOB_MANAGER_RPC_ADDRESS,
# default `hostname -f`), blob.server.port 6124, query.server.port 6125, taskmanager.numberOfTaskSlots
# ($TASK_MANAGER_NUMBER_OF_TASK_SLOTS, if set), then every `key: value` line of $FLINK_PROPERTIES
# (values through envsubst); links each jar of $ENABLE_BUILT_IN_PLUGINS (;-separated names in opt/)
# into plugins/; preloads jemalloc unless DISABLE_JEMALLOC=true.
set -uo pipefail

FLINK_HOME="${FLINK_HOME:-/opt/flink}"

if [[ "$(id -u)" == 0 ]]; then
  echo "WARNING: Running as root user is not recommended. Please use a non-root user to run Flink."
fi

if [[ "${DISABLE_JEMALLOC:-false}" == false ]]; then
  jemalloc="/usr/lib/$(uname -m)-linux-gnu/libjemalloc.so"
  if [[ -f "$jemalloc" ]]; then
    export LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$jemalloc"
  else
    echo "WARNING: no jemalloc at $jemalloc: glibc's allocator is used."
  fi
fi

if [[ -n "${ENABLE_BUILT_IN_PLUGINS:-}" ]]; then
  IFS=';' read -r -a plugins <<<"$ENABLE_BUILT_IN_PLUGINS"
  for plugin in "${plugins[@]}"; do
    [[ -e "$FLINK_HOME/opt/$plugin" ]] || { echo "Plugin $plugin does not exist. Exiting."; exit 1; }
    mkdir -p "$FLINK_HOME/plugins/${plugin%.jar}"
    ln -fs "$FLINK_HOME/opt/$plugin" "$FLINK_HOME/plugins/${plugin%.jar}"
  done
fi

# bin/config-parser-utils.sh rewrites conf/config.yaml in place with -Dkey=value options: first the
# image's own settings, then $FLINK_PROPERTIES, so that those win.
write_config() {
  [[ $# -gt 0 ]] || return 0
  "$FLINK_HOME/bin/config-parser-utils.sh" "$FLINK_HOME/conf" "$FLINK_HOME/bin" "$FLINK_HOME/lib" "$@" >/dev/null \
    || { echo "could not write $FLINK_HOME/conf/config.yaml"; exit 1; }
}
options=("-Djobmanager.rpc.address=${JOB_MANAGER_RPC_ADDRESS:-$(hostname -f)}"
         "-Dblob.server.port=6124" "-Dquery.server.port=6125")
if [[ -n "${TASK_MANAGER_NUMBER_OF_TASK_SLOTS:-}" ]]; then
  options+=("-Dtaskmanager.numberOfTaskSlots=$TASK_MANAGER_NUMBER_OF_TASK_SLOTS")
fi
write_config "${options[@]}"
options=()
while IFS= read -r line; do
  line="$(tr -d '[:space:]' <<<"$line")"
  [[ -n "$line" ]] || continue
  options+=("-D${line%%:*}=$(envsubst <<<"${line#*:}")")
done <<<"${FLINK_PROPERTIES:-}"
write_config "${options[@]}"

case "${1:-help}" in
  help)
    echo "Usage: $(basename "$0") (jobmanager|standalone-job|taskmanager|history-server)"
    echo "    Or $(basename "$0") help"
    exit 0 ;;
  jobmanager)     shift; echo "Starting Job Manager"; exec "$FLINK_HOME/bin/jobmanager.sh" start-foreground "$@" ;;
  standalone-job) shift; echo "Starting Job Manager"; exec "$FLINK_HOME/bin/standalone-job.sh" start-foreground "$@" ;;
  taskmanager)    shift; echo "Starting Task Manager"; exec "$FLINK_HOME/bin/taskmanager.sh" start-foreground "$@" ;;
  history-server) shift; echo "Starting History Server"; exec "$FLINK_HOME/bin/historyserver.sh" start-foreground "$@" ;;
  *)              exec "$@" ;;
esac
