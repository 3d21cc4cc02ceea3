#!/usr/bin/env bash
# A throwaway Redis for the tests: Debian's redis-server (7.x), on a free loopback port,
# its data (append-only file, fsync always) in a temporary directory.
#
#   eval "$(bash scripts/redis.sh start)"   # exports FERRY_REDIS_URL and FERRY_REDIS_DIR
#   bash scripts/redis.sh stop              # stops it and removes the directory
#
# install (as root) installs the package when redis-server is missing.
set -euo pipefail

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

case "${1:-}" in
install)
  if ! command -v redis-server >/dev/null; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server redis-tools >&2
  fi
  ;;
start)
  command -v redis-server >/dev/null || { echo "redis.sh: no redis-server (run: $0 install)" >&2; exit 1; }
  dir=$(mktemp -d /tmp/ferry-redis.XXXXXX)
  port=$(free_port)
  redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --appendonly yes --appendfsync always \
    --save "" --protected-mode yes >&2
  for _ in $(seq 1 100); do
    if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
      echo "export FERRY_REDIS_DIR=$dir"
      echo "export FERRY_REDIS_URL=redis://127.0.0.1:$port/0"
      exit 0
    fi
    sleep 0.1
  done
  cat "$dir/redis.log" >&2
  exit 1
  ;;
stop)
  dir=${FERRY_REDIS_DIR:?FERRY_REDIS_DIR is not set (eval the output of start)}
  if [ -f "$dir/redis.pid" ]; then
    pid=$(cat "$dir/redis.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 install|start|stop" >&2
  exit 2
  ;;
esac
