#!/usr/bin/env bash
# The Iceberg tests' independent reader: pyiceberg (with SqlCatalog on PostgreSQL and
# pyarrow) in a cached venv. The catalog is the PostgreSQL of scripts/postgres.sh and the
# data a local warehouse or the S3 server of scripts/s3.sh: nothing else to start.
#
#   eval "$(bash scripts/iceberg.sh python)"   # exports FERRY_PYICEBERG_PYTHON
#
# FERRY_PYICEBERG_VENV overrides the venv's directory (default .venv-iceberg in the repo).
#
# A REST catalog: Apache Iceberg's own REST catalog server (RESTCatalogServer of
# org.apache.iceberg:iceberg-open-api's test fixtures, the server behind Iceberg's
# apache/iceberg-rest-fixture image) run from Maven Central's jars on the machine's Java 17:
# a JdbcCatalog on SQLite in the temporary directory behind Iceberg's REST servlet, tables
# in a local warehouse there (HadoopFileIO on the local filesystem, which the sink and
# pyiceberg reach as file://).
#
#   bash scripts/iceberg.sh rest-install           # resolve the server's jars with Maven (cached)
#   eval "$(bash scripts/iceberg.sh rest-start)"   # exports FERRY_ICEBERG_REST_URL,
#                                                  # FERRY_ICEBERG_REST_WAREHOUSE, FERRY_ICEBERG_REST_DIR
#   bash scripts/iceberg.sh rest-stop              # kills it and removes the directory (also: stop)
#
# The jars (37, about 82 MB, most of it Hadoop's shaded client for the server's
# Configuration and local FileIO) are copied into FERRY_ICEBERG_REST_LIBS (default
# ~/.cache/ferry/iceberg-rest-$REST_VERSION/libs). The JVM gets a small heap
# (FERRY_ICEBERG_REST_HEAP, default 256m). The server listens on every interface (it has no
# bind-address setting), on a free port.
set -euo pipefail

REST_VERSION=1.10.0

PACKAGES=("pyiceberg[sql-postgres,pyarrow]==0.12.0" "psycopg2-binary==2.9.13" "sqlalchemy==2.1.9" "pyarrow==26.0.1")
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

case "${1:-}" in
python)
  venv="${FERRY_PYICEBERG_VENV:-$root/.venv-iceberg}"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" >&2
    printf '*\n' >"$venv/.gitignore" # keep the venv out of git
  fi
  if ! "$venv/bin/python" -c "import pyiceberg.catalog.sql, psycopg2, pyarrow" 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${PACKAGES[@]}" >&2
  fi
  echo "export FERRY_PYICEBERG_PYTHON=$venv/bin/python"
  ;;
rest-install)
  libs="${FERRY_ICEBERG_REST_LIBS:-$HOME/.cache/ferry/iceberg-rest-$REST_VERSION/libs}"
  if [ ! -f "$libs/.complete" ]; then
    command -v mvn >/dev/null || { apt-get update >&2; DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends maven >&2; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # The test-fixtures jar's POM lists no dependencies: the server's are named here
    # (iceberg-core and its tests jar for the REST servlet and adapter, Jetty 11 for the
    # jakarta servlet, Hadoop's Configuration and local filesystem, SQLite's JDBC driver).
    cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.ferry.test</groupId>
  <artifactId>iceberg-rest-catalog</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.iceberg</groupId><artifactId>iceberg-open-api</artifactId><version>$REST_VERSION</version><classifier>test-fixtures</classifier></dependency>
    <dependency><groupId>org.apache.iceberg</groupId><artifactId>iceberg-core</artifactId><version>$REST_VERSION</version></dependency>
    <dependency><groupId>org.apache.iceberg</groupId><artifactId>iceberg-core</artifactId><version>$REST_VERSION</version><classifier>tests</classifier></dependency>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-client-api</artifactId><version>3.4.1</version></dependency>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-client-runtime</artifactId><version>3.4.1</version></dependency>
    <dependency><groupId>org.eclipse.jetty</groupId><artifactId>jetty-servlet</artifactId><version>11.0.25</version></dependency>
    <dependency><groupId>org.xerial</groupId><artifactId>sqlite-jdbc</artifactId><version>3.49.1.0</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>2.0.17</version></dependency>
  </dependencies>
</project>
POM
    rm -rf "$libs"
    mkdir -p "$libs"
    (cd "$work" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$libs") >&2
    touch "$libs/.complete"
  fi
  ;;
rest-start)
  libs="${FERRY_ICEBERG_REST_LIBS:-$HOME/.cache/ferry/iceberg-rest-$REST_VERSION/libs}"
  [ -f "$libs/.complete" ] || { echo "iceberg.sh: the REST catalog's jars are missing under $libs (run: $0 rest-install)" >&2; exit 1; }
  dir=$(mktemp -d /tmp/ferry-iceberg-rest.XXXXXX)
  mkdir -p "$dir/warehouse"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # The server reads its catalog's properties from CATALOG_* variables (CATALOG_REST_PORT
  # is rest.port); SQLite needs no user, the JDBC catalog wants the two keys set.
  # setsid: the server outlives this script and is not in the caller's process group.
  CATALOG_REST_PORT=$port CATALOG_WAREHOUSE="file://$dir/warehouse" CATALOG_URI="jdbc:sqlite:file:$dir/catalog.db" \
    CATALOG_JDBC_USER=ferry CATALOG_JDBC_PASSWORD=ferry \
    setsid java "-Xmx${FERRY_ICEBERG_REST_HEAP:-256m}" -Xms32m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -cp "$libs/*" org.apache.iceberg.rest.RESTCatalogServer >"$dir/server.log" 2>&1 </dev/null &
  echo $! >"$dir/pid"
  for _ in $(seq 1 1200); do
    if curl -fs -m 2 "http://127.0.0.1:$port/v1/config" >/dev/null 2>&1; then
      echo "export FERRY_ICEBERG_REST_URL=http://127.0.0.1:$port"
      echo "export FERRY_ICEBERG_REST_WAREHOUSE=file://$dir/warehouse"
      echo "export FERRY_ICEBERG_REST_DIR=$dir"
      exit 0
    fi
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "iceberg.sh: the REST catalog did not start (log: $dir/server.log)" >&2
  tail -40 "$dir/server.log" >&2
  kill -9 "$(cat "$dir/pid")" 2>/dev/null || true
  exit 1
  ;;
rest-stop | stop)
  dir="${FERRY_ICEBERG_REST_DIR:-}"
  [ -n "$dir" ] && [ -d "$dir" ] || exit 0
  if [ -f "$dir/pid" ]; then
    pid=$(cat "$dir/pid")
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: $0 python|rest-install|rest-start|rest-stop|stop" >&2
  exit 2
  ;;
esac
