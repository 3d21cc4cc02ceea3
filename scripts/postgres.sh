#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: Debian's binaries, a cluster created with
# initdb in a temporary directory owned by a non-root user, listening on a free loopback
# port with its unix socket in the same directory.
#
#   eval "$(bash scripts/postgres.sh start)"   # exports FERRY_POSTGRES_URL and FERRY_POSTGRES_DIR
#   bash scripts/postgres.sh restart           # pg_ctl restart (tests restart it mid-stream)
#   bash scripts/postgres.sh stop              # stops it and removes the directory
#
# install (as root) installs the packages when initdb is missing.
set -euo pipefail

PGUSER_OS=${FERRY_POSTGRES_OS_USER:-ferrypg}

bindir() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ]; then echo "$d"; return; fi
  done
  return 1
}

as_user() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$PGUSER_OS" -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

case "${1:-}" in
install)
  if ! bindir >/dev/null; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >&2
  fi
  ;;
start)
  bin=$(bindir) || { echo "postgres.sh: no initdb under /usr/lib/postgresql (run: $0 install)" >&2; exit 1; }
  if [ "$(id -u)" = 0 ] && ! id "$PGUSER_OS" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$PGUSER_OS"
  fi
  dir=$(mktemp -d /tmp/ferry-pg.XXXXXX)
  chmod 755 "$dir"
  [ "$(id -u)" = 0 ] && chown "$PGUSER_OS" "$dir"
  port=$(free_port)
  as_user "$bin/initdb" -D "$dir/data" -U ferry --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = on
max_connections = 100
shared_buffers = 64MB
# Logical replication for the CDC source (the cluster's role ferry is a superuser, so it
# has the REPLICATION right).
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
CONF
  as_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >&2 ||
    { cat "$dir/server.log" >&2; exit 1; }
  as_user "$bin/createdb" -h 127.0.0.1 -p "$port" -U ferry ferry >&2
  echo "export FERRY_POSTGRES_DIR=$dir"
  echo "export FERRY_POSTGRES_URL=postgres://ferry@127.0.0.1:$port/ferry?sslmode=disable"
  ;;
restart | stop)
  dir=${FERRY_POSTGRES_DIR:?FERRY_POSTGRES_DIR is not set (eval the output of start)}
  bin=$(bindir)
  if [ "$1" = restart ]; then
    as_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -m fast restart >&2
  else
    if [ -d "$dir/data" ]; then
      as_user "$bin/pg_ctl" -D "$dir/data" -w -t 60 -m fast stop >&2 || true
    fi
    rm -rf "$dir"
  fi
  ;;
*)
  echo "usage: $0 install|start|restart|stop" >&2
  exit 2
  ;;
esac
