// Package icebergtest reads Iceberg tables with pyiceberg, a reader nobody here wrote: the
// SQL catalog on PostgreSQL (SqlCatalog), data on the local filesystem or S3. It knows
// nothing of Ferry.
package icebergtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Python returns the interpreter of the venv with pyiceberg (FERRY_PYICEBERG_PYTHON,
// which scripts/iceberg.sh python prints). The test is skipped when it is unset and
// FERRY_POSTGRES_URL is unset too, and fails when only it is unset.
func Python(t testing.TB) string {
	t.Helper()
	py := os.Getenv("FERRY_PYICEBERG_PYTHON")
	if py == "" {
		if os.Getenv("FERRY_POSTGRES_URL") == "" {
			t.Skip("FERRY_PYICEBERG_PYTHON and FERRY_POSTGRES_URL unset: run `eval \"$(bash scripts/postgres.sh start)\"` and `eval \"$(bash scripts/iceberg.sh python)\"`")
		}
		t.Fatal("FERRY_PYICEBERG_PYTHON is not set: run `eval \"$(bash scripts/iceberg.sh python)\"` (a venv with pyiceberg) for the Iceberg checks")
	}
	return py
}

// Catalog names a SQL catalog, or a REST catalog, as pyiceberg opens it.
type Catalog struct {
	Name      string // the catalog_name of its rows
	URL       string // postgres://… (as FERRY_POSTGRES_URL), or the REST catalog's http://…
	REST      bool   // URL is a REST catalog (pyiceberg's RestCatalog)
	Warehouse string // file:///… or s3://…
	// S3 properties (s3.endpoint, s3.access-key-id, …) when the data is on S3.
	Props map[string]string
}

// Table is what pyiceberg read of one table.
type Table struct {
	Rows []map[string]any `json:"rows"` // each row's columns, numbers as json.Number
	// Snapshots are the snapshot summaries, oldest first.
	Snapshots []map[string]string `json:"snapshots"`
	Files     int                 `json:"files"` // data files of the current snapshot
}

const script = `
import json, sys
args = json.load(sys.stdin)
props = {"uri": args["uri"], "warehouse": args["warehouse"]}
props.update(args["props"] or {})
if args["rest"]:
    from pyiceberg.catalog.rest import RestCatalog
    cat = RestCatalog(args["name"], **props)
else:
    from pyiceberg.catalog.sql import SqlCatalog
    cat = SqlCatalog(args["name"], **props)
tbl = cat.load_table(args["table"])
rows = tbl.scan().to_arrow().to_pylist()
for r in rows:
    for k, v in list(r.items()):
        if hasattr(v, "isoformat"):
            r[k] = v.isoformat()
        elif isinstance(v, bytes):
            r[k] = v.hex()
snaps = [dict(s.summary.additional_properties) | {"operation": str(s.summary.operation.value)} for s in tbl.metadata.snapshots]
files = len(list(tbl.inspect.files().to_pylist())) if tbl.current_snapshot() else 0
json.dump({"rows": rows, "snapshots": snaps, "files": files}, sys.stdout)
`

// Read reads table (namespace.table) of c with pyiceberg: every row of its current
// snapshot and every snapshot's summary. A table pyiceberg cannot read fails the test.
func Read(t testing.TB, c Catalog, table string) Table {
	t.Helper()
	uri := c.URL
	for _, p := range []string{"postgres://", "postgresql://"} {
		if strings.HasPrefix(uri, p) {
			uri = "postgresql+psycopg2://" + strings.TrimPrefix(uri, p)
		}
	}
	in, _ := json.Marshal(map[string]any{"name": c.Name, "uri": uri, "warehouse": c.Warehouse, "props": c.Props, "table": table, "rest": c.REST})
	cmd := exec.Command(Python(t), "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("pyiceberg read of %s in catalog %s: %v\n%s", table, c.Name, err, errb.String())
	}
	var tbl Table
	d := json.NewDecoder(&out)
	d.UseNumber()
	if err := d.Decode(&tbl); err != nil {
		t.Fatalf("pyiceberg's output: %v", err)
	}
	return tbl
}
