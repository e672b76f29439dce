#!/usr/bin/env bash
# Single-node KRaft Kafka broker (combined broker+controller) on 127.0.0.1 for local runs/tests.
#   kafka.sh start|stop|status|env [--run-dir DIR] [--port N] [--secure [scram|mtls|oauth|oauth-jwks|kerberos]] [--owner PID]
# The bootstrap address is written to <run-dir>/bootstrap (default run dir <repo>/.run/kafka). The
# port a run dir got at its first start is kept in <run-dir>/port and reused by every later start.
#
# --secure MODE (at the first start of a run dir; later starts keep the run dir's mode); every mode
# has a broker certificate signed by a CA made here with openssl (<run-dir>/tls/ca.pem is what
# clients trust); docs/operations.md, "Security":
#   scram (the default of a bare --secure): the client listener is SASL_SSL with SCRAM-SHA-512, the
#     StandardAuthorizer denies whatever no ACL allows, and the SCRAM users admin (super user),
#     pwevent-job, pwevent-producer and pwevent-analyst are created with random passwords in
#     <run-dir>/secrets/<user> (mode 600); the ACLs of the default topic names are then granted by
#     deploy/local/kafka-acls.py.
#   mtls: the client listener is SSL and requires a client certificate signed by the CA
#     (ssl.client.auth=required); each user above gets one, as <run-dir>/tls/<user>.p12 (PKCS12,
#     password <run-dir>/secrets/<user>) and as PEM <run-dir>/tls/<user>.pem + <run-dir>/tls/<user>.key
#     (the key encrypted with the same password); the principal is the certificate's CN.
#   oauth: the client listener is SASL_SSL with OAUTHBEARER and Kafka's unsecured JWS validator
#     (testing only: any unsigned token with a `sub` and an unexpired `exp` is accepted, none is refused
#     for its subject), which is Kafka's default server callback handler of OAUTHBEARER.
#   oauth-jwks: the client listener is SASL_SSL with OAUTHBEARER and Kafka's signed-token validator
#     (OAuthBearerValidatorCallbackHandler): a token must be an RS256 JWT signed by the key of an
#     identity provider of its own (deploy/local/token-endpoint.sh, in <run-dir>/idp, on loopback),
#     published at <base>/jwks (sasl.oauthbearer.jwks.endpoint.url), with aud "kafka" and iss <base>,
#     unexpired. Its client-credentials grant (<base>/oauth2/token) gives each user above a token, the
#     client id being the user and the secret <run-dir>/secrets/<user>; the broker logs itself in that
#     way as admin. <run-dir>/idp/endpoint holds <base>; `stop` stops the provider too. Every JVM
#     that fetches from it (the broker, clients) needs -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls
#     listing the URLs (`env` prints them).
#   kerberos: the client listener is SASL_SSL with GSSAPI, advertised as localhost (the host of the
#     service principal kafka/localhost@PWEVENT.LOCAL that Java and Python clients ask for; clients
#     bootstrap at localhost:PORT too). A KDC of its own (deploy/local/kdc.sh, in <run-dir>/kdc) has a
#     principal per user above, with <run-dir>/kdc/keytabs/<user>.keytab, and the client
#     configuration <run-dir>/kdc/krb5.conf; `stop` stops the KDC too.
#   mtls, oauth, oauth-jwks and kerberos authenticate only (no authorizer).
# <run-dir>/admin.properties is a Java client configuration of the admin user.
# --owner PID (start): a watcher (its own session, output in <run-dir>/owner.out) stops the broker,
# by its pid, once process PID has exited, so that a test runner killed without its clean-up leaves
# no broker behind.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/pids.sh
source "$SCRIPT_DIR/pids.sh"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
KAFKA_JARS="${PWEVENT_CACHE:-$REPO_ROOT/.cache/jars}/kafka"
READY_TIMEOUT=60
STOP_TIMEOUT=30

usage() {
  echo "usage: $0 start|stop|status|env [--run-dir DIR] [--port N] [--secure [scram|mtls|oauth|oauth-jwks|kerberos]] [--owner PID]" >&2
  exit 2
}
die() { echo "kafka.sh: $*" >&2; exit 1; }

[[ $# -ge 1 ]] || usage
CMD="$1"; shift
RUN_DIR="$REPO_ROOT/.run/kafka"
PORT=9092
PORT_GIVEN=""
SECURE=""
OWNER=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --owner) [[ "${2:-}" =~ ^[0-9]+$ ]] || usage; OWNER="$2"; shift 2 ;;
    --port) PORT="$2"; PORT_GIVEN=1; shift 2 ;;
    --secure)
      SECURE=scram; shift
      if [[ $# -gt 0 && "$1" != --* ]]; then
        case "$1" in scram|mtls|oauth|oauth-jwks|kerberos) SECURE="$1"; shift ;; *) usage ;; esac
      fi ;;
    *) usage ;;
  esac
