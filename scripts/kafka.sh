#!/usr/bin/env bash
# A throwaway Apache Kafka broker for the tests: Kafka 4.4 in KRaft mode (one node, combined
# controller and broker) run from Maven Central's jars on the machine's Java 17, with its log
# directory in a temporary directory and three listeners on free loopback ports: PLAINTEXT,
# SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for user ferry) and SSL (a CA and a
# server certificate made with openssl at start). ACLs are on (KRaft's StandardAuthorizer)
# for one user only: the anonymous principal of PLAINTEXT and SSL and user ferry are super
# users, every resource without an ACL is open to all, and user ferry-limited (SCRAM) is
# there for tests that add DENY ACLs for it (a refused right).
#
#   bash scripts/kafka.sh install              # resolve the broker's jars with Maven (cached)
#   eval "$(bash scripts/kafka.sh start)"      # exports FERRY_KAFKA_BOOTSTRAP, FERRY_KAFKA_SASL_BOOTSTRAP,
#                                              # FERRY_KAFKA_SASL_USER, FERRY_KAFKA_SASL_PASSWORD,
#                                              # FERRY_KAFKA_TLS_BOOTSTRAP, FERRY_KAFKA_TLS_CA, FERRY_KAFKA_DIR,
#                                              # FERRY_KAFKA_LIMITED_USER, FERRY_KAFKA_LIMITED_PASSWORD
#   bash scripts/kafka.sh restart              # stop (SIGTERM) and start again on the same ports and data
#   bash scripts/kafka.sh down; bash scripts/kafka.sh up   # the same in two steps (an outage)
#   bash scripts/kafka.sh stop                 # kills it and removes the directory
#   eval "$(bash scripts/kafka.sh python)"     # a venv with kafka-python (the tests' independent
#                                              # reader): exports FERRY_KAFKA_PYTHON
#   bash scripts/kafka.sh topic NAME [N]       # create topic NAME with N partitions (default 3)
#                                              # unless it exists (kafka-python's admin client)
#
# The jars (45, about 43 MB) are copied by `mvn dependency:copy-dependencies` into
# FERRY_KAFKA_LIBS (default ~/.cache/ferry/kafka-$VERSION/libs); Maven keeps its own copy in
# ~/.m2, so a second install reads no network. The JVM gets a small heap (FERRY_KAFKA_HEAP,
# default 384m): the machine is shared.
set -euo pipefail

VERSION=4.4.0
SLF4J=2.0.17
KAFKA_PYTHON="kafka-python[zstd,lz4,snappy]==3.0.12"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
libs="${FERRY_KAFKA_LIBS:-$HOME/.cache/ferry/kafka-$VERSION/libs}"
heap="${FERRY_KAFKA_HEAP:-384m}"
user=ferry
password=ferry-secret
limited_user=ferry-limited
limited_password=ferry-limited-secret

