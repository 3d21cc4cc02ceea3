#!/usr/bin/env bash
# The Iceberg tests' independent reader: pyiceberg (with SqlCatalog on PostgreSQL and
# pyarrow) in a cached venv. The catalog is the PostgreSQL of scripts/postgres.sh and the
# data a local warehouse or the S3 server of scripts/s3.sh: nothing else to start.
#
#   eval "$(bash scripts/iceberg.sh python)"   # exports FERRY_PYICEBERG_PYTHON
#
# FERRY_PYICEBERG_VENV overrides the venv's directory (default .venv-iceberg in the repo).
set -euo pipefail

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
*)
  echo "usage: $0 python" >&2
  exit 2
  ;;
esac
