#!/usr/bin/env bash
# A throwaway OpenSearch node for the tests: OpenSearch 2.19 run from Maven Central's jars
# (org.opensearch:opensearch and the transport-netty4 module) on the machine's Java 17, one
# node (single-node discovery, security plugin absent: plain HTTP, no login), its home, data
# and logs in a temporary directory, HTTP and transport on free loopback ports.
#
#   bash scripts/opensearch.sh install            # resolve the node's jars with Maven (cached)
#   eval "$(bash scripts/opensearch.sh start)"    # exports FERRY_OPENSEARCH_URL, FERRY_OPENSEARCH_DIR
#   bash scripts/opensearch.sh restart [KILL]     # stop (SIGTERM, or SIGKILL: a crash) and start again, same port and data
#   bash scripts/opensearch.sh down; bash scripts/opensearch.sh up   # the same in two steps (an outage)
#   bash scripts/opensearch.sh stop               # kills it and removes the directory
#
# How the distribution's layout is rebuilt from the jars: lib/ holds the core's runtime
# dependencies (and log4j-core, which the distribution ships beside them), modules/transport-netty4
# the HTTP and transport module with a plugin descriptor and a security policy written here
# (Maven's jar carries neither). OpenSearch refuses to run as root, so as root the node runs
# as nobody (setpriv), its home holding hard links to the cached jars (same file system) or
# copies. The JVM gets a small heap (FERRY_OPENSEARCH_HEAP, default 384m): the machine is shared.
set -euo pipefail

VERSION=2.19.6
LOG4J=2.25.4
libs="${FERRY_OPENSEARCH_LIBS:-$HOME/.cache/ferry/opensearch-$VERSION}"
heap="${FERRY_OPENSEARCH_HEAP:-384m}"

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

installed() { [ -f "$libs/.complete" ]; }

# as_node runs its arguments as the node's user: nobody when this script runs as root.
as_node() {
  if [ "$(id -u)" = 0 ]; then
    exec setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
  else
    exec "$@"
  fi
}

# launch starts the node of directory $1 and waits until its HTTP port answers.
launch() {
  local dir=$1 port
  port=$(cat "$dir/http.port")
  rm -f "$dir/home/data/nodes/0/node.lock" 2>/dev/null || true
  echo "--- opensearch.sh: start $(date -u +%FT%TZ)" >>"$dir/server.log"
  if [ "$(id -u)" = 0 ]; then chown 65534:65534 "$dir/server.log"; fi
  # setsid: the node outlives this script and is not in the caller's process group.
  setsid bash -c "$(declare -f as_node); as_node \"\$@\"" _ java "-Xmx$heap" "-Xms$heap" -XX:+UseSerialGC \
    -XX:TieredStopAtLevel=1 -Xss1m -Djava.io.tmpdir="$dir/home/tmp" \
    -Dopensearch.path.home="$dir/home" -Dopensearch.path.conf="$dir/home/config" \
    -Dopensearch.distribution.type=tar -cp "$dir/home/lib/*" org.opensearch.bootstrap.OpenSearch \
    >>"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  for _ in $(seq 1 1800); do
    if curl -sf "http://127.0.0.1:$port/_cluster/health?wait_for_status=yellow&timeout=1s" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "opensearch.sh: the node did not start (log: $dir/server.log)" >&2
  tail -40 "$dir/server.log" >&2
  return 1
}

# halt stops the node of directory $1 with signal $2 (KILL by default). A node told TERM
# flushes its shards first, which takes tens of seconds on a loaded machine: it gets 90 s,
# then KILL. The pid is setsid's bash, exec'd into setpriv, exec'd into java: the node.
halt() {
  local dir=$1 sig=${2:-KILL} pid
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  kill "-$sig" "$pid" 2>/dev/null || true
  for _ in $(seq 1 900); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "opensearch.sh: the node (pid $pid) did not stop on SIG$sig in 90s: SIGKILL" >&2
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$dir/pid"
}

