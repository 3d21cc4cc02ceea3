#!/usr/bin/env bash
# A throwaway S3-compatible server for the tests: versitygw (a real S3 gateway, Go, from the
# module proxy) with its POSIX backend in a temporary directory, listening on a free
# loopback port. Buckets are directories under $FERRY_S3_DIR/data; tests create their own.
#
#   bash scripts/s3.sh install                 # go install versitygw into GOPATH/bin when missing
#   eval "$(bash scripts/s3.sh start)"         # exports FERRY_S3_ENDPOINT, FERRY_S3_ACCESS_KEY,
#                                              # FERRY_S3_SECRET_KEY, FERRY_S3_REGION, FERRY_S3_DIR
#   bash scripts/s3.sh restart                 # kill and start again on the same port and data
#   bash scripts/s3.sh down; bash scripts/s3.sh up   # the same, in two steps (an outage)
#   bash scripts/s3.sh stop                    # kills it and removes the directory
#   eval "$(bash scripts/s3.sh pyarrow)"       # a venv with pyarrow (the tests' Parquet reader):
#                                              # exports FERRY_PYARROW_PYTHON
set -euo pipefail

VERSION=v1.8.0
PYARROW=pyarrow==26.0.1
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(go env GOPATH)/bin/versitygw"
access=ferry-test
secret=ferry-test-secret
region=us-east-1

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# launch starts the gateway on port $2 over directory $1 and waits until it answers.
launch() {
  local dir=$1 port=$2
  # Object metadata (ETags, which conditional PUTs compare) lives in a sidecar directory,
  # so the file system needs no extended attributes.
  setsid "$bin" --access "$access" --secret "$secret" --region "$region" \
    --port "127.0.0.1:$port" --quiet posix --sidecar "$dir/meta" "$dir/data" >>"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "s3.sh: versitygw did not start on 127.0.0.1:$port" >&2
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
    GOFLAGS= go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2
  fi
  ;;
start)
  [ -x "$bin" ] || { echo "s3.sh: $bin is missing (run: $0 install)" >&2; exit 1; }
  dir=$(mktemp -d /tmp/ferry-s3.XXXXXX)
  mkdir -p "$dir/data" "$dir/meta"
  port=$(free_port)
  echo "$port" >"$dir/port"
  launch "$dir" "$port" || { rm -rf "$dir"; exit 1; }
  echo "export FERRY_S3_DIR=$dir"
  echo "export FERRY_S3_ENDPOINT=http://127.0.0.1:$port"
  echo "export FERRY_S3_ACCESS_KEY=$access"
  echo "export FERRY_S3_SECRET_KEY=$secret"
  echo "export FERRY_S3_REGION=$region"
  ;;
restart)
  dir=${FERRY_S3_DIR:?FERRY_S3_DIR is not set (eval the output of start)}
  halt "$dir"
  launch "$dir" "$(cat "$dir/port")"
  ;;
down) # an outage: the server killed, its data and port kept for up
  dir=${FERRY_S3_DIR:?FERRY_S3_DIR is not set (eval the output of start)}
  halt "$dir"
  ;;
up)
  dir=${FERRY_S3_DIR:?FERRY_S3_DIR is not set (eval the output of start)}
  launch "$dir" "$(cat "$dir/port")"
  ;;
pyarrow)
  venv="${FERRY_PYARROW_VENV:-$root/.venv-s3}"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
    printf '*\n' >"$venv/.gitignore" # keep the venv out of git
  fi
  if ! "$venv/bin/python" -c "import pyarrow" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$PYARROW" >&2
  fi
  echo "export FERRY_PYARROW_PYTHON=$venv/bin/python"
  ;;
stop)
  dir=${FERRY_S3_DIR:?FERRY_S3_DIR is not set (eval the output of start)}
  halt "$dir"
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 install|start|restart|down|up|stop|pyarrow" >&2
  exit 2
  ;;
esac
