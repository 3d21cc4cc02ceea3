package ferrycli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
)

// TestCheckRefusesPluginOutsideDirs: `ferry check` refuses a native plugin outside the
// plugin directories as `ferry run` does, without opening it (the library's constructor
// would create the marker file), and opens it once its directory is listed.
func TestCheckRefusesPluginOutsideDirs(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: this test needs gcc (CI has it)")
	}
	marker := filepath.Join(t.TempDir(), "loaded")
	t.Setenv("FERRY_TEST_LOADED_MARKER", marker)
	libDir := t.TempDir()
	lib := filepath.Join(libDir, "marker.so")
	if msg, err := exec.Command(gcc, "-std=gnu11", "-O2", "-Wall", "-shared", "-fPIC", "-o", lib,
		filepath.Join("..", "connect", "httpapi", "testdata", "loaded_marker.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, msg)
	}
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	if err := os.Mkdir(conns, 0o755); err != nil {
		t.Fatal(err)
	}
	sink := "type = \"sink\"\nkey = \"m\"\nenabled = true\nversion = 0\nname = \"m\"\npath = \"" + lib +
		"\"\n\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"raw\"\n"
	if err := os.WriteFile(filepath.Join(conns, "m.toml"), []byte(sink), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.toml")
	base := "[connectors]\nconfig_type = \"local\"\nconfig_dir = \"" + conns + "\"\n"
	if err := os.WriteFile(cfg, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = check(&out, startOptions{config: cfg})
	exe, _ := os.Executable()
	want := `ERROR: Failed to resolve plugin path: plugin library not in an allowed directory: plugin path "` + lib + `" is ` + lib +
		`, outside the plugin directories (` + conns + `, ` + filepath.Dir(exe) + `)`
	if err == nil || !strings.Contains(out.String(), want) {
		t.Fatalf("check: %v, output:\n%s\nwant it to contain %q", err, out.String(), want)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("check opened the refused library: marker %v", err)
	}

	// Listed in [plugins] directories: opened (and refused as no sink).
	if err := os.WriteFile(cfg, []byte(base+"\n[plugins]\ndirectories = [\""+libDir+"\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = check(&out, startOptions{config: cfg})
	if err == nil || strings.Contains(out.String(), "not in an allowed directory") || !strings.Contains(out.String(), "iggy_sink_open") {
		t.Fatalf("check with the directory listed: %v, output:\n%s", err, out.String())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("check did not open the library of a listed directory: %v", err)
	}
}

// TestCheckConnectPostgresCDC: plain check connects to nothing and accepts the CDC source;
// --connect reaches PostgreSQL and refuses a captured table with REPLICA IDENTITY NOTHING,
// printing the SQL that fixes it.
func TestCheckConnectPostgresCDC(t *testing.T) {
	db, url := pgtest.Connect(t)
	ctx := context.Background()
	table := fmt.Sprintf("check_cdc_%d", time.Now().UnixNano()%1_000_000)
	if _, err := db.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY); ALTER TABLE "+table+" REPLICA IDENTITY NOTHING"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	if err := os.Mkdir(conns, 0o755); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("type = \"source\"\nkey = \"cdc\"\nenabled = true\nversion = 0\nname = \"cdc\"\npath = \"builtin:postgres\"\n\n"+
		"[[streams]]\nstream = \"s\"\ntopic = \"t\"\nschema = \"json\"\n\n[plugin_config]\nconnection_string = %q\nmode = \"cdc\"\ntables = [%q]\nreplication_slot = %q\n",
		url, table, table)
	if err := os.WriteFile(filepath.Join(conns, "cdc.toml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.toml")
	kit := iggykit.Start(t)
	kit.Topic("s", "t", 1)
	if err := os.WriteFile(cfg, []byte("[iggy]\naddress = \""+kit.Addr+"\"\n[connectors]\nconfig_type = \"local\"\nconfig_dir = \""+conns+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := check(&out, startOptions{config: cfg}); err != nil {
		t.Fatalf("check without --connect: %v\n%s", err, out.String())
	}
	out.Reset()
	err := checkWith(&out, startOptions{config: cfg}, &connectCheck{partitions: 1})
	want := `[iggy: s/t: 1 partition(s)]  ERROR: ` + filepath.Join(conns, "cdc.toml") + `:13: plugin_config: table "public"."` + table + `" has REPLICA IDENTITY NOTHING: its updates and deletes cannot be captured; fix: ALTER TABLE "public"."` + table + `" REPLICA IDENTITY DEFAULT;`
	if err == nil || !strings.Contains(out.String(), want) {
		t.Fatalf("check --connect: %v, output:\n%s\nwant it to contain %q", err, out.String(), want)
	}
	if strings.Contains(out.String(), url) {
		t.Fatal("check --connect printed the connection string")
	}
}

// TestCheckRefusesCommitMode: a built-in sink whose spec lists its commit modes (the S3
// sink: sink_controlled only) is refused by `ferry check` with another offset_commit
// given in the file (after_polling or after_consuming), the error naming the file and the
// key, and accepted with sink_controlled; a file that sets no offset_commit, as upstream's
// s3_sink files, is accepted and checked as sink_controlled, which the line says. Nothing
// is contacted (the bucket's endpoint is a closed port).
func TestCheckRefusesCommitMode(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	if err := os.Mkdir(conns, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(conns, "s3.toml")
	sink := func(mode string) string {
		return "type = \"sink\"\nkey = \"arch\"\nenabled = true\nversion = 0\nname = \"a\"\npath = \"builtin:s3\"\n" + mode +
			"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"raw\"\n\n[plugin_config]\nbucket = \"b\"\nregion = \"us-east-1\"\nendpoint = \"http://127.0.0.1:1\"\n"
	}
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte("[connectors]\nconfig_type = \"local\"\nconfig_dir = \""+conns+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode, want string
		ok         bool
	}{
		{`offset_commit = "after_polling"`, file + `: offset_commit = "after_polling": the sink runs only with offset_commit = "sink_controlled"`, false},
		{`offset_commit = "auto"`, file + `: offset_commit = "after_polling": the sink runs only with offset_commit = "sink_controlled"`, false},
		{`offset_commit = "after_consuming"`, file + `: offset_commit = "after_consuming": the sink runs only with offset_commit = "sink_controlled"`, false},
		{`offset_commit = "sink_controlled"`, `offset_commit=sink_controlled on_failure=stop ← s/[t]  ok`, true},
		{"", `offset_commit=sink_controlled (not set: the only mode of builtin:s3) on_failure=stop ← s/[t]  ok`, true},
	} {
		if err := os.WriteFile(file, []byte(sink(tc.mode)), 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := check(&out, startOptions{config: cfg})
		if (err == nil) != tc.ok || !strings.Contains(out.String(), tc.want) {
			t.Fatalf("%q: check %v, output:\n%s\nwant it to contain %q", tc.mode, err, out.String(), tc.want)
		}
	}
}
