#!/usr/bin/env bash
# The project's test command (README "Tests", docs/testing.md): Go tests with the race detector, a short run
# of every fuzz target, and the official Iggy Python SDK against the embedded server.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "--- go test -race ./..."
go test -race -count=1 -timeout 20m ./...

echo "--- go test -race ./connect with max_in_flight = 4 (concurrent per-partition delivery)"
FERRY_TEST_MAX_IN_FLIGHT=4 go test -race -count=1 -timeout 10m ./connect/

echo "--- cargo test rust/ferry-commit (the commit crate for Rust plugins)"
cargo test --quiet --locked --manifest-path rust/ferry-commit/Cargo.toml

echo "--- ferry conformance --soak 20 (docs/conformance.md)"
conf_bin="$(mktemp -d)"
trap 'rm -rf "$conf_bin"' EXIT
go build -o "$conf_bin/ferry" ./cmd/ferry
# postgres-soak and postgres-cdc run when FERRY_POSTGRES_URL is set (CI sets it; scripts/postgres.sh
# starts the cluster with wal_level = logical), "not supported" otherwise.
pg_args=()
if [ -n "${FERRY_POSTGRES_URL:-}" ]; then
  pg_args=(--postgres "$FERRY_POSTGRES_URL")
  # iceberg-soak: the Iceberg sink's SQL catalog on the same database.
  pg_args+=(--iceberg "$FERRY_POSTGRES_URL")
fi
# s3-soak likewise when FERRY_S3_ENDPOINT is set (scripts/s3.sh start).
if [ -n "${FERRY_S3_ENDPOINT:-}" ]; then
  pg_args+=(--s3 "${FERRY_S3_ENDPOINT%%://*}://$FERRY_S3_ACCESS_KEY:$FERRY_S3_SECRET_KEY@${FERRY_S3_ENDPOINT#*://}?region=${FERRY_S3_REGION:-us-east-1}")
fi
# kafka-soak likewise when FERRY_KAFKA_BOOTSTRAP is set (scripts/kafka.sh start).
if [ -n "${FERRY_KAFKA_BOOTSTRAP:-}" ]; then
  pg_args+=(--kafka "$FERRY_KAFKA_BOOTSTRAP")
fi
"$conf_bin/ferry" conformance --soak 20 --seed "${CONFORMANCE_SEED:-1}" "${pg_args[@]}"

echo "--- fuzz smoke (each target ${FUZZTIME:-3s})"
bash scripts/fuzz.sh "${FUZZTIME:-3s}"

echo "--- official Iggy Python SDK against ferry server"
bash tests/python/run.sh
