package connectors

import (
	"bytes"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connectors/file"
	"github.com/ferryio/ferry/connectors/postgres"
	"github.com/ferryio/ferry/connectors/random"
	"github.com/ferryio/ferry/connectors/stdout"
	"github.com/ferryio/ferry/sdk"
)

// docs/connectors.md's connector table is `ferry connectors --markdown`; regenerate it with
// `go run ./cmd/ferry connectors --markdown` when this fails.
func TestREADMEConnectorTableIsCurrent(t *testing.T) {
	readme, err := os.ReadFile("../docs/connectors.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- connectors:begin -->\n", "<!-- connectors:end -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/connectors.md has no %q … %q block", begin, end)
	}
	var want bytes.Buffer
	if err := WriteMarkdown(&want, Registry()); err != nil {
		t.Fatal(err)
	}
	if got := s[i+len(begin) : j]; got != want.String() {
		t.Fatalf("docs/connectors.md connector table is out of date; want:\n%s\ngot:\n%s", want.String(), got)
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

// A spec and the config struct its connector decodes into name the same keys, so the
// spec cannot drift from what the connector reads.
func TestSpecsMatchConfigStructs(t *testing.T) {
	cases := map[string]struct {
		spec sdk.ConfigSpec
		cfg  any
	}{
		"file":     {file.Spec, file.Config{}},
		"postgres": {postgres.Spec, postgres.Config{}},
		"random":   {random.Spec, random.Config{}},
		"stdout":   {stdout.Spec, stdout.Config{}},
	}
	for name, c := range cases {
		var tags, fields []string
		rt := reflect.TypeOf(c.cfg)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			tags = append(tags, tag)
		}
		for _, f := range c.spec.Fields {
			fields = append(fields, f.Name)
		}
		sort.Strings(tags)
		sort.Strings(fields)
		if !reflect.DeepEqual(tags, fields) {
			t.Errorf("%s: spec fields %v, config struct keys %v", name, fields, tags)
		}
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
	want := "sink builtin:x\n  path   output path  required  where\n  every  duration     \"1s\"      how often\n\nsource builtin:y\n"
	if b.String() != want {
		t.Fatalf("got:\n%q\nwant:\n%q", b.String(), want)
	}
}
