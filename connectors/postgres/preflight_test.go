package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/sdk"
)

// preflight runs Preflight on cfg (plugin_config as a map) and returns its problems'
// texts; each must be an *sdk.FieldError (the runtime names its key's line).
func preflight(t *testing.T, cfg map[string]any) []string {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for _, err := range New().Preflight(ctx, raw) {
		var fe *sdk.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("Preflight: %v (%T), want an *sdk.FieldError", err, err)
		}
		out = append(out, err.Error())
	}
	return out
}

// TestPreflight: `ferry check --connect` of the PostgreSQL sink against a real server, in a
// schema of its own (search_path) and with a role holding only USAGE on it: a missing
// table without auto_create_table (the fix is the CREATE TABLE Open would run), a missing
// table and offsets table the role may not create, a table whose payload column has
// another type than payload_format, a missing metadata column, a mapped column of another
// type than declared and one missing, and the rights the role lacks on both tables, each
// with its key and fix; then, the grants and columns fixed, nothing. Nothing is created.
func TestPreflight(t *testing.T) {
	db, url := pgtest.Connect(t)
	ctx := context.Background()
	sch := fmt.Sprintf("pf_%d", time.Now().UnixNano()%1_000_000_000)
	role := sch + "_r"
	exec := func(sql string) {
		t.Helper()
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE SCHEMA " + sch + "; CREATE ROLE " + role + " LOGIN; GRANT USAGE ON SCHEMA " + sch + " TO " + role)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), "DROP SCHEMA "+sch+" CASCADE; DROP OWNED BY "+role+"; DROP ROLE "+role)
	})
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	asOwner := url + sep + "search_path=" + sch
	asRole := strings.Replace(asOwner, "://ferry@", "://"+role+"@", 1)
	if asRole == asOwner {
		t.Fatalf("FERRY_POSTGRES_URL %s does not log in as ferry@", url)
	}
	cfg := func(conn string, more map[string]any) map[string]any {
		c := map[string]any{"connection_string": conn, "target_table": "events"}
		for k, v := range more {
			c[k] = v
		}
		return c
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", what, got, want)
		}
	}

	check("missing table, auto_create_table false", preflight(t, cfg(asOwner, nil)),
		`plugin_config.target_table: table "events" does not exist and auto_create_table is false; fix: set auto_create_table = true, or run `+
			`CREATE TABLE IF NOT EXISTS "events" ( id numeric(39,0) PRIMARY KEY, iggy_offset bigint, iggy_timestamp timestamptz, iggy_stream text, iggy_topic text, iggy_partition_id integer, `+
			`iggy_checksum bigint, iggy_origin_timestamp timestamptz, payload bytea, created_at timestamptz DEFAULT now());`)
	check("missing tables the owner may create", preflight(t, cfg(asOwner, map[string]any{"auto_create_table": true})))
	q := `"` + role + `"`
	check("missing tables the role may not create", preflight(t, cfg(asRole, map[string]any{"auto_create_table": true})),
		`plugin_config.target_table: table "events" does not exist and role `+q+` may not create it in schema "`+sch+`"; fix: GRANT CREATE ON SCHEMA "`+sch+`" TO `+q+`;`,
		`plugin_config.offsets_table: the offsets table "ferry_offsets" does not exist and role `+q+` may not create it in schema "`+sch+`"; fix: GRANT CREATE ON SCHEMA "`+sch+`" TO `+q+`;`)
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", sch).Scan(&n); err != nil || n != 0 {
		t.Fatalf("tables in %s after the checks: %d (%v), want none", sch, n, err)
	}

	exec("CREATE TABLE " + sch + ".events (id numeric(39,0) PRIMARY KEY, iggy_offset bigint, iggy_timestamp timestamptz, iggy_stream text, iggy_topic text, " +
		"iggy_partition_id integer, iggy_origin_timestamp timestamptz, payload text, amount integer)")
	exec("CREATE TABLE " + sch + ".ferry_offsets (connector text)")
	mapped := map[string]any{"columns": []map[string]string{{"name": "amount", "type": "numeric(10,2)", "path": "a"}, {"name": "note", "type": "varchar(20)", "path": "n"}}}
	tbl := `"events"`
	check("a table of other columns, no rights", preflight(t, cfg(asRole, mapped)),
		`plugin_config.include_checksum: table `+tbl+` has no column "iggy_checksum" (include_checksum); fix: ALTER TABLE `+tbl+` ADD COLUMN "iggy_checksum" bigint; or set include_checksum = false`,
		`plugin_config.payload_format: column "payload" of table `+tbl+` is text; the sink writes bytea there; fix: ALTER TABLE `+tbl+` ALTER COLUMN "payload" TYPE bytea USING "payload"::bytea; or set payload_format to the column's type`,
		`plugin_config.columns[0].type: column "amount" of table `+tbl+` is integer; the sink writes numeric there; fix: ALTER TABLE `+tbl+` ALTER COLUMN "amount" TYPE numeric USING "amount"::numeric; or set columns[0].type to the column's type`,
		`plugin_config.columns[1].type: table `+tbl+` has no column "note" (columns[1]); fix: ALTER TABLE `+tbl+` ADD COLUMN "note" character varying; or set columns[1].type to the column's type`,
		`plugin_config.target_table: role `+q+` lacks INSERT, SELECT on table `+tbl+`; fix: GRANT INSERT, SELECT ON `+tbl+` TO `+q+`;`,
		`plugin_config.offsets_table: role `+q+` lacks SELECT, INSERT, UPDATE on table "ferry_offsets"; fix: GRANT SELECT, INSERT, UPDATE ON "ferry_offsets" TO `+q+`;`)

	exec("ALTER TABLE " + sch + ".events ADD COLUMN iggy_checksum bigint, ADD COLUMN note varchar(20), ALTER COLUMN amount TYPE numeric(10,2)")
	exec("GRANT INSERT, SELECT ON " + sch + ".events TO " + role + "; GRANT SELECT, INSERT, UPDATE ON " + sch + ".ferry_offsets TO " + role)
	check("payload_format text on the fixed table", preflight(t, cfg(asRole, map[string]any{"payload_format": "text", "columns": mapped["columns"]})))
	check("upsert needs UPDATE", preflight(t, cfg(asRole, map[string]any{"payload_format": "text", "columns": mapped["columns"], "write_mode": "upsert"})),
		`plugin_config.target_table: role `+q+` lacks UPDATE on table `+tbl+`; fix: GRANT UPDATE ON `+tbl+` TO `+q+`;`)
	check("exactly_once off needs neither SELECT nor the offsets table", preflight(t, cfg(asRole, map[string]any{"payload_format": "text", "columns": mapped["columns"], "exactly_once": false})))

	// A database that does not exist: the server's words, the login's place, never the URL.
	bad := strings.Replace(url, "/ferry?", "/nope_"+sch+"?", 1)
	got := preflight(t, cfg(bad, nil))
	if len(got) != 1 || !strings.HasPrefix(got[0], `plugin_config.connection_string: cannot connect to PostgreSQL at 127.0.0.1:`) ||
		!strings.Contains(got[0], `(database "nope_`+sch+`", user "ferry"): `) || !strings.Contains(got[0], `database "nope_`+sch+`" does not exist (SQLSTATE 3D000)`) ||
		!strings.HasSuffix(got[0], "; fix: start the server, or correct the host, port, database, user or password") || strings.Contains(got[0], bad) {
		t.Errorf("unknown database: %q", got)
	}
}
