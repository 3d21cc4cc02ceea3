#!/usr/bin/env bash
# Runs every Fuzz* target of the module for the given time each (default 60s).
# Usage: scripts/fuzz.sh [duration]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-60s}"
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
  for t in $targets; do
    echo "fuzz $pkg $t ($fuzztime)"
    go test "$pkg" -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" 2>&1 | tail -n 3
  done
done
