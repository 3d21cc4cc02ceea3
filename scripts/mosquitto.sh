#!/usr/bin/env bash
# A throwaway MQTT broker for the tests: Debian's mosquitto on three free loopback ports, one
# anonymous, one requiring a password, and one with access rights (mosquitto's dynamic
# security plugin: user ferry-limited may subscribe only under limited/, so a refused
# subscription can be tested; mosquitto's acl_file never refuses one), persistence on in a
# temporary directory (a restart keeps persistent sessions and their queued messages).
#
#   bash scripts/mosquitto.sh install          # apt-get install mosquitto mosquitto-clients when missing
#   eval "$(bash scripts/mosquitto.sh start)"  # exports FERRY_MQTT_URL, FERRY_MQTT_AUTH_URL,
#                                              # FERRY_MQTT_USER, FERRY_MQTT_PASSWORD, FERRY_MQTT_DIR,
#                                              # FERRY_MQTT_ACL_URL, FERRY_MQTT_LIMITED_USER,
#                                              # FERRY_MQTT_LIMITED_PASSWORD
#   bash scripts/mosquitto.sh restart          # a graceful restart (SIGTERM: the broker saves
#                                              # its sessions), same ports and data
#   bash scripts/mosquitto.sh down; bash scripts/mosquitto.sh up   # the same, in two steps (an outage)
#   bash scripts/mosquitto.sh stop             # stops it and removes the directory
#   eval "$(bash scripts/mosquitto.sh paho)"   # a venv with paho-mqtt (the tests' independent
#                                              # MQTT client): exports FERRY_PAHO_PYTHON
set -euo pipefail

