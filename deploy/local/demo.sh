#!/usr/bin/env bash
# The whole streaming demo on a fresh machine, stopped cleanly at the end (or on Ctrl-C):
#   set-up (venv, jars) -> Kafka broker (fresh, under .run/demo) -> topics -> the Flink job
#   (pwevent run, local mini-cluster) -> the producer (pwevent produce, one slot per --pace)
#   -> a live table of the committed releases (pwevent tail) -> audit of the spend log -> stop.
#
#   deploy/local/demo.sh [--users N] [--slots N] [--pace 2s] [--lead 60] [--release-delay 3s]
#     --lead: seconds until slot 1; --release-delay: how long after its end each slot is released
#     (flink.release_delay; records the job reads later are refused as late: a busy machine needs more)
#   deploy/local/demo.sh stop      # stop what an interrupted demo left running
# Logs: .run/demo/{job,produce}.log, broker: .run/demo/kafka/logs/server.log
#   PWEVENT_DEMO_RUN  the run folder instead of .run/demo (tests/integration/test_demo.py)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
RUN="${PWEVENT_DEMO_RUN:-$REPO_ROOT/.run/demo}"
TEMPLATE="$REPO_ROOT/deploy/local/demo.yaml"
CONFIG="$RUN/demo.yaml"
PY="$REPO_ROOT/.venv/bin/python"
USERS=1000 SLOTS=40 PACE=2s LEAD=60 DELAY=3s

stop_pid_group() {  # stop a process group we started, by the pid in the given file
  local file="$1" pid
  [[ -f "$file" ]] || return 0
  pid="$(cat "$file")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

stop_all() {
  stop_pid_group "$RUN/produce.pid"
  stop_pid_group "$RUN/job.pid"
  "$REPO_ROOT/deploy/local/kafka.sh" stop --run-dir "$RUN/kafka" >/dev/null 2>&1 || true
}

if [[ "${1:-}" == "stop" ]]; then stop_all; echo "demo stopped"; exit 0; fi
while [[ $# -gt 0 ]]; do
  case "$1" in
    --users) USERS="$2"; shift 2 ;;
    --slots) SLOTS="$2"; shift 2 ;;
    --pace) PACE="$2"; shift 2 ;;
    --lead) LEAD="$2"; shift 2 ;;
    --release-delay) DELAY="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--users N] [--slots N] [--pace 2s] [--lead 60] [--release-delay 3s] | stop" >&2; exit 2 ;;
  esac
done

echo "== 1/6 set-up (venv, Kafka and connector jars)"
bash "$REPO_ROOT/deploy/local/setup.sh"
command -v java >/dev/null || { echo "demo: java (17+) is needed" >&2; exit 1; }

stop_all                       # leftovers of an interrupted run
rm -rf "$RUN"; mkdir -p "$RUN"
trap 'echo; echo "== stopping"; stop_all; echo "demo stopped; logs in $RUN"' EXIT
trap 'exit 130' INT TERM

echo "== 2/6 Kafka broker (KRaft, 127.0.0.1)"
PWEVENT_BOOTSTRAP="$("$REPO_ROOT/deploy/local/kafka.sh" start --run-dir "$RUN/kafka")"
export PWEVENT_BOOTSTRAP
echo "bootstrap $PWEVENT_BOOTSTRAP"

echo "== 3/6 topics"
"$PY" "$REPO_ROOT/deploy/local/create-topics.py" --bootstrap "$PWEVENT_BOOTSTRAP"

# A live stream: slot 1 begins --lead seconds from now (the job starts meanwhile), on the 2 s grid.
ORIGIN_S=$(( ($(date +%s) + LEAD) / 2 * 2 ))
ORIGIN="$(date -u -d "@$ORIGIN_S" +%Y-%m-%dT%H:%M:%SZ)"
sed -e "s/^origin: [^ ]*/origin: $ORIGIN/" -e "s/^  release_delay: [^ ]*/  release_delay: $DELAY/" "$TEMPLATE" >"$CONFIG"