case "${1:-}" in
install)
  if ! installed; then
    command -v mvn >/dev/null || { apt-get update >&2; DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends maven >&2; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.ferry.test</groupId>
  <artifactId>opensearch-node</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.opensearch</groupId><artifactId>opensearch</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.opensearch</groupId><artifactId>opensearch-plugin-classloader</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.opensearch.plugin</groupId><artifactId>transport-netty4-client</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J</version></dependency>
  </dependencies>
</project>
POM
    rm -rf "$libs"
    mkdir -p "$libs/lib" "$libs/netty4"
    (cd "$work" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$work/jars") >&2
    for j in "$work"/jars/*.jar; do
      case "$(basename "$j")" in
      netty-* | transport-netty4-client-*) cp "$j" "$libs/netty4/" ;;
      *) cp "$j" "$libs/lib/" ;;
      esac
    done
    chmod -R a+rX "$libs"
    touch "$libs/.complete"
  fi
  ;;
start)
  installed || { echo "opensearch.sh: the node's jars are missing under $libs (run: $0 install)" >&2; exit 1; }
  dir=$(mktemp -d /tmp/ferry-opensearch.XXXXXX)
  chmod 755 "$dir"
  home=$dir/home
  mkdir -p "$home/bin" "$home/plugins" "$home/config" "$home/data" "$home/logs" "$home/tmp" "$home/modules/transport-netty4"
  cp -al "$libs/lib" "$home/lib" 2>/dev/null || cp -a "$libs/lib" "$home/lib"
  cp -l "$libs"/netty4/*.jar "$home/modules/transport-netty4/" 2>/dev/null || cp "$libs"/netty4/*.jar "$home/modules/transport-netty4/"
  cat >"$home/modules/transport-netty4/plugin-descriptor.properties" <<PROPS
description=Netty 4 based HTTP and transport
version=$VERSION
name=transport-netty4
classname=org.opensearch.transport.Netty4Plugin
java.version=17
opensearch.version=$VERSION
PROPS
  cat >"$home/modules/transport-netty4/plugin-security.policy" <<'POLICY'
grant {
  permission java.net.SocketPermission "*", "accept,connect,resolve";
  permission java.lang.RuntimePermission "setContextClassLoader";
};
POLICY
  http=$(free_port) transport=$(free_port)
  echo "$http" >"$dir/http.port"
  cat >"$home/config/opensearch.yml" <<YML
cluster.name: ferry-test
node.name: ferry-1
discovery.type: single-node
network.host: 127.0.0.1
http.port: $http
transport.port: $transport
path.data: $home/data
path.logs: $home/logs
cluster.routing.allocation.disk.threshold_enabled: false
YML
  cat >"$home/config/log4j2.properties" <<'LOG'
status = error
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] %marker %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
LOG
  : >"$home/config/jvm.options"
  if [ "$(id -u)" = 0 ]; then chown -R 65534:65534 "$home/config" "$home/data" "$home/logs" "$home/tmp" "$home/bin"; fi
  launch "$dir" || { halt "$dir"; rm -rf "$dir"; exit 1; }
  echo "export FERRY_OPENSEARCH_DIR=$dir"
  echo "export FERRY_OPENSEARCH_URL=http://127.0.0.1:$http"
  ;;
restart)
  dir=${FERRY_OPENSEARCH_DIR:?FERRY_OPENSEARCH_DIR is not set (eval the output of start)}
  halt "$dir" "${2:-TERM}"
  launch "$dir"
  ;;
down) # an outage: the node stopped (SIGTERM, or the signal given), its data and port kept for up
  dir=${FERRY_OPENSEARCH_DIR:?FERRY_OPENSEARCH_DIR is not set (eval the output of start)}
  halt "$dir" "${2:-TERM}"
  ;;
up)
  dir=${FERRY_OPENSEARCH_DIR:?FERRY_OPENSEARCH_DIR is not set (eval the output of start)}
  launch "$dir"
  ;;
stop) # a throwaway node: killed at once, its directory removed
  dir=${FERRY_OPENSEARCH_DIR:?FERRY_OPENSEARCH_DIR is not set (eval the output of start)}
  halt "$dir" KILL
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 install|start|restart|down|up|stop" >&2
  exit 2
  ;;
esac
