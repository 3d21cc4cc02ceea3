package ferrycli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

// testSink is a sink that is never opened: these tests only register it.
type testSink struct{}

func (testSink) Open(context.Context, sdk.SinkEnv) error { return nil }
func (testSink) Consume(context.Context, sdk.TopicMetadata, sdk.MessagesMetadata, []sdk.ConsumedMessage) error {
	return nil
}
func (testSink) Close(context.Context) error { return nil }

type testSource struct{}

func (testSource) Open(context.Context, sdk.SourceEnv) error { return nil }
func (testSource) Read(context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	return sdk.SourceBatch{}, nil, sdk.ErrEndOfInput
}
func (testSource) Close(context.Context) error { return nil }

var (
	newTestSink   = func() sdk.Sink { return testSink{} }
	newTestSource = func() sdk.Source { return testSource{} }
	testSpec      = sdk.ConfigSpec{Fields: []sdk.ConfigField{
		{Name: "target", Type: sdk.TypeString, Required: true, Doc: "where it writes"},
		{Name: "size", Type: sdk.TypeUnsigned, Default: 10, Doc: "how much"},
	}}
)

// TestAddRefuses: every refusal names the kind and the name, registers nothing, and a
// duplicate wraps ErrDuplicate; a sink and a source may share a name.
func TestAddRefuses(t *testing.T) {
	c := New()
	if err := c.AddSink("mine", newTestSink, testSpec); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSource("mine", newTestSource, testSpec); err != nil {
		t.Fatalf("a source named as a sink: %v", err)
	}
	cases := []struct {
		name string
		add  func() error
		want string
		dup  bool
	}{
		{"built-in sink", func() error { return c.AddSink("file", newTestSink, testSpec) },
			`ferrycli: sink "file" (path = "builtin:file"): connector name already registered`, true},
		{"built-in source", func() error { return c.AddSource("random", newTestSource, testSpec) },
			`ferrycli: source "random" (path = "builtin:random"): connector name already registered`, true},
		{"added twice", func() error { return c.AddSink("mine", newTestSink, testSpec) },
			`ferrycli: sink "mine" (path = "builtin:mine"): connector name already registered`, true},
		{"empty name", func() error { return c.AddSink("", newTestSink, testSpec) },
			`ferrycli: sink name "": want lower-case letters, digits, '_', '.' or '-', starting with a letter or digit`, false},
		{"upper case", func() error { return c.AddSource("Mine", newTestSource, testSpec) },
			`ferrycli: source name "Mine": want lower-case letters, digits, '_', '.' or '-', starting with a letter or digit`, false},
		{"with a colon", func() error { return c.AddSink("builtin:x", newTestSink, testSpec) },
			`ferrycli: sink name "builtin:x": want lower-case letters, digits, '_', '.' or '-', starting with a letter or digit`, false},
		{"nil sink factory", func() error { return c.AddSink("other", nil, testSpec) }, `ferrycli: sink "other": nil factory`, false},
		{"nil source factory", func() error { return c.AddSource("other", nil, testSpec) }, `ferrycli: source "other": nil factory`, false},
		{"a sink that never commits but takes sink_controlled", func() error {
			return c.AddSink("other", newTestSink, sdk.ConfigSpec{AnyFields: true, CommitModes: []string{"sink_controlled"}, Commits: sdk.CommitsNever})
		}, `ferrycli: sink "other": CommitModes lists "sink_controlled" but Commits is CommitsNever`, false},
	}
	for _, tc := range cases {
		err := tc.add()
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
		if errors.Is(err, ErrDuplicate) != tc.dup {
			t.Errorf("%s: errors.Is(err, ErrDuplicate) = %v, want %v", tc.name, !tc.dup, tc.dup)
		}
	}
	if got, want := strings.Join(c.reg.SinkNames(), ","), "elasticsearch,file,http,iceberg,kafka,mine,mongodb,mqtt,null,postgres,redis,s3,stdout"; got != want {
		t.Errorf("sinks %s, want %s", got, want)
	}
	if got, want := strings.Join(c.reg.SourceNames(), ","), "iggy,kafka,mine,mqtt,postgres,random,redis"; got != want {
		t.Errorf("sources %s, want %s", got, want)
	}
	if _, ok := New().reg.Sink("mine"); ok {
		t.Error("a new CLI sees a sink added to another: registries must be values")
	}
}

