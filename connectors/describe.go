package connectors

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ferryio/ferry/sdk"
)

// Connector is one registered built-in connector with its plugin_config spec.
type Connector struct {
	Kind string // "sink" or "source"
	Name string // path = "builtin:<Name>"
	Spec sdk.ConfigSpec
}

// List returns every connector of reg, sinks then sources, each sorted by name. A connector
// registered without a spec gets an empty one.
func List(reg *sdk.Registry) []Connector {
	var out []Connector
	for _, n := range reg.SinkNames() {
		s, _ := reg.SinkSpec(n)
		out = append(out, Connector{"sink", n, s})
	}
	for _, n := range reg.SourceNames() {
		s, _ := reg.SourceSpec(n)
		out = append(out, Connector{"source", n, s})
	}
	return out
}

// DefaultText renders a field's default as it would be written in a connector file.
func DefaultText(f sdk.ConfigField) string {
	if f.Default == nil {
		if f.Required {
			return "required"
		}
		return "none"
	}
	b, err := json.Marshal(f.Default)
	if err != nil {
		return fmt.Sprint(f.Default)
	}
	return string(b)
}

// WriteText prints every connector of reg with its fields, types, defaults and docs.
func WriteText(w io.Writer, reg *sdk.Registry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, c := range List(reg) {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "%s builtin:%s\n", c.Kind, c.Name)
		if c.Spec.AnyFields {
			fmt.Fprintln(tw, "  (ignores plugin_config)")
		}
		for _, f := range c.Spec.Fields {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Name, f.Type, DefaultText(f), f.Doc)
		}
	}
	return tw.Flush()
}

// WriteMarkdown prints docs/connectors.md's table of built-in connectors.
func WriteMarkdown(w io.Writer, reg *sdk.Registry) error {
	var b strings.Builder
	b.WriteString("| connector | field | type | default | meaning |\n|---|---|---|---|---|\n")
	for _, c := range List(reg) {
		id := fmt.Sprintf("%s `builtin:%s`", c.Kind, c.Name)
		if c.Spec.AnyFields || len(c.Spec.Fields) == 0 {
			fmt.Fprintf(&b, "| %s | – | – | – | ignores `plugin_config` |\n", id)
			continue
		}
		for i, f := range c.Spec.Fields {
			if i > 0 {
				id = ""
			}
			fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", id, f.Name, f.Type, mdDefault(f), strings.ReplaceAll(f.Doc, "|", "\\|"))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdDefault(f sdk.ConfigField) string {
	d := DefaultText(f)
	if f.Default == nil {
		return d
	}
	return "`" + d + "`"
}