free_port() {
  python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

installed() { [ -f "$libs/.complete" ]; }

java_run() {
  java "-Xmx$heap" -Xms64m -XX:+UseSerialGC -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
    -Dorg.slf4j.simpleLogger.showDateTime=true -cp "$libs/*" "$@"
}

# launch starts the broker of directory $1 and waits until it says it started.
launch() {
  local dir=$1
  : >"$dir/server.log"
  # setsid: the broker outlives this script and is not in the caller's process group.
  setsid bash -c 'exec "$@"' _ java "-Xmx$heap" -Xms64m -XX:+UseSerialGC \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=info -Dorg.slf4j.simpleLogger.showDateTime=true \
    -cp "$libs/*" kafka.Kafka "$dir/server.properties" >>"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  for _ in $(seq 1 1200); do
    if grep -q "Kafka Server started" "$dir/server.log"; then return 0; fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "kafka.sh: the broker did not start (log: $dir/server.log)" >&2
  tail -40 "$dir/server.log" >&2
  return 1
}

halt() {
  local dir=$1 sig=${2:-KILL} pid
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  kill "-$sig" "$pid" 2>/dev/null || true
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  rm -f "$dir/pid"
}

# certs makes a CA and a server certificate for 127.0.0.1 and localhost, PEM, in $1.
certs() {
  local d=$1
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=ferry-test-ca" \
    -keyout "$d/ca.key" -out "$d/ca.pem" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
    -keyout "$d/server.key.rsa" -out "$d/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/san.ext"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
    -days 2 -extfile "$d/san.ext" -out "$d/server.pem" >/dev/null 2>&1
  openssl pkcs8 -topk8 -nocrypt -in "$d/server.key.rsa" -out "$d/server.key" >/dev/null 2>&1
  cat "$d/server.key" "$d/server.pem" >"$d/keystore.pem"
}

case "${1:-}" in
install)
  if ! installed; then
    command -v mvn >/dev/null || { apt-get update >&2; DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends maven >&2; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # slf4j-api is named so that Maven takes the version slf4j-simple binds to (Kafka's own
    # dependency tree would pick 1.7, which finds no binding and logs nothing).
    cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.ferry.test</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>$SLF4J</version></dependency>
  </dependencies>
</project>
POM
    rm -rf "$libs"
    mkdir -p "$libs"
    (cd "$work" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$libs") >&2
    touch "$libs/.complete"
  fi
  ;;
start)
  installed || { echo "kafka.sh: the broker's jars are missing under $libs (run: $0 install)" >&2; exit 1; }
  dir=$(mktemp -d /tmp/ferry-kafka.XXXXXX)
  mkdir -p "$dir/data"
  plain=$(free_port) ctrl=$(free_port) sasl=$(free_port) tls=$(free_port)
  certs "$dir"
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$ctrl
listeners=PLAINTEXT://127.0.0.1:$plain,CONTROLLER://127.0.0.1:$ctrl,SASL_PLAINTEXT://127.0.0.1:$sasl,SSL://127.0.0.1:$tls
advertised.listeners=PLAINTEXT://127.0.0.1:$plain,SASL_PLAINTEXT://127.0.0.1:$sasl,SSL://127.0.0.1:$tls
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$user="$password" user_$limited_user="$limited_password";
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location=$dir/keystore.pem
ssl.client.auth=none
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:$user
allow.everyone.if.no.acl.found=true
log.dirs=$dir/data
# Records keep their messages' origin timestamps (the tests' are fixed dates years back): no time
# retention, or the broker's check deletes a rolled segment of them mid-test.
log.retention.ms=-1
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.cleaner.backoff.ms=1000
PROPS
  cluster=$(java_run kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
  java_run kafka.tools.StorageTool format --standalone -t "$cluster" -c "$dir/server.properties" \
    --add-scram "SCRAM-SHA-256=[name=$user,password=$password]" \
    --add-scram "SCRAM-SHA-512=[name=$user,password=$password]" \
    --add-scram "SCRAM-SHA-256=[name=$limited_user,password=$limited_password]" \
    --add-scram "SCRAM-SHA-512=[name=$limited_user,password=$limited_password]" >"$dir/format.log" 2>&1 ||
    { cat "$dir/format.log" >&2; rm -rf "$dir"; exit 1; }
  launch "$dir" || { halt "$dir"; rm -rf "$dir"; exit 1; }
  echo "export FERRY_KAFKA_DIR=$dir"
  echo "export FERRY_KAFKA_BOOTSTRAP=127.0.0.1:$plain"
  echo "export FERRY_KAFKA_SASL_BOOTSTRAP=127.0.0.1:$sasl"
  echo "export FERRY_KAFKA_SASL_USER=$user"
  echo "export FERRY_KAFKA_SASL_PASSWORD=$password"
  echo "export FERRY_KAFKA_TLS_BOOTSTRAP=127.0.0.1:$tls"
  echo "export FERRY_KAFKA_TLS_CA=$dir/ca.pem"
  echo "export FERRY_KAFKA_LIMITED_USER=$limited_user"
  echo "export FERRY_KAFKA_LIMITED_PASSWORD=$limited_password"
  ;;
restart)
  dir=${FERRY_KAFKA_DIR:?FERRY_KAFKA_DIR is not set (eval the output of start)}
  halt "$dir" TERM
  launch "$dir"
  ;;
down) # an outage: the broker stopped, its data and ports kept for up
  dir=${FERRY_KAFKA_DIR:?FERRY_KAFKA_DIR is not set (eval the output of start)}
  halt "$dir" TERM
  ;;
up)
  dir=${FERRY_KAFKA_DIR:?FERRY_KAFKA_DIR is not set (eval the output of start)}
  launch "$dir"
  ;;
python)
  venv="${FERRY_KAFKA_VENV:-$root/.venv-kafka}"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
    printf '*\n' >"$venv/.gitignore" # keep the venv out of git
  fi
  if ! "$venv/bin/python" -c "import kafka, zstandard, lz4, snappy" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$KAFKA_PYTHON" >&2
  fi
  echo "export FERRY_KAFKA_PYTHON=$venv/bin/python"
  ;;
topic)
  name=${2:?usage: $0 topic NAME [PARTITIONS]}
  "${FERRY_KAFKA_PYTHON:?FERRY_KAFKA_PYTHON is not set (eval the output of python)}" - "${FERRY_KAFKA_BOOTSTRAP:?FERRY_KAFKA_BOOTSTRAP is not set (eval the output of start)}" "$name" "${3:-3}" <<'PY'
import sys
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1])
try:
    admin.create_topics([NewTopic(sys.argv[2], int(sys.argv[3]), 1)])
except TopicAlreadyExistsError:
    pass
admin.close()
PY
  ;;
stop)
  dir=${FERRY_KAFKA_DIR:?FERRY_KAFKA_DIR is not set (eval the output of start)}
  halt "$dir"
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 install|start|restart|down|up|stop|python|topic" >&2
  exit 2
  ;;
esac
