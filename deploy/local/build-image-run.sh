#!/usr/bin/env bash
# Run the job image (deploy/local/build-image.sh) in application mode against a local broker and
# wait for one committed release (docs/kubernetes.md, "Building the image"):
#   build-image-run.sh [--image TAG] [--run-dir DIR] [--timeout SECONDS]
# 1. a Kafka broker on 127.0.0.1 (deploy/local/kafka.sh, <run-dir>/kafka) and the five topics;
# 2. the job's configuration: the Helm chart (deploy/helm/pwevent) rendered by `helm template` with
#    the local bootstrap address, PLAINTEXT (the local broker's), a shared volume for checkpoints
#    and a 5 s checkpoint interval (releases commit with checkpoints): its job.yaml, with a generated
#    requirement signing key in the environment (as the Secret gives it), mounted at
#    /opt/pwevent/config as in the FlinkDeployment, the checkpoint volume at /flink-data;
# 3. a backlog: `pwevent produce` of 200 users over 6 slots;
# 4. two containers of the image with the host's network, every Flink port bound to 127.0.0.1 and
#    chosen free: the JobManager by the image's entry point `standalone-job` running
#    the FlinkDeployment's entry class and arguments (Flink's Python driver, -pym
#    pwevent.jobs.streaming.job --config /opt/pwevent/config/job.yaml) with its jarURI on the class
#    path, and a TaskManager (`taskmanager`) with the deployment's two slots;
# 5. `pwevent tail --max-slots 1` (read_committed) until a release arrives or --timeout (default 400).
# Exit 0 with the release printed; 1 otherwise, with the containers' last log lines. The containers
# (named pwevent-image-jm-<pid>, -tm-<pid>) and the broker are stopped on exit.
# Needs: root, podman and runc (apt-get install podman runc), the images in build-image.sh's storage.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/pids.sh
source "$SCRIPT_DIR/pids.sh"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
PYTHON="$REPO_ROOT/.venv/bin/python"
IMAGE=localhost/pwevent:dev
RUN_DIR=""
TIMEOUT=400
while [[ $# -gt 0 ]]; do
  case "$1" in
    --image) IMAGE="$2"; shift 2 ;;
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    *) echo "usage: $0 [--image TAG] [--run-dir DIR] [--timeout SECONDS]" >&2; exit 2 ;;
  esac
done
die() { echo "build-image-run: $*" >&2; exit 1; }
command -v podman >/dev/null || die "podman not found (apt-get install podman runc)"
RUN_DIR="${RUN_DIR:-$(mktemp -d)}"
mkdir -p "$RUN_DIR/config" "$RUN_DIR/flink-data"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
STORAGE="${PWEVENT_IMAGE_STORAGE:-$REPO_ROOT/.cache/containers}"
# runc: crun 1.8 refuses this host's mixed cgroup v1/v2 mounts. The rlimits: podman's defaults
# (nofile 1048576) exceed what a process without CAP_SYS_RESOURCE may set.
P=(podman --root "$STORAGE/root" --runroot "$STORAGE/run" --runtime "$(command -v "${PWEVENT_OCI_RUNTIME:-runc}")"
   --cgroup-manager cgroupfs --events-backend file)
LIMITS=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=8192:8192)
JM="pwevent-image-jm-$$"
TM="pwevent-image-tm-$$"

cleanup() {
  local name
  for name in "$JM" "$TM"; do
    "${P[@]}" rm --force --time 20 "$name" >/dev/null 2>&1 || true
  done
  "$SCRIPT_DIR/kafka.sh" stop --run-dir "$RUN_DIR/kafka" >/dev/null 2>&1 || true
}
trap cleanup EXIT
logs() {
  local name
  for name in "$JM" "$TM"; do
    echo "--- last lines of $name" >&2
    "${P[@]}" logs --tail 40 "$name" >&2 2>&1 || true
  done
}

"${P[@]}" image exists "$IMAGE" || die "no image $IMAGE in $STORAGE (deploy/local/build-image.sh)"

# 1. the broker and the topics
"$SCRIPT_DIR/kafka.sh" start --run-dir "$RUN_DIR/kafka" >/dev/null
BOOTSTRAP="$(cat "$RUN_DIR/kafka/bootstrap")"