echo "== 4/6 the Flink job (log: $RUN/job.log); slot 1 begins at $ORIGIN"
setsid "$PY" -m pwevent.jobs.cli.main run --config "$CONFIG" --ready-file "$RUN/ready" >"$RUN/job.log" 2>&1 &
echo $! >"$RUN/job.pid"
for _ in $(seq 600); do
  [[ -f "$RUN/ready" ]] && break
  kill -0 "$(cat "$RUN/job.pid")" 2>/dev/null || { tail -n 30 "$RUN/job.log" >&2; exit 1; }
  sleep 0.2
done
[[ -f "$RUN/ready" ]] || { echo "demo: job not running after 120 s" >&2; exit 1; }
sleep 3
echo "job $(cat "$RUN/ready") running"
if (( $(date +%s) > ORIGIN_S )); then
  # Every slot is released on the clock, release_delay after its end: events of a slot that the
  # producer sends later than that are late (dead letters), as in production.
  echo "demo: the job took longer than --lead $LEAD s to start: slot 1 began $(( $(date +%s) - ORIGIN_S )) s ago," \
       "so the first slots' events will be late (dead letters); rerun with a longer --lead" >&2
fi

while (( $(date +%s) < ORIGIN_S )); do sleep 0.2; done
echo "== 5/6 producer: $USERS users, $SLOTS slots, one slot per $PACE (log: $RUN/produce.log)"
setsid "$PY" -m pwevent.jobs.cli.main produce --config "$CONFIG" --users "$USERS" --slots "$SLOTS" --pace "$PACE" \
  --out "$RUN/data" --quiet >"$RUN/produce.log" 2>&1 &
echo $! >"$RUN/produce.pid"

echo "== 6/6 committed releases (read_committed), live, each $DELAY after its slot's end; ends after slot $SLOTS"
"$PY" -m pwevent.jobs.cli.main tail --config "$CONFIG" --max-slots "$SLOTS" --timeout 600s
# The audit reads what the job made of every record: after a late start the slots are out before the
# producer is done, so wait for it, then for the dead letters of its last records (checkpoint_interval 1s).
while kill -0 "$(cat "$RUN/produce.pid")" 2>/dev/null; do sleep 0.2; done
sleep 3

echo "== full audit: every user's windows against the requirements it declared, every ledger against the releases"
"$PY" - "$CONFIG" <<'PYEOF'
import sys
from collections import Counter
from pwevent.jobs.offline.audit import AuditInputs, audit_records
from pwevent.state.spend_log import last_logged_slot
from pwevent.jobs.common.config import load_config
from pwevent.jobs.streaming.settings import stream_settings
from pwevent.jobs.streaming.kafka_io import read_topic

config = load_config(sys.argv[1])
kafka = stream_settings(config).kafka
read = lambda role, idle: read_topic(kafka, kafka.topics[role], idle_s=idle)  # noqa: E731
# the dead letters, then the log, then the releases up to the log's last slot: the job goes on releasing
# on the clock, each slot's lines and release commit together, and a late refusal names a decided slot
dead = read("dead_letters", 1)
records = [m.json() for m in read("audit", 2)]
decided = last_logged_slot(records)
releases = [r for r in (m.json() for m in read("releases", 1)) if r["slot"] <= decided]
requirements = [(f"{m.topic}:{m.partition}:{m.offset}", m.value) for m in read("requirements", 1)]
inputs = AuditInputs.build(requirements, releases, config, dead_letters=[m.json() for m in dead])
reasons = ", ".join(f"{reason} {n}" for reason, n in Counter(m.json().get("reason") for m in dead).most_common())
print(audit_records(records, inputs).render(),
      f"; dead letters: {len(dead)}" + (f" ({reasons})" if dead else ""))
PYEOF
