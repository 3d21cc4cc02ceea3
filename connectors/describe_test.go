package connectors

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

// docs/connectors.md's two tables are `ferry connectors --markdown` (the fields, then the
// sinks' commit facts); regenerate them with `go run ./cmd/ferry connectors --markdown`
// when this fails; FERRY_UPDATE_DOCS=1 rewrites them.
func TestREADMEConnectorTableIsCurrent(t *testing.T) {
	readme, err := os.ReadFile("../docs/connectors.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		block string
		write func(io.Writer, *sdk.Registry) error
	}{{"connectors", WriteMarkdown}, {"commits", WriteCommitsMarkdown}} {
		begin, end := "<!-- "+tc.block+":begin -->\n", "<!-- "+tc.block+":end -->"
		s := string(readme)
		i, j := strings.Index(s, begin), strings.Index(s, end)
		if i < 0 || j < i {
			t.Fatalf("docs/connectors.md has no %q … %q block", begin, end)
		}
		var want bytes.Buffer
		if err := tc.write(&want, Registry()); err != nil {
			t.Fatal(err)
		}
		if got := s[i+len(begin) : j]; got != want.String() {
			if os.Getenv("FERRY_UPDATE_DOCS") != "" {
				readme = []byte(s[:i+len(begin)] + want.String() + s[j:])
				if err := os.WriteFile("../docs/connectors.md", readme, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Fatalf("docs/connectors.md %s table is out of date; want:\n%s\ngot:\n%s", tc.block, want.String(), got)
		}
	}
}

// Every built-in sink declares when it commits (sdk.ConfigSpec.Commits), so `ferry
// check` can refuse sink_controlled for one that never would and `ferry connectors`
// can say when each one's offsets advance.
func TestEveryBuiltinSinkDeclaresItsCommits(t *testing.T) {
	reg := Registry()
	want := map[string]sdk.SinkCommits{"file": sdk.CommitsWhenDurable, "null": sdk.CommitsEachBatch,
		"postgres": sdk.CommitsWhenDurable, "http": sdk.CommitsEachBatch, "mqtt": sdk.CommitsEachBatch, "kafka": sdk.CommitsEachBatch, "redis": sdk.CommitsEachBatch, "s3": sdk.CommitsWhenDurable, "stdout": sdk.CommitsEachBatch,
		"iceberg": sdk.CommitsWhenDurable}
	want["mongodb"] = sdk.CommitsEachBatch       // once MongoDB acknowledged the batch, inside Consume
	want["elasticsearch"] = sdk.CommitsEachBatch // once every _bulk item landed, inside Consume
	for _, n := range reg.SinkNames() {
		spec, _ := reg.SinkSpec(n)
		if spec.Commits != want[n] || spec.Commits == sdk.CommitsUndeclared {
			t.Errorf("sink %s declares Commits %q, want %q", n, spec.Commits, want[n])
		}
	}
}

// A sink's commit facts in `ferry connectors`: the modes it takes, the one it runs with
// when the file sets none, and what it does under sink_controlled.
func TestWriteTextGivesCommitFacts(t *testing.T) {
	reg := sdk.NewRegistry().
		AddSink("any", nil, sdk.ConfigSpec{AnyFields: true}).
		AddSink("never", nil, sdk.ConfigSpec{AnyFields: true, Commits: sdk.CommitsNever}).
		AddSink("only", nil, sdk.ConfigSpec{AnyFields: true, CommitModes: []string{"sink_controlled"}, Commits: sdk.CommitsWhenDurable}).
		AddSink("two", nil, sdk.ConfigSpec{AnyFields: true, CommitModes: []string{"after_consuming", "sink_controlled"}, Commits: sdk.CommitsEachBatch})
	var b bytes.Buffer
	if err := WriteText(&b, reg); err != nil {
		t.Fatal(err)
	}
	want := "sink builtin:any\n" +
		"  offset_commit: after_polling, after_consuming, sink_controlled; when not set: after_polling; under sink_controlled: not declared\n" +
		"  (ignores plugin_config)\n\n" +
		"sink builtin:never\n" +
		"  offset_commit: after_polling, after_consuming; when not set: after_polling; under sink_controlled: never commits (the mode is refused)\n" +
		"  (ignores plugin_config)\n\n" +
		"sink builtin:only\n" +
		"  offset_commit: sink_controlled; when not set: sink_controlled (its only mode); under sink_controlled: commits once its target holds the data durably (may be after Consume returned)\n" +
		"  (ignores plugin_config)\n\n" +
		"sink builtin:two\n" +
		"  offset_commit: after_consuming, sink_controlled; when not set: refused (after_polling is not one of its modes); under sink_controlled: commits each batch once written, inside Consume\n" +
		"  (ignores plugin_config)\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestEveryBuiltinHasASpec(t *testing.T) {
	reg := Registry()
	for _, n := range reg.SinkNames() {
		if _, ok := reg.SinkSpec(n); !ok {
			t.Errorf("sink %s registered without a ConfigSpec", n)
		}
	}
	for _, n := range reg.SourceNames() {
		if _, ok := reg.SourceSpec(n); !ok {
			t.Errorf("source %s registered without a ConfigSpec", n)
		}
	}
}

// TestDefaultsAsWritten: every built-in field's default prints as a connector file writes
// it: a string once quoted ("iggy_messages"), never its quotes quoted again.
func TestDefaultsAsWritten(t *testing.T) {
	var walk func(c Connector, prefix string, fields []sdk.ConfigField)
	walk = func(c Connector, prefix string, fields []sdk.ConfigField) {
		for _, f := range fields {
			if d := DefaultText(f); strings.Contains(d, `\"`) {
				t.Errorf("%s builtin:%s: plugin_config.%s%s prints its default as %s", c.Kind, c.Name, prefix, f.Name, d)
			}
			walk(c, prefix+f.Name+"[].", f.Fields)
		}
	}
	for _, c := range List(Registry()) {
		walk(c, "", c.Spec.Fields)
	}
}

func TestWriteTextListsFieldsAndDefaults(t *testing.T) {
	var b bytes.Buffer
	reg := sdk.NewRegistry().AddSink("x", nil, sdk.ConfigSpec{Fields: []sdk.ConfigField{
		{Name: "path", Type: sdk.TypeOutputPath, Required: true, Doc: "where"},
		{Name: "every", Type: sdk.TypeDuration, Default: "1s", Doc: "how often"},
	}}).AddSource("y", nil)
	if err := WriteText(&b, reg); err != nil {
		t.Fatal(err)
	}
	want := "sink builtin:x\n  offset_commit: after_polling, after_consuming, sink_controlled; when not set: after_polling; under sink_controlled: not declared\n" +
		"  path   output path  required  where\n  every  duration     \"1s\"      how often\n\nsource builtin:y\n"
	if b.String() != want {
		t.Fatalf("got:\n%q\nwant:\n%q", b.String(), want)
	}
}
