#!/usr/bin/env bash
# The SIGKILL soaks at full size (CI runs each at a modest size inside `go test ./tests/e2e`).
# Each needs its service started as .ci/run starts it (the FERRY_* variables of its script).
#   bash scripts/soak.sh            # every soak whose service is up
#   bash scripts/soak.sh cdc s3     # only those named
set -euo pipefail
cd "$(dirname "$0")/.."

# name|variable that must be set|env of the full size|test regexp
soaks=(
  "cdc|FERRY_POSTGRES_URL|FERRY_CDC_SOAK=1|TestPostgresCDCExactlyOnceUnderSIGKILL"
  "redis|FERRY_REDIS_URL|FERRY_REDIS_SOAK=1|TestRedisExactlyOnceUnderSIGKILL"
  "redis-source|FERRY_REDIS_URL|FERRY_REDIS_SOAK=1|TestRedisSourceUnderSIGKILL"
  "iggy|PATH|FERRY_IGGY_REPL_SOAK=1|TestIggyReplicationUnderSIGKILL" # no service: the test starts both ferry servers
  "mqtt|FERRY_MQTT_URL|FERRY_MQTT_SOAK=1|TestMQTTSourceAtLeastOnceUnderSIGKILL"
  # http needs no service (its receiver runs in the test): PATH stands for "always".
  "http|PATH|FERRY_HTTP_SOAK=1|TestHTTPSinkExactlyOnceAfterDedupUnderSIGKILL"
  "kafka|FERRY_KAFKA_BOOTSTRAP|FERRY_KAFKA_SOAK=1|TestKafkaRoundTripExactlyOnceUnderSIGKILL"
  "iceberg|FERRY_PYICEBERG_PYTHON|FERRY_ICEBERG_SOAK=1|TestIcebergExactlyOnceUnderSIGKILL"
  "mongodb|FERRY_MONGODB_URI|FERRY_MONGODB_SOAK=1|TestMongoDBExactlyOnceUnderSIGKILL"
  "elasticsearch|FERRY_OPENSEARCH_URL|FERRY_ELASTICSEARCH_SOAK=1|TestElasticsearchExactlyOnceUnderSIGKILL"
)

want=("$@")
for entry in "${soaks[@]}"; do
  IFS='|' read -r name need size run <<<"$entry"
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
  if [ -z "${!need:-}" ]; then
    echo "--- soak $name: skipped ($need is not set)"
    continue
  fi
  echo "--- soak $name ($size)"
  env "$size" go test -count=1 -timeout 60m -run "^($run)\$" ./tests/e2e/
done
