#!/usr/bin/env bash
# Builds ferry, starts `ferry server` on a free loopback port with a throwaway data
# dir, and runs the official Iggy Python SDK compatibility suite against it.
# test_postgres_cdc.py also runs `ferry run` (FERRY_BIN, set here) with PostgreSQL at
# FERRY_POSTGRES_URL (and psql); without FERRY_POSTGRES_URL it is skipped.
# Env: PYVENV (venv path, default <repo>/.venv-ci), PYTHON (default python3),
#      FERRY_START_TIMEOUT (seconds to wait for the port, default 30).
# Extra arguments are passed to pytest.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${PYVENV:-$root/.venv-ci}"
python="${PYTHON:-python3}"
start_timeout="${FERRY_START_TIMEOUT:-30}"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/ferry-pytest.XXXXXX")"
server_pid=""
log="$tmp/server.log"
ok=0

cleanup() {
    local rc=$?
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    if [[ "$ok" != 1 && -f "$log" ]]; then
        echo "---- ferry server log ($log) ----" >&2
        tail -n 200 "$log" >&2 || true
        echo "---- end of server log ----" >&2
    fi
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "building ferry" >&2
(cd "$root" && go build -o "$tmp/ferry" ./cmd/ferry)

# Python venv with the pinned official SDK (created once, refreshed if requirements change).
if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating venv $venv" >&2
    "$python" -m venv "$venv"
    # Keep the venv out of git even when it lives inside the repo.
    printf '*\n' > "$venv/.gitignore"
fi
stamp="$venv/.ferry-requirements"
if ! cmp -s "$here/requirements.txt" "$stamp" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
    cp "$here/requirements.txt" "$stamp"
fi

port="$("$venv/bin/python" - <<'PY'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
)"
addr="127.0.0.1:$port"

echo "starting ferry server on $addr" >&2
"$tmp/ferry" server --addr "$addr" --data "$tmp/data" >"$log" 2>&1 &
server_pid=$!

ready=0
deadline=$((SECONDS + start_timeout))
while (( SECONDS < deadline )); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
        echo "ferry server exited before accepting connections" >&2
        exit 1
    fi
    if "$venv/bin/python" -c "import socket,sys; socket.create_connection(('127.0.0.1', $port), timeout=0.5).close()" 2>/dev/null; then
        ready=1
        break
    fi
    sleep 0.2
done
if [[ "$ready" != 1 ]]; then
    echo "ferry server did not accept connections on $addr within ${start_timeout}s" >&2
    exit 1
fi

export FERRY_ADDR="$addr"
# test_postgres_cdc.py runs `ferry run` against this server (and FERRY_POSTGRES_URL).
export FERRY_BIN="$tmp/ferry"
cd "$here"
set +e
"$venv/bin/python" -m pytest -q "$@"
rc=$?
set -e
if [[ "$rc" == 0 ]]; then ok=1; fi
exit "$rc"
