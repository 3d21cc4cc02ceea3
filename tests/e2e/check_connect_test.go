package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConnect: `ferry check --connect` as a process against a `ferry server` over
// TCP: a sink whose topic exists is noted with its partition count, one on a stream that
// does not exist is refused naming its file, the key and the ferry commands that fix it,
// and, where the services run, the PostgreSQL sink's missing table and the S3 sink's
// missing bucket are refused naming the file, the plugin_config key's line and the fix.
// The process exits 1 with the count; with the stream created (ferry stream/topic create,
// the fix it printed) the Iggy side passes.
func TestCheckConnect(t *testing.T) {
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	conns := filepath.Join(dir, "connectors")
	cfg := remoteConfig(t, dir, addr, conns)
	ferry := func(args ...string) (string, error) {
		out, err := exec.Command(ferryBin, args...).CombinedOutput()
		return string(out), err
	}
	for _, args := range [][]string{{"stream", "create", "shop"}, {"topic", "create", "shop", "orders", "--partitions", "3"}} {
		if out, err := ferry(append(args, "--config", cfg)...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	nullSink := func(key, stream string) string {
		return "type = \"sink\"\nkey = \"" + key + "\"\nenabled = true\nversion = 0\nname = \"" + key + "\"\npath = \"builtin:null\"\n\n[[streams]]\nstream = \"" +
			stream + "\"\ntopics = [\"orders\"]\nschema = \"json\"\n"
	}
	writeFile(t, filepath.Join(conns, "a.toml"), nullSink("here", "shop"))
	writeFile(t, filepath.Join(conns, "b.toml"), nullSink("away", "nope"))
	wants := []string{
		"iggy   " + addr + "  ok\n",
		"← shop/[orders] [iggy: shop/orders: 3 partition(s)]  ok\n",
		"← nope/[orders]  ERROR: " + filepath.Join(conns, "b.toml") + `: streams[0].stream: stream "nope" does not exist on the Iggy server at ` + addr +
			"; fix: ferry stream create nope && ferry topic create nope orders --partitions 1, or ferry run --create-topics (it creates every missing stream and topic), or correct streams[0].stream\n",
	}
	bad := 1
	if url := os.Getenv("FERRY_POSTGRES_URL"); url != "" {
		// Line 15: target_table.
		writeFile(t, filepath.Join(conns, "pg.toml"), "type = \"sink\"\nkey = \"pg\"\nenabled = true\nversion = 0\nname = \"pg\"\npath = \"builtin:postgres\"\n"+
			"offset_commit = \"sink_controlled\"\n\n[[streams]]\nstream = \"shop\"\ntopics = [\"orders\"]\nschema = \"json\"\n\n[plugin_config]\ntarget_table = \"check_connect_absent\"\nconnection_string = \""+url+"\"\n")
		wants = append(wants, "ERROR: "+filepath.Join(conns, "pg.toml")+`:15: plugin_config.target_table: table "check_connect_absent" does not exist and auto_create_table is false; fix: set auto_create_table = true, or run CREATE TABLE IF NOT EXISTS "check_connect_absent" (`)
		bad++
	} else {
		t.Log("FERRY_POSTGRES_URL is not set: the PostgreSQL sink's part is not run")
	}
	if ep := os.Getenv("FERRY_S3_ENDPOINT"); ep != "" {
		// Line 15: bucket.
		writeFile(t, filepath.Join(conns, "s3.toml"), "type = \"sink\"\nkey = \"s3\"\nenabled = true\nversion = 0\nname = \"s3\"\npath = \"builtin:s3\"\n\n"+
			"[[streams]]\nstream = \"shop\"\ntopics = [\"orders\"]\nschema = \"json\"\n\n[plugin_config]\nregion = \"us-east-1\"\nbucket = \"check-connect-absent\"\nendpoint = \""+ep+
			"\"\naccess_key_id = \""+os.Getenv("FERRY_S3_ACCESS_KEY")+"\"\nsecret_access_key = \""+os.Getenv("FERRY_S3_SECRET_KEY")+"\"\n")
		wants = append(wants, "ERROR: "+filepath.Join(conns, "s3.toml")+`:15: plugin_config.bucket: bucket "check-connect-absent" does not exist at `+ep+
			"; fix: create it (aws s3 mb s3://check-connect-absent, or the store's console), or correct bucket\n")
		bad++
	} else {
		t.Log("FERRY_S3_ENDPOINT is not set: the S3 sink's part is not run")
	}

	out, err := ferry("check", "--config", cfg, "--connect")
	if exitErr := (*exec.ExitError)(nil); !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("check --connect: %v, want exit status 1\n%s", err, out)
	}
	wants = append(wants, "ferry: check: "+string(rune('0'+bad))+" connector(s) with problems\n")
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Fatalf("check --connect output:\n%s\nwant it to contain:\n%s", out, want)
		}
	}
	if s := os.Getenv("FERRY_S3_SECRET_KEY"); s != "" && strings.Contains(out, s) {
		t.Fatalf("check --connect printed the S3 secret key:\n%s", out)
	}

	for _, args := range [][]string{{"stream", "create", "nope"}, {"topic", "create", "nope", "orders", "--partitions", "1"}} {
		if out, err := ferry(append(args, "--config", cfg)...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	_ = os.Remove(filepath.Join(conns, "pg.toml"))
	_ = os.Remove(filepath.Join(conns, "s3.toml"))
	if out, err := ferry("check", "--config", cfg, "--connect"); err != nil || !strings.Contains(out, "← nope/[orders] [iggy: nope/orders: 1 partition(s)]  ok\n") {
		t.Fatalf("check --connect after the fix: %v\n%s", err, out)
	}
}
