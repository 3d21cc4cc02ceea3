#!/usr/bin/env bash
# A throwaway OpenTelemetry Collector for the telemetry tests: ferry-otelcol, built from the
# Collector's published Go modules (internal/otelcol, a module of its own) with the OTLP
# receiver on two free loopback ports (gRPC and HTTP) and the file exporter, which writes
# every request it received, as OTLP JSON lines, to traces.jsonl, logs.jsonl and
# metrics.jsonl in its directory. Tests tell their records apart by service.name.
#
#   bash scripts/otelcol.sh install            # builds ferry-otelcol into GOPATH/bin (cached)
#   eval "$(bash scripts/otelcol.sh start)"    # exports FERRY_OTELCOL_GRPC, FERRY_OTELCOL_HTTP
#                                              # (http://127.0.0.1:port) and FERRY_OTELCOL_DIR
#   bash scripts/otelcol.sh stop               # kills it and removes the directory
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(go env GOPATH)/bin/ferry-otelcol"

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# stamp identifies the sources the binary was built from: a change rebuilds it.
stamp() {
  cat "$root/internal/otelcol/go.mod" "$root/internal/otelcol/go.sum" "$root/internal/otelcol/main.go" | sha256sum | cut -d' ' -f1
}

case "${1:-}" in
install)
  want=$(stamp)
  if [ ! -x "$bin" ] || [ "$(cat "$bin.stamp" 2>/dev/null)" != "$want" ]; then
    start=$(date +%s)
    (cd "$root/internal/otelcol" && go build -o "$bin" .) >&2
    echo "$want" >"$bin.stamp"
    echo "otelcol.sh: built $bin in $(($(date +%s) - start)) s" >&2
  fi
  ;;
start)
  [ -x "$bin" ] || { echo "otelcol.sh: $bin is missing (run: $0 install)" >&2; exit 1; }
  dir=$(mktemp -d /tmp/ferry-otelcol.XXXXXX)
  grpc=$(free_port)
  http=$(free_port)
  while [ "$http" = "$grpc" ]; do http=$(free_port); done
  cat >"$dir/config.yaml" <<YAML
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$grpc
      http:
        endpoint: 127.0.0.1:$http
exporters:
  file/traces:
    path: $dir/traces.jsonl
    flush_interval: 100ms
  file/logs:
    path: $dir/logs.jsonl
    flush_interval: 100ms
  file/metrics:
    path: $dir/metrics.jsonl
    flush_interval: 100ms
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file/traces]
    logs:
      receivers: [otlp]
      exporters: [file/logs]
    metrics:
      receivers: [otlp]
      exporters: [file/metrics]
YAML
  setsid "$bin" --config "file:$dir/config.yaml" >>"$dir/collector.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  up=""
  for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$grpc") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$http") 2>/dev/null; then
      up=1
      break
    fi
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$up" ]; then
    echo "otelcol.sh: ferry-otelcol did not listen on 127.0.0.1:$grpc and :$http" >&2
    cat "$dir/collector.log" >&2
    kill -9 "$(cat "$dir/pid")" 2>/dev/null || true
    rm -rf "$dir"
    exit 1
  fi
  echo "export FERRY_OTELCOL_DIR=$dir"
  echo "export FERRY_OTELCOL_GRPC=http://127.0.0.1:$grpc"
  echo "export FERRY_OTELCOL_HTTP=http://127.0.0.1:$http"
  ;;
stop)
  dir=${FERRY_OTELCOL_DIR:?FERRY_OTELCOL_DIR is not set (eval the output of start)}
  if [ -f "$dir/pid" ]; then
    pid=$(cat "$dir/pid")
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 install|start|stop" >&2
  exit 2
  ;;
esac
