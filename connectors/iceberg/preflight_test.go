package iceberg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"

	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/sdk"
)

// preflight runs Preflight on cfg and returns its problems' texts, each an *sdk.FieldError.
func preflight(t *testing.T, cfg string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for _, err := range New().Preflight(ctx, []byte(cfg)) {
		var fe *sdk.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("Preflight: %v (%T), want an *sdk.FieldError", err, err)
		}
		out = append(out, err.Error())
	}
	return out
}

// TestPreflight: `ferry check --connect` of the Iceberg sink on the SQL catalog of a real
// PostgreSQL, in a schema of its own (search_path): with no catalog yet, a declared schema
// passes and creates nothing (not even the catalog's tables), no schema is refused, and a
// role that may not create the catalog's tables is told the GRANT; once the table exists,
// a configuration whose include_metadata columns it lacks is refused with Open's words and
// one that matches passes; a warehouse under a regular file and a database that does not
// exist are refused under their keys.
func TestPreflight(t *testing.T) {
	db, url := pgtest.Connect(t)
	ctx := context.Background()
	sch := fmt.Sprintf("icepf_%d", time.Now().UnixNano()%1_000_000_000)
	role := sch + "_r"
	if _, err := db.Exec(ctx, "CREATE SCHEMA "+sch+"; CREATE ROLE "+role+" LOGIN; GRANT USAGE ON SCHEMA "+sch+" TO "+role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP SCHEMA "+sch+" CASCADE; DROP OWNED BY "+role+"; DROP ROLE "+role)
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	owner := url + sep + "search_path=" + sch
	asRole := strings.Replace(owner, "://ferry@", "://"+role+"@", 1)
	wh := t.TempDir()
	cfg := func(uri, warehouse string, metadata bool, schema string) string {
		return fmt.Sprintf(`{"catalog_type":"sql","uri":%q,"warehouse":%q,"catalog_name":"c","tables":["ns.events"],"include_metadata":%t%s}`,
			uri, warehouse, metadata, schema)
	}
	const cols = `,"schema":[{"name":"p","type":"long"},{"name":"o","type":"long"}]`
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", what, got, want)
		}
	}

	check("no catalog yet, a declared schema", preflight(t, cfg(owner, wh, true, cols)))
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", sch).Scan(&n); err != nil || n != 0 {
		t.Fatalf("tables in %s after the check: %d (%v), want none", sch, n, err)
	}
	check("no catalog yet, no schema", preflight(t, cfg(owner, wh, true, "")),
		"plugin_config.tables: table ns.events does not exist (the SQL catalog holds none yet) and plugin_config.schema declares no columns to create it with; fix: declare schema, or create the table")
	check("a role that may not create the catalog", preflight(t, cfg(asRole, wh, true, cols)),
		"plugin_config.uri: the SQL catalog's tables iceberg_tables and iceberg_namespace_properties do not exist and role "+role+" may not create them in schema "+sch+
			"; fix: GRANT CREATE ON SCHEMA "+sch+" TO "+role+";")

	// The table as Open creates it without the metadata columns.
	plain := cfg(owner, wh, false, cols)
	c, err := Config.Parse([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := warehouseLocation(&c)
	cat, closeCat, err := openCatalog(ctx, &c, loc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrCreate(ctx, cat, &c, catalog.ToIdentifier("ns", "events"), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	_ = closeCat()
	check("the table, as configured", preflight(t, plain))
	check("the table without include_metadata's columns", preflight(t, cfg(owner, wh, true, cols)),
		`plugin_config.tables: table ns.events: include_metadata is on but the table has no column "iggy_stream"; fix: alter the table, or correct schema and include_metadata`)

	blocker := filepath.Join(t.TempDir(), "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	check("a warehouse under a file", preflight(t, cfg(owner, filepath.Join(blocker, "wh"), false, cols)),
		"plugin_config.warehouse: "+blocker+" is not a directory (in the path of "+filepath.Join(blocker, "wh")+"); fix: choose another warehouse")

	bad := strings.Replace(owner, "/ferry?", "/nope_"+sch+"?", 1)
	got := preflight(t, cfg(bad, wh, false, cols))
	if len(got) != 1 || !strings.HasPrefix(got[0], "plugin_config.uri: cannot connect to the SQL catalog at ") ||
		!strings.Contains(got[0], `database "nope_`+sch+`" does not exist (SQLSTATE 3D000)`) || !strings.HasSuffix(got[0], "; fix: start PostgreSQL, or correct uri") {
		t.Errorf("unknown database: %q", got)
	}
}
