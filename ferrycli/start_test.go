package ferrycli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startCase is one configuration mistake, given to `ferry check` and to `ferry run`.
type startCase struct {
	name     string
	runtime  string            // extra TOML for config.toml
	conns    map[string]string // connector files
	embedded bool
	embAddr  string // [embedded] address; "" = 127.0.0.1:0
	embExtra string // more keys of [embedded]
	want     string // the message; "%[1]s" in it (and in runtime) stands for the test's directory
}

// startDir writes config.toml (connectors in dir/connectors, state in dir/state, the API off
// unless runtime turns it on) and the connector files, and returns the config's path.
func startDir(t *testing.T, dir string, c startCase) string {
	t.Helper()
	conns := filepath.Join(dir, "connectors")
	if err := os.MkdirAll(conns, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range c.conns {
		if err := os.WriteFile(filepath.Join(conns, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "config.toml")
	addr := c.embAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	body := fmt.Sprintf("[connectors]\nconfig_dir = %q\n\n[state]\npath = %q\n\n[embedded]\naddress = %q\ndata_dir = %q\n%s\n",
		conns, filepath.Join(dir, "state"), addr, filepath.Join(dir, "data"), c.embExtra)
	if !strings.Contains(c.runtime, "[http]") {
		body += "[http]\nenabled = false\n\n"
	}
	if err := os.WriteFile(cfg, []byte(body+c.runtime), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runFlagsFor are `ferry run`'s flags for a test: quiet, no progress, embedded on request.
func runFlagsFor(cfg string, embedded bool) runFlags {
	return runFlags{config: cfg, embedded: embedded, partitions: 1, logLevel: "error", stopTimeout: 30 * time.Second,
		dialTimeout: 30 * time.Second}
}

const okSource = `type = "source"
key = "gen"
enabled = true
version = 0
name = "gen"
path = "builtin:random"

[[streams]]
stream = "s"
topic = "t"
schema = "json"

[plugin_config]
count = 10
`

// fileSinkWith is a file sink of key with extra top-level keys, stream settings and
// plugin_config lines.
func fileSinkWith(key, top, stream, plugin string) string {
	return fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = 0
name = "file"
path = "builtin:file"
%s
[restart]
max_restarts = 0

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
%s
[plugin_config]
path = "out.jsonl"
%s`, key, top, stream, plugin)
}

// TestCheckRefusesWhatRunRefuses: every mistake `ferry run` refuses at start, before it
// listens, connects or creates anything, `ferry check` refuses with the same message.
func TestCheckRefusesWhatRunRefuses(t *testing.T) {
	cases := []startCase{
		{name: "API off loopback without api_key", runtime: "[http]\nenabled = true\naddress = \"0.0.0.0:0\"\n",
			want: `httpapi: http.address "0.0.0.0:0" is not a loopback address and http.api_key is empty: set an api_key, or listen on 127.0.0.1, ::1 or localhost`},
		{name: "API TLS files missing", runtime: "[http]\nenabled = true\naddress = \"127.0.0.1:0\"\n[http.tls]\nenabled = true\ncert_file = \"%[1]s/c.pem\"\nkey_file = \"%[1]s/k.pem\"\n",
			want: "httpapi: http.tls: load cert_file %[1]s/c.pem and key_file %[1]s/k.pem: open %[1]s/c.pem: no such file or directory"},
		{name: "metrics endpoint not a path", runtime: "[http]\nenabled = true\naddress = \"127.0.0.1:0\"\n[http.metrics]\nenabled = true\nendpoint = \"metrics\"\n",
			want: `httpapi: http.metrics.endpoint "metrics" must be a path starting with /`},
		{name: "Iggy CA file missing", runtime: "[iggy.tls]\nenabled = true\nca_file = \"%[1]s/ca.pem\"\n",
			want: "iggy.tls.ca_file: open %[1]s/ca.pem: no such file or directory"},
		{name: "embedded default credentials off loopback", embedded: true, embAddr: "0.0.0.0:0",
			want: `embedded server: server: invalid config: Addr "0.0.0.0:0" is not a loopback address`},
		{name: "embedded negative limit", embedded: true, embExtra: "max_connections = -1\n",
			want: "embedded.max_connections and embedded.max_connections_per_ip must not be negative"},
		{name: "connector file that names no connector", conns: map[string]string{"bad.toml": "type = \"sink\"\nkey = [\n"},
			want: "%[1]s/connectors/bad.toml:2: array is incomplete"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if strings.Contains(c.runtime, "%[1]s") {
				c.runtime = fmt.Sprintf(c.runtime, dir)
			}
			cfg := startDir(t, dir, c)
			want := c.want
			if strings.Contains(want, "%[1]s") {
				want = fmt.Sprintf(want, dir)
			}
			var out bytes.Buffer
			checkErr := check(&out, startOptions{config: cfg, embedded: c.embedded})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			runErr := runRuntime(ctx, runFlagsFor(cfg, c.embedded))
			if checkErr == nil || runErr == nil || checkErr.Error() != runErr.Error() || !strings.HasPrefix(runErr.Error(), want) {
				t.Fatalf("check: %v\nrun:   %v\nwant the same error, starting with %q", checkErr, runErr, want)
			}
			for _, never := range []string{"state", "data"} {
				if _, err := os.Stat(filepath.Join(dir, never)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("run created %s before refusing: %v", never, err)
				}
			}
		})
	}
}

// TestCheckFailsWhatRunIsolates: a connector's own mistake does not stop a run (that
// connector is in error, the others run; here it is alone, so the run ends when it has
// failed for good and names it), and check fails on it. Both say the same words.
func TestCheckFailsWhatRunIsolates(t *testing.T) {
	cases := []startCase{
		{name: "invalid poll_interval", conns: map[string]string{"s.toml": fileSinkWith("bad", "", "poll_interval = \"not-a-valid-duration\"\n", "")},
			want: `sink bad: %[1]s/connectors/s.toml:15: streams[0].poll_interval: Invalid poll interval: invalid duration "not-a-valid-duration": expected a number at "not-a-valid-duration"`},
		{name: "unknown plugin_config field", conns: map[string]string{"s.toml": fileSinkWith("bad", "", "", "flush_intervall = \"1s\"\n")},
			want: "sink bad: %[1]s/connectors/s.toml:18: plugin_config.flush_intervall: unknown field (known: path, flush_interval, fsync_each_batch)"},
		{name: "unknown built-in", conns: map[string]string{"s.toml": strings.Replace(fileSinkWith("bad", "", "", ""), "builtin:file", "builtin:nope", 1)},
			want: `sink bad: unknown built-in sink "nope" (known: [`},
		{name: "missing plugin", conns: map[string]string{"s.toml": strings.Replace(fileSinkWith("bad", "", "", ""), "builtin:file", "%[1]s/libnope", 1)},
			want: "sink bad: Failed to resolve plugin path: Plugin library not found: %[1]s/libnope.so does not exist"},
		{name: "missing state directory", conns: map[string]string{"g.toml": strings.Replace(okSource, `key = "gen"`, `key = "a/b"`, 1)},
			want: "source a/b: Failed to load source state: Cannot open state file %[1]s/state/source_a/b.state: its directory %[1]s/state/source_a: stat %[1]s/state/source_a: no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range c.conns {
				if strings.Contains(body, "%[1]s") {
					c.conns[name] = fmt.Sprintf(body, dir)
				}
			}
			cfg := startDir(t, dir, c)
			want := c.want
			if strings.Contains(want, "%[1]s") {
				want = fmt.Sprintf(want, dir)
			}
			var out bytes.Buffer
			checkErr := check(&out, startOptions{config: cfg})
			if checkErr == nil || checkErr.Error() != "check: 1 connector(s) with problems" {
				t.Fatalf("check: %v\n%s", checkErr, out.String())
			}
			_, msg, _ := strings.Cut(want, ": ")
			if !strings.Contains(out.String(), "ERROR: "+msg) {
				t.Fatalf("check output lacks %q:\n%s", "ERROR: "+msg, out.String())
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			runErr := runRuntime(ctx, runFlagsFor(cfg, true))
			if runErr == nil || !strings.HasPrefix(runErr.Error(), "connectors in error: "+want) {
				t.Fatalf("run: %v\nwant connectors in error: %s", runErr, want)
			}
		})
	}
}
