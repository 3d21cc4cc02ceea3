#!/usr/bin/env bash
# A throwaway MongoDB-compatible server for the tests: FerretDB v1 (Go, from the module
# proxy; it speaks MongoDB's wire protocol and stores documents in SQLite files) with its
# SQLite backend in a temporary directory, on a free loopback port, with authentication
# on: one user, FERRY_MONGODB_USER, created at start (SCRAM-SHA-256).
#
#   bash scripts/ferretdb.sh install          # builds ferretdb into GOPATH/bin when missing
#   eval "$(bash scripts/ferretdb.sh start)"  # exports FERRY_MONGODB_URI (with the user's
#                                             # password), FERRY_MONGODB_USER,
#                                             # FERRY_MONGODB_PASSWORD, FERRY_MONGODB_DIR
#   bash scripts/ferretdb.sh restart          # kill -9 and start again on the same port and data
#   bash scripts/ferretdb.sh down; bash scripts/ferretdb.sh up   # the same, in two steps
#   bash scripts/ferretdb.sh stop             # kills it and removes the directory
#   eval "$(bash scripts/ferretdb.sh pymongo)"  # a venv with pymongo (the tests' reader):
#                                             # exports FERRY_PYMONGO_PYTHON
#
# `go install` of FerretDB builds a binary that panics at start: its build/version package
# embeds a version.txt that its release process writes and the module does not ship. So
# install copies the module out of the module cache, writes that file and builds there.
set -euo pipefail

VERSION=v1.24.2
PYMONGO=pymongo==4.20.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(go env GOPATH)/bin/ferretdb-$VERSION"
user=ferry
password=ferry-test-password

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# launch starts FerretDB on port $2 over directory $1 and waits until it accepts
# connections. The user is created by --setup-* at the first start (kept in the SQLite
# files afterwards).
launch() {
  local dir=$1 port=$2
  setsid "$bin" --handler=sqlite --sqlite-url="file:$dir/data/" --state-dir="$dir/state" \
    --listen-addr="127.0.0.1:$port" --debug-addr=- --telemetry=disable --log-level=warn \
    --test-enable-new-auth --setup-database=admin --setup-username="$user" --setup-password="$password" \
    >>"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  for _ in $(seq 1 600); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "ferretdb.sh: FerretDB did not start on 127.0.0.1:$port" >&2
  cat "$dir/server.log" >&2
  return 1
}

halt() {
  local dir=$1 pid
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  kill -9 "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  rm -f "$dir/pid"
}

case "${1:-}" in
install)
  if [ ! -x "$bin" ]; then
    src=$(cd /tmp && GOFLAGS= go mod download -json "github.com/FerretDB/FerretDB@$VERSION" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
    work=$(mktemp -d /tmp/ferry-ferretdb-build.XXXXXX)
    trap 'rm -rf "$work"' EXIT
    cp -r "$src/." "$work/"
    chmod -R u+w "$work"
    echo "$VERSION" >"$work/build/version/version.txt"
    (cd "$work" && GOFLAGS= go build -buildvcs=false -trimpath -o "$bin.tmp" ./cmd/ferretdb) >&2
    mv "$bin.tmp" "$bin"
    echo "ferretdb.sh: built $bin" >&2
  fi
  ;;
start)
  [ -x "$bin" ] || { echo "ferretdb.sh: $bin is missing (run: $0 install)" >&2; exit 1; }
  dir=$(mktemp -d /tmp/ferry-ferretdb.XXXXXX)
  mkdir -p "$dir/data" "$dir/state"
  port=$(free_port)
  echo "$port" >"$dir/port"
  launch "$dir" "$port" || { rm -rf "$dir"; exit 1; }
  echo "export FERRY_MONGODB_DIR=$dir"
  echo "export FERRY_MONGODB_URI=mongodb://$user:$password@127.0.0.1:$port/?authMechanism=SCRAM-SHA-256"
  echo "export FERRY_MONGODB_USER=$user"
  echo "export FERRY_MONGODB_PASSWORD=$password"
  ;;
restart)
  dir=${FERRY_MONGODB_DIR:?FERRY_MONGODB_DIR is not set (eval the output of start)}
  halt "$dir"
  launch "$dir" "$(cat "$dir/port")"
  ;;
down) # an outage: the server killed, its data and port kept for up
  dir=${FERRY_MONGODB_DIR:?FERRY_MONGODB_DIR is not set (eval the output of start)}
  halt "$dir"
  ;;
up)
  dir=${FERRY_MONGODB_DIR:?FERRY_MONGODB_DIR is not set (eval the output of start)}
  launch "$dir" "$(cat "$dir/port")"
  ;;
pymongo)
  venv="${FERRY_PYMONGO_VENV:-$root/.venv-mongo}"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
    printf '*\n' >"$venv/.gitignore" # keep the venv out of git
  fi
  if ! "$venv/bin/python" -c "import pymongo" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$PYMONGO" >&2
  fi
  echo "export FERRY_PYMONGO_PYTHON=$venv/bin/python"
  ;;
stop)
  dir=${FERRY_MONGODB_DIR:?FERRY_MONGODB_DIR is not set (eval the output of start)}
  halt "$dir"
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 install|start|restart|down|up|stop|pymongo" >&2
  exit 2
  ;;
esac
