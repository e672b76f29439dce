#!/usr/bin/env bash
# Download the Kafka broker (with runtime deps and a log4j2 binding), the Flink Kafka connector and
# Flink's self-contained Avro format jar (its relocated Apache Avro decodes Avro events in the JVM,
# jobs/streaming/jvm/pwevent/flink/avro/AvroFields.java) into a jar cache, using Maven's
# copy-dependencies on a throwaway POM.
#   PWEVENT_CACHE         cache dir (default <repo>/.cache/jars)
#   PWEVENT_KAFKA_VERSION kafka_2.13 version(s) to try, newest first (default below)
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${PWEVENT_CACHE:-$REPO_ROOT/.cache/jars}"
KAFKA_VERSIONS="${PWEVENT_KAFKA_VERSION:-4.4.0 4.3.1 4.2.2 4.1.2}"
FLINK_CONNECTOR="org.apache.flink:flink-sql-connector-kafka:5.0.0-2.2"
# The newest flink-sql-avro on Maven Central; only its relocated Apache Avro is used, no Flink API.
FLINK_AVRO="org.apache.flink:flink-sql-avro:2.1.0"
LOG4J_DEFAULT="2.24.3"  # only used when the broker does not already pull log4j in
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

die() { echo "fetch-jars: $*" >&2; exit 1; }
mvn_errors() { grep -a 'ERROR' "$WORK/mvn.log" | sed 's/\x1b\[[0-9;]*m//g' | head -n 1 >&2; }
command -v mvn >/dev/null || die "mvn not found on PATH"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK" "$CACHE/kafka.tmp" "$CACHE/flink.tmp"' EXIT  # .tmp dirs only survive a failure

# copy_deps OUT_DIR "g:a:v ..." -> copies the artifacts and their compile+runtime deps to OUT_DIR
copy_deps() {
  local out="$1" deps="" g a v
  for coord in $2; do
    IFS=: read -r g a v <<<"$coord"
    deps+="<dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>"
  done
  cat >"$WORK/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pwevent.local</groupId><artifactId>fetch-jars</artifactId><version>0</version>
  <packaging>pom</packaging>
  <dependencies>$deps</dependencies>
</project>
POM
  mkdir -p "$out"
  mvn -q -B -f "$WORK/pom.xml" "$DEP_PLUGIN:copy-dependencies" \
    -DincludeScope=runtime -DoutputDirectory="$out" >"$WORK/mvn.log" 2>&1
}

# --- Kafka broker ----------------------------------------------------------------------------
KAFKA_DIR="$CACHE/kafka"
if [[ -f "$KAFKA_DIR/.complete" ]]; then
  KAFKA_VERSION="$(cat "$KAFKA_DIR/.complete")"
else
  KAFKA_VERSION=""
  for v in $KAFKA_VERSIONS; do
    rm -rf "$KAFKA_DIR.tmp"
    if copy_deps "$KAFKA_DIR.tmp" "org.apache.kafka:kafka_2.13:$v"; then KAFKA_VERSION="$v"; break; fi
    echo "fetch-jars: kafka_2.13:$v did not resolve, trying the next version" >&2
  done
  [[ -n "$KAFKA_VERSION" ]] || { mvn_errors; die "no kafka_2.13 version of [$KAFKA_VERSIONS] resolved"; }

  # The broker POM has no slf4j binding: add the log4j2 one matching the resolved slf4j-api.
  slf4j_jar="$(cd "$KAFKA_DIR.tmp" && ls slf4j-api-*.jar 2>/dev/null | head -n1)"
  [[ -n "$slf4j_jar" ]] || die "slf4j-api not among the kafka dependencies"
  log4j_jar="$(cd "$KAFKA_DIR.tmp" && ls log4j-api-*.jar 2>/dev/null | head -n1)"
  LOG4J_VERSION="${log4j_jar:+${log4j_jar#log4j-api-}}"
  LOG4J_VERSION="${LOG4J_VERSION%.jar}"
  LOG4J_VERSION="${LOG4J_VERSION:-$LOG4J_DEFAULT}"
  case "$slf4j_jar" in
    slf4j-api-1.*) binding="log4j-slf4j-impl" ;;
    *)             binding="log4j-slf4j2-impl" ;;
  esac
  copy_deps "$KAFKA_DIR.tmp" "org.apache.logging.log4j:log4j-api:$LOG4J_VERSION org.apache.logging.log4j:log4j-core:$LOG4J_VERSION org.apache.logging.log4j:$binding:$LOG4J_VERSION" \
    || { mvn_errors; die "could not fetch log4j $LOG4J_VERSION jars"; }
  # The binding pulls its own slf4j-api; keep only the broker's.
  find "$KAFKA_DIR.tmp" -name 'slf4j-api-*.jar' ! -name "$slf4j_jar" -delete
  echo "$KAFKA_VERSION" >"$KAFKA_DIR.tmp/.complete"
  rm -rf "$KAFKA_DIR" && mv "$KAFKA_DIR.tmp" "$KAFKA_DIR"
fi

# --- Flink Kafka connector -------------------------------------------------------------------
FLINK_DIR="$CACHE/flink"
IFS=: read -r _ f_artifact f_version <<<"$FLINK_CONNECTOR"
FLINK_JAR="$FLINK_DIR/$f_artifact-$f_version.jar"
if [[ ! -f "$FLINK_JAR" ]]; then
  rm -rf "$FLINK_DIR.tmp"
  copy_deps "$FLINK_DIR.tmp" "$FLINK_CONNECTOR" \
    || { mvn_errors; die "could not fetch $FLINK_CONNECTOR"; }
  [[ -f "$FLINK_DIR.tmp/$f_artifact-$f_version.jar" ]] || die "$FLINK_CONNECTOR: jar missing after download"
  rm -rf "$FLINK_DIR" && mv "$FLINK_DIR.tmp" "$FLINK_DIR"
fi

# --- Flink's Avro format jar (one self-contained jar, in the connector's folder) --------------
IFS=: read -r _ a_artifact a_version <<<"$FLINK_AVRO"
AVRO_JAR="$FLINK_DIR/$a_artifact-$a_version.jar"
if [[ ! -f "$AVRO_JAR" ]]; then
  rm -rf "$FLINK_DIR.tmp"
  copy_deps "$FLINK_DIR.tmp" "$FLINK_AVRO" || { mvn_errors; die "could not fetch $FLINK_AVRO"; }
  [[ -f "$FLINK_DIR.tmp/$a_artifact-$a_version.jar" ]] || die "$FLINK_AVRO: jar missing after download"
  mv "$FLINK_DIR.tmp/$a_artifact-$a_version.jar" "$AVRO_JAR" && rm -rf "$FLINK_DIR.tmp"
fi

echo "kafka $KAFKA_VERSION: $KAFKA_DIR"
echo "flink connector: $FLINK_JAR"
echo "flink avro: $AVRO_JAR"