# 2. the deployment's job configuration, pointed at this broker (kafka.sh listens in PLAINTEXT)
"$REPO_ROOT/.cache/bin/helm" template pwevent "$REPO_ROOT/deploy/helm/pwevent" --set "kafka.bootstrap=$BOOTSTRAP" \
  --set kafka.security.protocol=PLAINTEXT --set storage.type=volume --set checkpoints.interval=5s >"$RUN_DIR/chart.yaml"
"$PYTHON" - "$RUN_DIR/chart.yaml" >"$RUN_DIR/config/job.yaml" <<'PY'
import sys, yaml
(config_map,) = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["metadata"]["name"] == "pwevent-job-config"]
print(config_map["data"]["job.yaml"])
PY
# The requirement signing key, as the Secret gives it to the pods: produce signs with it.
PWEVENT_REQUIREMENT_KEY="$("$PYTHON" -c 'import secrets; print(secrets.token_hex(32))')"
export PWEVENT_REQUIREMENT_KEY
"$PYTHON" "$SCRIPT_DIR/create-topics.py" --job-config "$RUN_DIR/config/job.yaml" >/dev/null
chown -R 9999:9999 "$RUN_DIR/flink-data"  # the image's flink user writes checkpoints there

# 3. the backlog
"$REPO_ROOT/.venv/bin/pwevent" produce --config "$RUN_DIR/config/job.yaml" --users 200 --slots 6 --pace 10ms \
  --quiet --out "$RUN_DIR/input" >/dev/null

# 4. the JobManager (application mode) and a TaskManager, loopback only
rpc="$(free_port)"; rest="$(free_port)"; blob="$(free_port)"
PROPERTIES="jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $rpc
jobmanager.bind-host: 127.0.0.1
blob.server.port: $blob
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $rest
taskmanager.bind-host: 127.0.0.1
taskmanager.host: 127.0.0.1
taskmanager.numberOfTaskSlots: 2
jobmanager.memory.process.size: 1024m
taskmanager.memory.process.size: 1728m
python.executable: /opt/pwevent/venv/bin/python
python.client.executable: /opt/pwevent/venv/bin/python"
# The FlinkDeployment's job: jarURI, entryClass and args, as the operator passes them.
mapfile -t JOB < <("$PYTHON" - "$RUN_DIR/chart.yaml" <<'PY'
import sys, yaml
(deployment,) = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "FlinkDeployment"]
job = deployment["spec"]["job"]
print("--jars"); print(job["jarURI"].replace("local://", "file://"))
print("--job-classname"); print(job["entryClass"])
print(*job["args"], sep="\n")
PY
)
COMMON=(--network host "${LIMITS[@]}" -e "JOB_MANAGER_RPC_ADDRESS=127.0.0.1" -e "FLINK_PROPERTIES=$PROPERTIES"
        -e PWEVENT_REQUIREMENT_KEY
        -v "$RUN_DIR/config:/opt/pwevent/config:ro" -v "$RUN_DIR/flink-data:/flink-data")
"${P[@]}" run -d --name "$JM" "${COMMON[@]}" "$IMAGE" standalone-job "${JOB[@]}" >/dev/null
"${P[@]}" run -d --name "$TM" "${COMMON[@]}" "$IMAGE" taskmanager >/dev/null
echo "build-image-run: $IMAGE: JobManager $JM (REST 127.0.0.1:$rest), TaskManager $TM; broker $BOOTSTRAP"

# 5. one committed release
out="$("$REPO_ROOT/.venv/bin/pwevent" tail --config "$RUN_DIR/config/job.yaml" --max-slots 1 --timeout "$TIMEOUT" 2>&1)" \
  || { echo "$out" >&2; logs; die "pwevent tail failed"; }
echo "$out"
if ! "$PYTHON" - "$RUN_DIR/config/job.yaml" <<'PY'
import sys
from pwevent.jobs.common.config import load_config
from pwevent.jobs.streaming.kafka_io import read_topic
from pwevent.jobs.streaming.settings import stream_settings
settings = stream_settings(load_config(sys.argv[1]), ".")
records = [m.json() for m in read_topic(settings.kafka, settings.kafka.topics["releases"], idle_s=2.0, max_s=30.0)]
if not records:
    sys.exit("no committed release on the release topic")
print(f"build-image-run: {len(records)} committed release(s) on {settings.kafka.topics['releases']}, first: "
      f"slot {records[0]['slot']}, {len(records[0]['counts'])} cells")
PY
then logs; die "no release"; fi
