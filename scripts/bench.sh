#!/usr/bin/env bash
# Reproduces every figure of docs/benchmarks.md in one run, side by side.
# Usage: scripts/bench.sh [outfile]   (default bench.txt). Takes about 7 minutes on 2 cores with
# PostgreSQL (FERRY_POSTGRES_URL), more with the S3 part (FERRY_S3_ENDPOINT).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bench.txt}"
{
  echo "# $(date -u +%FT%TZ) $(go version) $(nproc) cores"
  echo "## wire codec: 1000-message send batch encode, poll reply decode"
  go test -run '^$' -bench 'AppendBatch|DecodePollReply|ValidateBatch' -benchmem ./iggy/wire/
  echo "## client against the embedded server on loopback: send and poll, fsync always and interval"
  go test -run '^$' -bench 'Send|Poll' -benchtime 2s ./iggy/
  echo "## storage (Pebble): append and read of 1000-message batches"
  go test -run '^$' -bench . ./server/store/
  echo "## sink pipeline vs raw poll loop, each commit mode, batch 100 and 1000"
  FERRY_BENCH_ROUNDS="${FERRY_BENCH_ROUNDS:-5}" go test -run '^$' -bench SinkPipeline -benchtime 1x ./connect/
  echo "## native C null sink vs Go null sink through the same pipeline"
  FERRY_BENCH_ROUNDS="${FERRY_BENCH_ROUNDS:-5}" go test -run '^$' -bench NativeVsGoNull -benchtime 1x ./tests/native/
  echo "## PostgreSQL sink: rows/s per write mode, exactly_once on and off (needs FERRY_POSTGRES_URL)"
  if [ -n "${FERRY_POSTGRES_URL:-}" ]; then
    go test -run '^$' -bench Sink -benchtime 200x ./connectors/postgres/
  else
    echo "skipped: FERRY_POSTGRES_URL is not set (eval \"\$(bash scripts/postgres.sh start)\")"
  fi
  echo "## PostgreSQL side by side: 300k JSON rows on 3 partitions of a ferry server on TCP, one batch per transaction, max_in_flight 3, group commit, COPY binary (the default) vs text, beside bare COPY loops (pgx; text and binary encoded by hand; binary with warmed connections; judged against the fastest) (needs FERRY_POSTGRES_URL, FERRY_POSTGRES_DIR)"
  if [ -n "${FERRY_POSTGRES_URL:-}" ]; then
    go test -run '^$' -bench PostgresSideBySide -benchtime 1x -timeout 30m ./tests/e2e/
  else
    echo "skipped: FERRY_POSTGRES_URL is not set (eval \"\$(bash scripts/postgres.sh start)\")"
  fi
  echo "## PostgreSQL CDC source: a 1,000,000-row insert into Iggy beside pg_recvlogical on the same WAL (needs FERRY_POSTGRES_URL, wal_level = logical)"
  if [ -n "${FERRY_POSTGRES_URL:-}" ]; then
    go test -run '^$' -bench CDCSource -benchtime 200000x ./connectors/postgres/source/
    FERRY_CDC_BENCH=1 go test -count=1 -v -run 'TestPostgresCDCThroughput|TestPostgresCDCLatency' -timeout 30m ./tests/e2e/ | grep -E 'changes/s|insert of|p50'
  else
    echo "skipped: FERRY_POSTGRES_URL is not set (eval \"\$(bash scripts/postgres.sh start)\")"
  fi
  echo "## Iggy source: Iggy → Iggy replication beside a bare poll+send+store loop of Ferry's client (two ferry servers of its own)"
  FERRY_IGGY_BENCH=1 go test -count=1 -v -run 'TestIggyReplicationThroughput' -timeout 30m ./tests/e2e/ | grep -E 'msg/s'
  echo "## Redis sink: XADD msgs/s beside go-redis's own pipelined XADD loop (needs FERRY_REDIS_URL)"
  if [ -n "${FERRY_REDIS_URL:-}" ]; then
    go test -run '^$' -bench SinkSideBySide -benchtime 200x -count 3 ./connectors/redis/
  else
    echo "skipped: FERRY_REDIS_URL is not set (eval \"\$(bash scripts/redis.sh start)\")"
  fi
  echo "## S3 sink: rows/s into Parquet and JSON Lines beside the S3 server's own PUT loop (needs FERRY_S3_ENDPOINT)"
  if [ -n "${FERRY_S3_ENDPOINT:-}" ]; then
    go test -run '^$' -bench 'Sink$' -benchtime 3x ./connectors/s3/
    go test -run '^$' -bench ParquetEncode -benchtime 20x ./connectors/s3/
    go test -run '^$' -bench SinkMemory -benchtime 600x ./connectors/s3/
  else
    echo "skipped: FERRY_S3_ENDPOINT is not set (eval \"\$(bash scripts/s3.sh start)\")"
  fi
  echo "## MQTT source: 100,000 QoS 1 messages from a broker's queue into Iggy beside Paho's bare subscriber into a discarding handler, same broker, same run (needs FERRY_MQTT_URL); HTTP sink: 300,000 messages in ndjson batches of 1000 to a local receiver beside a bare POST loop"
  if [ -n "${FERRY_MQTT_URL:-}" ]; then
    FERRY_MQTT_BENCH=1 go test -count=1 -v -run '^TestMQTTThroughput$' -timeout 20m ./tests/e2e/ | grep -E 'msgs/s|FAIL'
  else
    echo "skipped: FERRY_MQTT_URL is not set (eval \"\$(bash scripts/mosquitto.sh start)\")"
  fi
  FERRY_HTTP_BENCH=1 go test -count=1 -v -run '^TestHTTPThroughput$' -timeout 20m ./tests/e2e/ | grep -E 'msgs/s|FAIL'
  echo "## Kafka: the sink beside franz-go's transactional produce loop, the source beside franz-go's group consume loop, 200-byte records (needs FERRY_KAFKA_BOOTSTRAP)"
  if [ -n "${FERRY_KAFKA_BOOTSTRAP:-}" ]; then
    go test -run '^$' -bench SinkSideBySide -benchtime 1x ./connectors/kafka/
    go test -run '^$' -bench SourceSideBySide -benchtime 1x ./connectors/kafka/source/
  else
    echo "skipped: FERRY_KAFKA_BOOTSTRAP is not set (eval \"\$(bash scripts/kafka.sh start)\")"
  fi
  echo "## Iceberg sink: rows/s (200-byte JSON, six typed columns) with commits every 10s and 1s beside iceberg-go's bare append loop, SQL catalog on PostgreSQL, local warehouse (needs FERRY_POSTGRES_URL)"
  if [ -n "${FERRY_POSTGRES_URL:-}" ]; then
    go test -v -run '^$' -bench SinkSideBySide -benchtime 1x ./connectors/iceberg/ | grep -E 'rows/s|FAIL'
  else
    echo "skipped: FERRY_POSTGRES_URL is not set (eval \"\$(bash scripts/postgres.sh start)\")"
  fi
  echo "## MongoDB sink beside the Go driver's own InsertMany loop of the same documents, FerretDB on SQLite (needs FERRY_MONGODB_URI)"
  if [ -n "${FERRY_MONGODB_URI:-}" ]; then
    go test -run '^$' -bench SinkSideBySide -benchtime 1x ./connectors/mongodb/
  else
    echo "skipped: FERRY_MONGODB_URI is not set (eval \"\$(bash scripts/ferretdb.sh start)\")"
  fi
  echo "## Elasticsearch sink beside a bare _bulk loop (net/http) of the same documents, OpenSearch 2.19 of scripts/opensearch.sh (needs FERRY_OPENSEARCH_URL)"
  if [ -n "${FERRY_OPENSEARCH_URL:-}" ]; then
    go test -run '^$' -bench SinkSideBySide -benchtime 1x ./connectors/elasticsearch/
  else
    echo "skipped: FERRY_OPENSEARCH_URL is not set (eval \"\$(bash scripts/opensearch.sh start)\")"
  fi
  echo "## end to end: ferry bench (random source -> discarding sink, fsync always)"
  go run ./cmd/ferry bench
} 2>&1 | tee "$out"