PAHO=paho-mqtt==2.2.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
user=ferry
password=ferry-mqtt-secret
limited_user=ferry-limited
limited_password=ferry-mqtt-limited-secret
# Debian's mosquitto ships the plugin under its multiarch directory.
dynsec=$(ls /usr/lib/*/mosquitto_dynamic_security.so /usr/lib/mosquitto_dynamic_security.so 2>/dev/null | head -1 || true)
# The broker's in-flight window per client (QoS 1 and 2 messages sent and not yet
# acknowledged): the bound on what a consumer that crashes gets again. Queued messages of
# an offline persistent session are never dropped (max_queued_messages 0).
inflight=${FERRY_MQTT_INFLIGHT:-1000}

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# launch starts the broker over directory $1 and waits until both ports answer.
launch() {
  local dir=$1 port auth acl
  port=$(cat "$dir/port")
  auth=$(cat "$dir/auth_port")
  acl=$(cat "$dir/acl_port")
  setsid mosquitto -c "$dir/mosquitto.conf" >>"$dir/broker.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$auth") 2>/dev/null &&
      (exec 3<>"/dev/tcp/127.0.0.1/$acl") 2>/dev/null; then return 0; fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "mosquitto.sh: mosquitto did not start on 127.0.0.1:$port, :$auth and :$acl" >&2
  cat "$dir/broker.log" >&2
  return 1
}

# halt stops the broker with SIGTERM (it writes its persistence file on the way out), or
# SIGKILL after 10 s.
halt() {
  local dir=$1 pid
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/pid"
}

case "${1:-}" in
install)
  if ! command -v mosquitto >/dev/null && [ ! -x /usr/sbin/mosquitto ] || ! command -v mosquitto_sub >/dev/null; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mosquitto mosquitto-clients >&2
  fi
  ;;
start)
  PATH="$PATH:/usr/sbin"
  command -v mosquitto >/dev/null || { echo "mosquitto.sh: mosquitto is missing (run: $0 install)" >&2; exit 1; }
  dir=$(mktemp -d /tmp/ferry-mqtt.XXXXXX)
  mkdir -p "$dir/data"
  port=$(free_port)
  auth=$(free_port)
  while [ "$auth" = "$port" ]; do auth=$(free_port); done
  acl=$(free_port)
  while [ "$acl" = "$port" ] || [ "$acl" = "$auth" ]; do acl=$(free_port); done
  echo "$port" >"$dir/port"
  echo "$auth" >"$dir/auth_port"
  echo "$acl" >"$dir/acl_port"
  [ -n "$dynsec" ] || { echo "mosquitto.sh: mosquitto_dynamic_security.so is missing under /usr/lib (Debian's mosquitto ships it)" >&2; rm -rf "$dir"; exit 1; }
  admin_password=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
  mosquitto_ctrl dynsec init "$dir/dynsec.json" admin "$admin_password" >/dev/null
  : >"$dir/passwd"
  mosquitto_passwd -b "$dir/passwd" "$user" "$password" >/dev/null 2>&1
  chmod 0600 "$dir/passwd"
  cat >"$dir/mosquitto.conf" <<CONF
# Written by scripts/mosquitto.sh.
user $(id -un)
persistence true
persistence_location $dir/data/
autosave_interval 1
max_queued_messages 0
max_inflight_messages $inflight
per_listener_settings true
listener $port 127.0.0.1
allow_anonymous true
listener $auth 127.0.0.1
allow_anonymous false
password_file $dir/passwd
listener $acl 127.0.0.1
allow_anonymous false
plugin $dynsec
plugin_opt_config_file $dir/dynsec.json
CONF
  launch "$dir" || { rm -rf "$dir"; exit 1; }
  # The plugin keeps what mosquitto_ctrl sets in dynsec.json, so a restart keeps it.
  ctrl() { mosquitto_ctrl -h 127.0.0.1 -p "$acl" -u admin -P "$admin_password" dynsec "$@" >/dev/null 2>&1; }
  ctrl createClient "$limited_user" -p "$limited_password" &&
    ctrl createRole limited &&
    ctrl addRoleACL limited subscribePattern 'limited/#' allow &&
    ctrl addRoleACL limited publishClientSend 'limited/#' allow &&
    ctrl addClientRole "$limited_user" limited ||
    { echo "mosquitto.sh: mosquitto_ctrl could not set up $limited_user" >&2; halt "$dir"; rm -rf "$dir"; exit 1; }
  echo "export FERRY_MQTT_DIR=$dir"
  echo "export FERRY_MQTT_URL=tcp://127.0.0.1:$port"
  echo "export FERRY_MQTT_AUTH_URL=tcp://127.0.0.1:$auth"
  echo "export FERRY_MQTT_USER=$user"
  echo "export FERRY_MQTT_PASSWORD=$password"
  echo "export FERRY_MQTT_ACL_URL=tcp://127.0.0.1:$acl"
  echo "export FERRY_MQTT_LIMITED_USER=$limited_user"
  echo "export FERRY_MQTT_LIMITED_PASSWORD=$limited_password"
  echo "export FERRY_MQTT_INFLIGHT=$inflight"
  ;;
restart)
  PATH="$PATH:/usr/sbin"
  dir=${FERRY_MQTT_DIR:?FERRY_MQTT_DIR is not set (eval the output of start)}
  halt "$dir"
  launch "$dir"
  ;;
down) # an outage: the broker stopped, its data and ports kept for up
  dir=${FERRY_MQTT_DIR:?FERRY_MQTT_DIR is not set (eval the output of start)}
  halt "$dir"
  ;;
up)
  PATH="$PATH:/usr/sbin"
  dir=${FERRY_MQTT_DIR:?FERRY_MQTT_DIR is not set (eval the output of start)}
  launch "$dir"
  ;;
paho)
  venv="${FERRY_PAHO_VENV:-$root/.venv-mqtt}"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
    printf '*\n' >"$venv/.gitignore" # keep the venv out of git
  fi
  if ! "$venv/bin/python" -c "import paho.mqtt" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$PAHO" >&2
  fi
  echo "export FERRY_PAHO_PYTHON=$venv/bin/python"
  ;;
stop)
  dir=${FERRY_MQTT_DIR:?FERRY_MQTT_DIR is not set (eval the output of start)}
  halt "$dir"
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 install|start|restart|down|up|stop|paho" >&2
  exit 2
  ;;
esac