// execute runs the command line of c with args and returns what it printed.
func execute(t *testing.T, c *CLI, args ...string) (string, error) {
	t.Helper()
	root := c.command()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// TestConnectorsLists: `connectors` prints an added sink and source with their specs
// beside the built-ins, and `connectors NAME...` only those (both kinds of a shared name).
func TestConnectorsLists(t *testing.T) {
	c := New()
	if err := c.AddSink("mine", newTestSink, testSpec); err != nil {
		t.Fatal(err)
	}
	if err := c.AddSource("mine", newTestSource, sdk.ConfigSpec{AnyFields: true}); err != nil {
		t.Fatal(err)
	}
	out, err := execute(t, c, "connectors", "mine", "null")
	if err != nil {
		t.Fatal(err)
	}
	want := `sink builtin:mine
  offset_commit: after_polling, after_consuming, sink_controlled; when not set: after_polling; under sink_controlled: not declared
  target  string    required  where it writes
  size    unsigned  10        how much

sink builtin:null
  offset_commit: after_polling, after_consuming, sink_controlled; when not set: after_polling; under sink_controlled: commits each batch once written, inside Consume
  max_in_flight when not set: the runtime's default (twice the CPUs, 2 to 8), at most what it accepts
  (ignores plugin_config)

source builtin:mine
  (ignores plugin_config)
`
	if out != want {
		t.Errorf("connectors mine null:\n%s\nwant:\n%s", out, want)
	}
	all, err := execute(t, c, "connectors")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"sink builtin:mine\n", "source builtin:mine\n", "sink builtin:file\n", "source builtin:random\n"} {
		if !strings.Contains(all, s) {
			t.Errorf("connectors lists no %q", s)
		}
	}
	md, err := execute(t, c, "connectors", "--markdown", "mine")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md, "| sink `builtin:mine` | `target` | string | required | where it writes |\n") {
		t.Errorf("connectors --markdown mine:\n%s", md)
	}
	_, err = execute(t, c, "connectors", "nope")
	if err == nil || !strings.Contains(err.Error(), `connectors: no connector named "nope" (sinks: [elasticsearch file http iceberg kafka mine mongodb mqtt null postgres redis s3 stdout], sources: [iggy kafka mine mqtt postgres random redis])`) {
		t.Errorf("connectors nope: %v", err)
	}
}

// TestCheckUsesAddedSpec: `ferry check` validates an added sink's plugin_config with the
// spec it was added with, and knows no such sink without it.
func TestCheckUsesAddedSpec(t *testing.T) {
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	if err := os.MkdirAll(conns, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.toml")
	writeTestFile(t, cfg, "[iggy]\naddress = \"127.0.0.1:8090\"\n[state]\npath = \""+filepath.Join(dir, "state")+"\"\n[connectors]\nconfig_type = \"local\"\nconfig_dir = \""+conns+"\"\n")
	sinkFile := func(pluginConfig string) {
		writeTestFile(t, filepath.Join(conns, "mine.toml"), `type = "sink"
key = "mine"
enabled = true
version = 0
name = "mine"
path = "builtin:mine"

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"

[plugin_config]
`+pluginConfig)
	}
	c := New()
	if err := c.AddSink("mine", newTestSink, testSpec); err != nil {
		t.Fatal(err)
	}

	sinkFile("target = \"x\"\n")
	if out, err := execute(t, c, "check", "--config", cfg); err != nil || !strings.Contains(out, "builtin:mine") || !strings.HasSuffix(out, "  ok\n") {
		t.Fatalf("check of a valid file: %v\n%s", err, out)
	}
	if out, err := execute(t, New(), "check", "--config", cfg); err == nil || !strings.Contains(out, `unknown built-in sink "mine"`) {
		t.Fatalf("check without the sink added: %v\n%s", err, out)
	}
	sinkFile("size = -1\n")
	out, err := execute(t, c, "check", "--config", cfg)
	if err == nil || err.Error() != "check: 1 connector(s) with problems" ||
		!strings.Contains(out, "plugin_config.size: ") || !strings.Contains(out, "plugin_config.target: required field is missing") {
		t.Fatalf("check of a bad plugin_config: %v\n%s", err, out)
	}

	// A source is checked with its own spec, apart from the sink of the same name.
	sinkFile("target = \"x\"\n")
	if err := c.AddSource("mine", newTestSource, sdk.ConfigSpec{Fields: []sdk.ConfigField{{Name: "rate", Type: sdk.TypeNumber, Doc: "per second"}}}); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(conns, "src.toml"), `type = "source"
key = "src"
enabled = true
version = 0
name = "src"
path = "builtin:mine"

[[streams]]
stream = "s"
topic = "t"
schema = "json"

[plugin_config]
target = "x"
`)
	out, err = execute(t, c, "check", "--config", cfg)
	if err == nil || !strings.Contains(out, "plugin_config.target: unknown field (known: rate)") || strings.Count(out, "ERROR") != 1 {
		t.Fatalf("check of a source with a sink's field: %v\n%s", err, out)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVersion: SetVersion is what version and --version print; without it the embedded
// VERSION file's.
func TestVersion(t *testing.T) {
	c := New()
	c.SetVersion("1.2.3-custom")
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := execute(t, c, args...)
		if err != nil || out != "ferry 1.2.3-custom (Iggy server 0.9, binary protocol 0.11.0)\n" {
			t.Errorf("%v: %v %q", args, err, out)
		}
	}
	file, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := New().versionString(), strings.TrimSpace(string(file)); got != want {
		t.Errorf("default version %q, want the VERSION file's %q", got, want)
	}
}