done
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
PID_FILE="$RUN_DIR/kafka.pid"
BOOTSTRAP_FILE="$RUN_DIR/bootstrap"
PORT_FILE="$RUN_DIR/port"
MODE_FILE="$RUN_DIR/mode"
SECRETS="$RUN_DIR/secrets"
TLS="$RUN_DIR/tls"
USERS="admin pwevent-job pwevent-producer pwevent-analyst"
KDC="$RUN_DIR/kdc"
REALM=PWEVENT.LOCAL
IDP="$RUN_DIR/idp"
# The Kafka 4 client's list of URLs an OAUTHBEARER login or validator may fetch from (JVM system property).
ALLOWED_URLS_PROPERTY=org.apache.kafka.sasl.oauthbearer.allowed.urls

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

secret() { cat "$SECRETS/$1"; }
run_mode() {
  local mode; mode="$(cat "$MODE_FILE" 2>/dev/null || echo plaintext)"
  [[ "$mode" == secure ]] && mode=scram
  echo "$mode"
}

# secure_material: random passwords of the users and of the keystore, a CA and the broker's key
# pair and certificate (for 127.0.0.1 and localhost), made once per run dir.
secure_material() {
  mkdir -p "$SECRETS" "$TLS"
  chmod 700 "$SECRETS" "$TLS"
  local user
  for user in $USERS keystore; do
    [[ -s "$SECRETS/$user" ]] || (umask 077; head -c 18 /dev/urandom | base64 | tr '+/' '-_' >"$SECRETS/$user")
  done
  [[ -s "$TLS/ca.pem" && -s "$TLS/broker.p12" ]] && return
  rm -f "$TLS"/*
  local pw="$SECRETS/keystore" ca_key="$TLS/ca-key.pem"
  (umask 077
   openssl req -x509 -newkey rsa:2048 -nodes -keyout "$ca_key" -subj "/CN=pwevent local CA" -days 3650 \
     -out "$TLS/ca.pem" 2>/dev/null &&
   openssl pkcs12 -export -in "$TLS/ca.pem" -inkey "$ca_key" -name ca -passout "file:$pw" -out "$TLS/ca.p12" 2>/dev/null &&
   openssl req -new -newkey rsa:2048 -nodes -keyout "$TLS/broker.key" -subj "/CN=localhost" -out "$TLS/broker.csr" \
     2>/dev/null &&
   openssl x509 -req -in "$TLS/broker.csr" -CA "$TLS/ca.pem" -CAkey "$ca_key" -set_serial "0x$(openssl rand -hex 16)" \
     -days 3650 -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n') -out "$TLS/broker.pem" 2>/dev/null &&
   openssl pkcs12 -export -in "$TLS/broker.pem" -inkey "$TLS/broker.key" -certfile "$TLS/ca.pem" -name broker \
     -passout "file:$pw" -out "$TLS/broker.p12" 2>/dev/null) \
    || { rm -f "$ca_key"; die "openssl could not make the TLS material in $TLS"; }
  rm -f "$ca_key" "$TLS/broker.key" "$TLS/broker.csr"
}

# client_certificates: a key pair and a CA-signed certificate (CN=<user>) per user, as a PKCS12
# keystore for Java clients and as PEM files for Python ones, all protected by the user's password
# (openssl: a keytool call is a JVM start, and there would be twenty).
client_certificates() {
  local user pw ca_key="$TLS/ca-key.pem"
  (umask 077; openssl pkcs12 -in "$TLS/ca.p12" -nocerts -nodes -passin "file:$SECRETS/keystore" \
    -out "$ca_key" 2>/dev/null) || die "openssl could not read the CA's key from $TLS/ca.p12"
  for user in $USERS; do
    [[ -s "$TLS/$user.p12" && -s "$TLS/$user.key" ]] && continue
    pw="$SECRETS/$user"
    rm -f "$TLS/$user".*
    (umask 077
     openssl req -new -newkey rsa:2048 -subj "/CN=$user" -keyout "$TLS/$user.key" -passout "file:$pw" \
       -out "$TLS/$user.csr" 2>/dev/null &&
     openssl x509 -req -in "$TLS/$user.csr" -CA "$TLS/ca.pem" -CAkey "$ca_key" \
       -set_serial "0x$(openssl rand -hex 16)" -days 3650 -out "$TLS/$user.pem" 2>/dev/null &&
     openssl pkcs12 -export -in "$TLS/$user.pem" -inkey "$TLS/$user.key" -passin "file:$pw" \
       -certfile "$TLS/ca.pem" -name "$user" -passout fd:3 3<"$pw" -out "$TLS/$user.p12" 2>/dev/null) \
      || { rm -f "$ca_key"; die "openssl could not make the client certificate of $user in $TLS"; }
    rm -f "$TLS/$user.csr"
  done
  rm -f "$ca_key"
}

# The SASL_SSL listener with OAUTHBEARER on `port` and the controller on `cport` (the oauth modes).
oauthbearer_listener() {
  cat <<PROPS
listeners=SASL_SSL://127.0.0.1:$1,CONTROLLER://127.0.0.1:$2
advertised.listeners=SASL_SSL://127.0.0.1:$1
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=OAUTHBEARER
sasl.mechanism.inter.broker.protocol=OAUTHBEARER
PROPS
}

# The broker's client listener: PLAINTEXT, or per --secure mode SASL_SSL with SCRAM-SHA-512 (also
# between the broker and itself, as admin) and the StandardAuthorizer (scram), SSL requiring client
# certificates (mtls), SASL_SSL with OAUTHBEARER and the unsecured validator (oauth), SASL_SSL with
# OAUTHBEARER and the signed-token validator against the identity provider's JWKS, the broker logging
# itself in as admin by the provider's client-credentials grant (oauth-jwks), SASL_SSL with
# GSSAPI, advertised as localhost, the broker itself as kafka/localhost (kerberos). With scram the
# controller listener authenticates the broker with SASL PLAIN (SCRAM credentials live in the
# metadata the controller serves, so cannot be its own); the other modes have no authorizer and a
# PLAINTEXT controller listener on loopback.
listener_config() {
  local port="$1" cport="$2"
  if [[ -z "$SECURE" ]]; then
    cat <<PROPS
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
PROPS
    return
  fi
  local admin keystore; admin="$(secret admin)"; keystore="$(secret keystore)"
  cat <<PROPS
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS/broker.p12
ssl.keystore.password=$keystore
ssl.key.password=$keystore
ssl.truststore.type=PEM
ssl.truststore.location=$TLS/ca.pem
PROPS
  case "$SECURE" in
    scram) cat <<PROPS
listeners=SASL_SSL://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=SASL_SSL://127.0.0.1:$port
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin";
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="$admin" user_admin="$admin";
ssl.client.auth=none
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
allow.everyone.if.no.acl.found=false
PROPS
    ;;
    mtls) cat <<PROPS
listeners=SSL://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=SSL://127.0.0.1:$port
inter.broker.listener.name=SSL
listener.security.protocol.map=SSL:SSL,CONTROLLER:PLAINTEXT
ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]+)\$/\$1/,DEFAULT
PROPS
    ;;
    oauth) oauthbearer_listener "$port" "$cport"; cat <<PROPS
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
ssl.client.auth=none
PROPS
    ;;
    oauth-jwks)
      local base; base="$(cat "$IDP/endpoint")"
      oauthbearer_listener "$port" "$cport"
      cat <<PROPS
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="admin" clientSecret="$admin";
listener.name.sasl_ssl.oauthbearer.sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler
listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.token.endpoint.url=$base/oauth2/token
sasl.oauthbearer.jwks.endpoint.url=$base/jwks
sasl.oauthbearer.expected.audience=kafka
sasl.oauthbearer.expected.issuer=$base
ssl.client.auth=none
PROPS
    ;;
    kerberos) cat <<PROPS
listeners=SASL_SSL://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=SASL_SSL://localhost:$port
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=GSSAPI
sasl.mechanism.inter.broker.protocol=GSSAPI
sasl.kerberos.service.name=kafka
listener.name.sasl_ssl.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="$KDC/keytabs/kafka_localhost.keytab" principal="kafka/localhost@$REALM";
ssl.client.auth=none
PROPS
    ;;
  esac
}

# admin.properties: the admin user's Java client configuration in the run dir's mode.
write_admin_properties() {
  (umask 077
  case "$SECURE" in
    scram) cat <<PROPS
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(secret admin)";
PROPS
    ;;
    mtls) cat <<PROPS
security.protocol=SSL
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS/admin.p12
ssl.keystore.password=$(secret admin)
ssl.key.password=$(secret admin)
PROPS
    ;;
    oauth) cat <<PROPS
security.protocol=SASL_SSL
sasl.mechanism=OAUTHBEARER
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
PROPS
    ;;
    oauth-jwks) cat <<PROPS
security.protocol=SASL_SSL
sasl.mechanism=OAUTHBEARER
sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler
sasl.oauthbearer.token.endpoint.url=$(cat "$IDP/endpoint")/oauth2/token
sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="admin" clientSecret="$(secret admin)";
PROPS
    ;;
    kerberos) cat <<PROPS
security.protocol=SASL_SSL
sasl.mechanism=GSSAPI
sasl.kerberos.service.name=kafka
sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="$KDC/keytabs/admin.keytab" principal="admin@$REALM";
PROPS
    ;;
  esac
  cat <<PROPS
ssl.truststore.type=PEM
ssl.truststore.location=$TLS/ca.pem
PROPS
  ) >"$RUN_DIR/admin.properties"
}

write_config() {
  local port="$1" cport="$2"
  (umask 077; cat >"$RUN_DIR/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
# Static voters: the formatter stores no controller address, so the ports may change between runs.
controller.quorum.voters=1@127.0.0.1:$cport
$(listener_config "$port" "$cport")
controller.listener.names=CONTROLLER
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
  )
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
  # The run dir's mode is fixed at its first start (the SCRAM users are written when it is formatted).
  # A mode file reading "secure" is that of a run dir made before the modes had names: scram.
  local formatted=""; [[ -f "$RUN_DIR/data/meta.properties" ]] && formatted=1
  if [[ -n "$formatted" ]]; then
    local mode; mode="$(run_mode)"
    [[ -z "$SECURE" || "$mode" == "$SECURE" ]] \
      || die "$RUN_DIR was first started in mode $mode, not --secure $SECURE; use another --run-dir"
    [[ "$mode" == plaintext ]] || SECURE="$mode"
  fi
  echo "${SECURE:-plaintext}" >"$MODE_FILE"
  # The port of the first start, kept: clients configured with it must find this broker again.
  if [[ -z "$PORT_GIVEN" && -s "$PORT_FILE" ]]; then
    PORT="$(cat "$PORT_FILE")"
    port_free "$PORT" || die "port $PORT, this broker's since its first start, is taken by another process"
  else
    port_free "$PORT" || PORT="$(free_port)"
  fi
  echo "$PORT" >"$PORT_FILE"
  local cport; cport="$(free_port)"
  while [[ "$cport" == "$PORT" ]]; do cport="$(free_port)"; done
  local format_extra=()
  if [[ -n "$SECURE" ]]; then
    secure_material
    if [[ "$SECURE" == mtls ]]; then client_certificates; fi
    if [[ "$SECURE" == kerberos ]]; then
      "$SCRIPT_DIR/kdc.sh" start --run-dir "$KDC" --principals "kafka/localhost $USERS" >/dev/null
    fi
    if [[ "$SECURE" == oauth-jwks ]]; then
      "$SCRIPT_DIR/token-endpoint.sh" start --run-dir "$IDP" --secrets "$SECRETS" >/dev/null
    fi
    write_admin_properties
    local user
    if [[ "$SECURE" == scram ]]; then
      for user in $USERS; do format_extra+=(--add-scram "SCRAM-SHA-512=[name=$user,password=$(secret "$user")]"); done
    fi
  fi
  write_config "$PORT" "$cport"
  mkdir -p "$RUN_DIR/logs" "$RUN_DIR/data"

  local cp="$KAFKA_JARS/*" host=127.0.0.1 jvm=()
  if [[ "$SECURE" == kerberos ]]; then host=localhost; jvm=(-Djava.security.krb5.conf="$KDC/krb5.conf"); fi
  if [[ "$SECURE" == oauth-jwks ]]; then jvm=(-D"$ALLOWED_URLS_PROPERTY=$(allowed_urls)"); fi
  java -cp "$cp" kafka.tools.StorageTool format -t "$(cluster_id)" -c "$RUN_DIR/server.properties" \
    --ignore-formatted "${format_extra[@]}" >"$RUN_DIR/format.out" 2>&1 \
    || { cat "$RUN_DIR/format.out" >&2; die "format failed"; }

  # setsid: the broker outlives the calling shell's process group (e.g. Ctrl-C in a test runner).
  setsid java -Xms512m -Xmx512m -Djava.awt.headless=true ${jvm[@]+"${jvm[@]}"} \
    -Dlog4j2.configurationFile="$RUN_DIR/log4j2.properties" -Dkafka.logs.dir="$RUN_DIR/logs" \
    -cp "$cp" kafka.Kafka "$RUN_DIR/server.properties" >"$RUN_DIR/kafka.out" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PID_FILE"
  # at once: an owner may die while this script waits below
  [[ -z "$OWNER" ]] || watch_owner "$OWNER" "$pid" "$SCRIPT_DIR/kafka.sh" "$RUN_DIR"

  local deadline=$((SECONDS + READY_TIMEOUT))
  until port_open "$PORT"; do
    kill -0 "$pid" 2>/dev/null || fail_start "broker exited during start-up"
    (( SECONDS < deadline )) || fail_start "port $PORT not open after ${READY_TIMEOUT}s"
    sleep 0.2
  done
  local left=$((deadline - SECONDS)); (( left > 0 )) || left=1
  java ${jvm[@]+"${jvm[@]}"} -cp "$cp" "$SCRIPT_DIR/KafkaReady.java" "$host:$PORT" "$((left * 1000))" \
    ${SECURE:+"$RUN_DIR/admin.properties"} >>"$RUN_DIR/kafka.out" 2>&1 \
    || fail_start "no metadata response within ${READY_TIMEOUT}s"
  # The port may answer for another broker that took it between port_free and our bind (ours then
  # exits with "Unable to start acceptor"): only our own log saying it started counts.
  until grep -q "Kafka Server started" "$RUN_DIR/logs/server.log" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || fail_start "broker exited during start-up (port $PORT taken?)"
    (( SECONDS < deadline )) || fail_start "broker not started after ${READY_TIMEOUT}s"
    sleep 0.2
  done
  if [[ "$SECURE" == scram ]]; then
    "${PWEVENT_PYTHON:-$REPO_ROOT/.venv/bin/python}" "$SCRIPT_DIR/kafka-acls.py" --bootstrap "127.0.0.1:$PORT" \
      --run-dir "$RUN_DIR" >>"$RUN_DIR/kafka.out" 2>&1 || fail_start "granting the ACLs failed"
  fi
  echo "$host:$PORT" >"$BOOTSTRAP_FILE"
  cat "$BOOTSTRAP_FILE"
}

stop_broker() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE" "$BOOTSTRAP_FILE"; stop_kdc; echo "not running"; return
  fi
  stop_pid "$pid" "$STOP_TIMEOUT"
  rm -f "$PID_FILE" "$BOOTSTRAP_FILE"
  stop_kdc
  echo "stopped"
}

stop_kdc() {
  [[ ! -d "$KDC" ]] || "$SCRIPT_DIR/kdc.sh" stop --run-dir "$KDC"
  [[ ! -d "$IDP" ]] || "$SCRIPT_DIR/token-endpoint.sh" stop --run-dir "$IDP" >/dev/null
}

# allowed_urls: the identity provider's token and key set URLs (oauth-jwks), comma-separated.
allowed_urls() { local base; base="$(cat "$IDP/endpoint")"; echo "$base/oauth2/token,$base/jwks"; }

case "$CMD" in
  start) start_broker ;;
  stop) stop_broker ;;
  status)
    if pid="$(running_pid)"; then echo "running (pid $pid, bootstrap $(cat "$BOOTSTRAP_FILE" 2>/dev/null))"
    else echo "not running"; exit 3; fi ;;
  env)
    running_pid >/dev/null && [[ -s "$BOOTSTRAP_FILE" ]] || die "not running (start it with: $0 start)"
    echo "export PWEVENT_BOOTSTRAP=$(cat "$BOOTSTRAP_FILE")"
    if [[ "$(run_mode)" != plaintext ]]; then
      # Paths only: a password is read from its file by whoever needs it, never printed.
      echo "export PWEVENT_KAFKA_MODE=$(run_mode)"
      echo "export PWEVENT_KAFKA_CA=$TLS/ca.pem"
      echo "export PWEVENT_KAFKA_TLS=$TLS"
      echo "export PWEVENT_KAFKA_SECRETS=$SECRETS"
      if [[ "$(run_mode)" == kerberos ]]; then
        echo "export PWEVENT_KRB5_CONF=$KDC/krb5.conf"
        echo "export PWEVENT_KEYTABS=$KDC/keytabs"
      fi
      if [[ "$(run_mode)" == oauth-jwks ]]; then
        echo "export PWEVENT_OAUTH_TOKEN_ENDPOINT=$(cat "$IDP/endpoint")/oauth2/token"
        echo "export PWEVENT_OAUTH_JWKS=$(cat "$IDP/endpoint")/jwks"
      fi
    fi ;;
  *) usage ;;
esac
