#!/usr/bin/env bash
# A Kerberos KDC (MIT krb5, Debian's krb5-kdc and krb5-admin-server) on 127.0.0.1 for the Kerberos
# broker of kafka.sh (`--secure kerberos`) and its tests.
#   kdc.sh start|stop|status --run-dir DIR [--principals "NAME ..."]
# Realm PWEVENT.LOCAL, one free loopback port for UDP and TCP. `start` writes, once per run dir, the
# database and a random key per principal of --principals (pre-authentication required, so that a
# wrong key is refused by the KDC, as Active Directory does), exported to DIR/keytabs/<name>.keytab
# (mode 600; a '/' in the name becomes '_'), and DIR/krb5.conf, the client configuration (TCP only,
# no DNS, no reverse lookups: KRB5_CONFIG for MIT clients, -Djava.security.krb5.conf for Java).
# Later starts reuse them (and the port). The server's pid is in DIR/krb5kdc.pid; `stop` stops it by
# that pid. Its log: DIR/kdc.log.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=deploy/local/pids.sh
source "$SCRIPT_DIR/pids.sh"
REALM=PWEVENT.LOCAL
READY_TIMEOUT=20
STOP_TIMEOUT=10

usage() { echo "usage: $0 start|stop|status --run-dir DIR [--principals \"NAME ...\"]" >&2; exit 2; }
die() { echo "kdc.sh: $*" >&2; exit 1; }

[[ $# -ge 1 ]] || usage
CMD="$1"; shift
RUN_DIR=""
PRINCIPALS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --run-dir) RUN_DIR="$2"; shift 2 ;;
    --principals) PRINCIPALS="$2"; shift 2 ;;
    *) usage ;;
  esac
done
[[ -n "$RUN_DIR" ]] || usage
mkdir -p "$RUN_DIR"
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
PID_FILE="$RUN_DIR/krb5kdc.pid"
export KRB5_CONFIG="$RUN_DIR/krb5.conf" KRB5_KDC_PROFILE="$RUN_DIR/kdc.conf"

running_pid() { live_pid "$PID_FILE" 'krb5kdc'; }

write_configuration() {
  local port="$1"
  cat >"$RUN_DIR/kdc.conf" <<CONF
[kdcdefaults]
 kdc_listen = 127.0.0.1:$port
 kdc_tcp_listen = 127.0.0.1:$port
[realms]
 $REALM = {
  database_name = $RUN_DIR/principal
  key_stash_file = $RUN_DIR/stash
  acl_file = $RUN_DIR/kadm5.acl
  kdc_listen = 127.0.0.1:$port
  kdc_tcp_listen = 127.0.0.1:$port
  max_life = 10h 0m 0s
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
 }
[logging]
 kdc = FILE:$RUN_DIR/kdc.log
CONF
  : >"$RUN_DIR/kadm5.acl"
  cat >"$RUN_DIR/krb5.conf" <<CONF
[libdefaults]
 default_realm = $REALM
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
 ticket_lifetime = 10h
[realms]
 $REALM = {
  kdc = 127.0.0.1:$port
 }
[domain_realm]
 localhost = $REALM
 127.0.0.1 = $REALM
CONF
}

# The database and the principals' keytabs, made once per run dir.
create_realm() {
  [[ -f "$RUN_DIR/principal" ]] && return
  command -v kdb5_util >/dev/null && command -v kadmin.local >/dev/null \
    || die "kdb5_util / kadmin.local not found (apt-get install krb5-kdc krb5-admin-server)"
  local master name
  master="$(head -c 18 /dev/urandom | base64)"
  kdb5_util create -s -r "$REALM" -P "$master" >"$RUN_DIR/create.out" 2>&1 || { cat "$RUN_DIR/create.out" >&2; die "kdb5_util create failed"; }
  mkdir -p "$RUN_DIR/keytabs"
  chmod 700 "$RUN_DIR/keytabs"
  for name in $PRINCIPALS; do
    kadmin.local -r "$REALM" -q "addprinc -randkey +requires_preauth $name@$REALM" >>"$RUN_DIR/create.out" 2>&1 \
      && (umask 077; kadmin.local -r "$REALM" -q "ktadd -k $RUN_DIR/keytabs/${name//\//_}.keytab $name@$REALM" \
            >>"$RUN_DIR/create.out" 2>&1) \
      || { cat "$RUN_DIR/create.out" >&2; die "could not create principal $name"; }
  done
}

start_kdc() {
  if running_pid >/dev/null; then return; fi
  command -v krb5kdc >/dev/null || die "krb5kdc not found (apt-get install krb5-kdc krb5-admin-server)"
  local port
  if [[ -s "$RUN_DIR/port" ]]; then port="$(cat "$RUN_DIR/port")"; else port="$(free_port)"; echo "$port" >"$RUN_DIR/port"; fi
  write_configuration "$port"
  create_realm
  rm -f "$PID_FILE"
  # -n: in the foreground, so that $! is the server; setsid: out of the caller's process group.
  setsid krb5kdc -n -P "$RUN_DIR/krb5kdc.pidfile" >"$RUN_DIR/krb5kdc.out" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  local deadline=$((SECONDS + READY_TIMEOUT))
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    kill -0 "$(cat "$PID_FILE")" 2>/dev/null || { cat "$RUN_DIR/krb5kdc.out" "$RUN_DIR/kdc.log" >&2 2>/dev/null; die "krb5kdc exited during start-up"; }
    (( SECONDS < deadline )) || die "krb5kdc not listening on 127.0.0.1:$port after ${READY_TIMEOUT}s"
    sleep 0.1
  done
}

stop_kdc() {
  local pid
  if pid="$(running_pid)"; then stop_pid "$pid" "$STOP_TIMEOUT"; fi
  rm -f "$PID_FILE"
}

case "$CMD" in
  start) start_kdc ;;
  stop) stop_kdc ;;
  status) if pid="$(running_pid)"; then echo "running (pid $pid, 127.0.0.1:$(cat "$RUN_DIR/port"))"; else echo "not running"; exit 3; fi ;;
  *) usage ;;
esac
