#!/usr/bin/env bash
# Single-node KRaft Kafka broker (combined broker+controller) on 127.0.0.1 for local runs/tests.
#   kafka.sh start|stop|status|env [--run-dir DIR] [--port N]
# The bootstrap address is written to <run-dir>/bootstrap (default run dir <repo>/.run/kafka).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/pids.sh
source "$SCRIPT_DIR/pids.sh"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
KAFKA_JARS="${PWEVENT_CACHE:-$REPO_ROOT/.cache/jars}/kafka"
READY_TIMEOUT=60
STOP_TIMEOUT=30

usage() { echo "usage: $0 start|stop|status|env [--run-dir DIR] [--port N]" >&2; exit 2; }
die() { echo "kafka.sh: $*" >&2; exit 1; }

[[ $# -ge 1 ]] || usage
CMD="$1"; shift
RUN_DIR="$REPO_ROOT/.run/kafka"
PORT=9092
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --port) PORT="$2"; shift 2 ;;
    *) usage ;;
  esac
done
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
PID_FILE="$RUN_DIR/kafka.pid"
BOOTSTRAP_FILE="$RUN_DIR/bootstrap"

running_pid() { live_pid "$PID_FILE" 'kafka\.Kafka'; }

# SO_REUSEADDR like the broker's own listener, so TIME_WAIT leftovers of a previous run do not count as taken.
port_free() {
  python3 -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()' "$1" 2>/dev/null
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

cluster_id() {
  local id
  if [[ ! -s "$RUN_DIR/cluster-id" ]]; then
    # 16 random bytes, base64url without padding, not starting with '-' (the CLI would read it as a flag).
    while id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"; [[ "$id" == -* ]]; do :; done
    echo "$id" >"$RUN_DIR/cluster-id"
  fi
  cat "$RUN_DIR/cluster-id"
}

write_config() {
  local port="$1" cport="$2"
  cat >"$RUN_DIR/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
# Static voters: the formatter stores no controller address, so the ports may change between runs.
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$RUN_DIR/data
num.partitions=1
offsets.topic.replication.factor=1
# One partition instead of 50 makes the first group/transaction coordinator lookup fast.
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# Must stay above the Flink sink's transaction.timeout.ms (600000).
transaction.max.timeout.ms=900000
PROPS
  cat >"$RUN_DIR/log4j2.properties" <<'LOG'
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.request.name = kafka.request.logger
logger.request.level = WARN
LOG
}

fail_start() {
  echo "kafka.sh: $1; last lines of $RUN_DIR/logs/server.log and kafka.out:" >&2
  tail -n 30 "$RUN_DIR/logs/server.log" "$RUN_DIR/kafka.out" >&2 2>/dev/null || true
  stop_broker >/dev/null 2>&1 || true
  exit 1
}

start_broker() {
  if pid="$(running_pid)"; then cat "$BOOTSTRAP_FILE"; return; fi
  rm -f "$PID_FILE" "$BOOTSTRAP_FILE"
  [[ -f "$KAFKA_JARS/.complete" ]] || "$SCRIPT_DIR/fetch-jars.sh" >/dev/null
  port_free "$PORT" || PORT="$(free_port)"
  local cport; cport="$(free_port)"
  while [[ "$cport" == "$PORT" ]]; do cport="$(free_port)"; done
  write_config "$PORT" "$cport"
  mkdir -p "$RUN_DIR/logs" "$RUN_DIR/data"

  local cp="$KAFKA_JARS/*"
  java -cp "$cp" kafka.tools.StorageTool format -t "$(cluster_id)" -c "$RUN_DIR/server.properties" \
    --ignore-formatted >"$RUN_DIR/format.out" 2>&1 || { cat "$RUN_DIR/format.out" >&2; die "format failed"; }

  # setsid: the broker outlives the calling shell's process group (e.g. Ctrl-C in a test runner).
  setsid java -Xms512m -Xmx512m -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$RUN_DIR/log4j2.properties" -Dkafka.logs.dir="$RUN_DIR/logs" \
    -cp "$cp" kafka.Kafka "$RUN_DIR/server.properties" >"$RUN_DIR/kafka.out" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PID_FILE"

  local deadline=$((SECONDS + READY_TIMEOUT))
  until port_open "$PORT"; do
    kill -0 "$pid" 2>/dev/null || fail_start "broker exited during start-up"
    (( SECONDS < deadline )) || fail_start "port $PORT not open after ${READY_TIMEOUT}s"
    sleep 0.2
  done
  local left=$((deadline - SECONDS)); (( left > 0 )) || left=1
  java -cp "$cp" "$SCRIPT_DIR/KafkaReady.java" "127.0.0.1:$PORT" "$((left * 1000))" >>"$RUN_DIR/kafka.out" 2>&1 \
    || fail_start "no metadata response within ${READY_TIMEOUT}s"
  # The port may answer for another broker that took it between port_free and our bind (ours then
  # exits with "Unable to start acceptor"): only our own log saying it started counts.
  until grep -q "Kafka Server started" "$RUN_DIR/logs/server.log" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || fail_start "broker exited during start-up (port $PORT taken?)"
    (( SECONDS < deadline )) || fail_start "broker not started after ${READY_TIMEOUT}s"
    sleep 0.2
  done
  echo "127.0.0.1:$PORT" >"$BOOTSTRAP_FILE"
  cat "$BOOTSTRAP_FILE"
}

stop_broker() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE" "$BOOTSTRAP_FILE"; echo "not running"; return
  fi
  stop_pid "$pid" "$STOP_TIMEOUT"
  rm -f "$PID_FILE" "$BOOTSTRAP_FILE"
  echo "stopped"
}

case "$CMD" in
  start) start_broker ;;
  stop) stop_broker ;;
  status)
    if pid="$(running_pid)"; then echo "running (pid $pid, bootstrap $(cat "$BOOTSTRAP_FILE" 2>/dev/null))"
    else echo "not running"; exit 3; fi ;;
  env)
    running_pid >/dev/null && [[ -s "$BOOTSTRAP_FILE" ]] || die "not running (start it with: $0 start)"
    echo "export PWEVENT_BOOTSTRAP=$(cat "$BOOTSTRAP_FILE")" ;;
  *) usage ;;
esac
