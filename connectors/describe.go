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
	// Concurrent: the connector accepts more than one batch at once (a sink that is an
	// sdk.ConcurrentSink, a source that is an sdk.PipelinedSource), so a file that leaves
	// max_in_flight unset gets the runtime's default rather than 1.
	Concurrent bool
}

// List returns every connector of reg, sinks then sources, each sorted by name. A connector
// registered without a spec gets an empty one.
func List(reg *sdk.Registry) []Connector {
	var out []Connector
	for _, n := range reg.SinkNames() {
		s, _ := reg.SinkSpec(n)
		var concurrent bool
		if f, ok := reg.Sink(n); ok && f != nil {
			_, concurrent = f().(sdk.ConcurrentSink)
		}
		out = append(out, Connector{"sink", n, s, concurrent})
	}
	for _, n := range reg.SourceNames() {
		s, _ := reg.SourceSpec(n)
		var concurrent bool
		if f, ok := reg.Source(n); ok && f != nil {
			_, concurrent = f().(sdk.PipelinedSource)
		}
		out = append(out, Connector{"source", n, s, concurrent})
	}
	return out
}

// inFlightCell is InFlightText for a table read on any machine: the default by its rule.
func inFlightCell(c Connector) string {
	if c.Concurrent {
		return "the default (twice the CPUs, 2 to 8)"
	}
	return "1"
}

// InFlightText says what max_in_flight is for c when its file leaves it unset (the same
// words on every machine: the number follows from the CPUs where it runs).
func InFlightText(c Connector) string {
	if c.Concurrent {
		return "the runtime's default (twice the CPUs, 2 to 8), at most what it accepts"
	}
	return "1 (one batch at a time)"
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

// WriteText prints every connector of reg with its fields, types, defaults and docs, and
// each sink's commit facts (the line of [CommitModes], [UnsetCommitMode], [CommitsText]).
func WriteText(w io.Writer, reg *sdk.Registry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, c := range List(reg) {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "%s builtin:%s\n", c.Kind, c.Name)
		if c.Kind == "sink" {
			fmt.Fprintf(tw, "  offset_commit: %s; when not set: %s; under sink_controlled: %s\n",
				strings.Join(CommitModes(c.Spec), ", "), UnsetCommitMode(c.Spec), CommitsText(c.Spec.Commits))
		}
		if c.Concurrent {
			fmt.Fprintf(tw, "  max_in_flight when not set: %s\n", InFlightText(c))
		}
		if c.Spec.AnyFields {
			fmt.Fprintln(tw, "  (ignores plugin_config)")
		}
		writeFields(tw, "  ", c.Spec.Fields)
		for _, r := range c.Spec.Rules {
			fmt.Fprintf(tw, "  rule: %s\n", r)
		}
	}
	return tw.Flush()
}

func writeFields(w io.Writer, indent string, fields []sdk.ConfigField) {
	for _, f := range fields {
		doc := f.Doc
		if d := Details(f); d != "" {
			doc = strings.TrimSpace(doc + " [" + d + "]")
		}
		fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\n", indent, f.Name, f.Type, DefaultText(f), doc)
		writeFields(w, indent+"  "+f.Name+"[].", f.Fields)
	}
}

// Details renders what a field's type alone does not say: its bounds, its values, its
// other names and whether it is secret ("1ms to 1h; also max_retries; secret").
func Details(f sdk.ConfigField) string {
	var parts []string
	switch {
	case f.Min != "" && f.Max != "":
		parts = append(parts, f.Min+" to "+f.Max)
	case f.Min != "":
		parts = append(parts, "at least "+f.Min)
	case f.Max != "":
		parts = append(parts, "at most "+f.Max)
	}
	if len(f.Enum) > 0 {
		word := "one of"
		if f.Type == sdk.TypeURL {
			word = "schemes"
		}
		parts = append(parts, word+": "+strings.Join(f.Enum, ", "))
	}
	if len(f.Aliases) > 0 {
		parts = append(parts, "also "+strings.Join(f.Aliases, ", "))
	}
	if f.Secret {
		parts = append(parts, "secret: never shown")
	}
	return strings.Join(parts, "; ")
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
			writeMDField(&b, id, "", f)
			id = ""
		}
		for _, r := range c.Spec.Rules {
			fmt.Fprintf(&b, "| %s | – | – | – | rule: %s |\n", id, mdEscape(r))
			id = ""
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeMDField(b *strings.Builder, id, prefix string, f sdk.ConfigField) {
	doc := f.Doc
	if d := Details(f); d != "" {
		doc = strings.TrimSpace(doc + " (" + d + ")")
	}
	fmt.Fprintf(b, "| %s | `%s%s` | %s | %s | %s |\n", id, prefix, f.Name, f.Type, mdDefault(f), mdEscape(doc))
	for _, sub := range f.Fields {
		writeMDField(b, "", prefix+f.Name+"[].", sub)
	}
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func mdDefault(f sdk.ConfigField) string {
	d := DefaultText(f)
	if f.Default == nil {
		return d
	}
	return "`" + d + "`"
}

// allCommitModes are the offset_commit values, in the order they are printed.
var allCommitModes = []string{"after_polling", "after_consuming", "sink_controlled"}

// CommitModes lists the offset_commit modes a sink of spec runs with: its CommitModes, or
// every mode when it lists none, less sink_controlled for a sink that never commits.
func CommitModes(spec sdk.ConfigSpec) []string {
	var out []string
	for _, m := range allCommitModes {
		if spec.CheckCommitMode(m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// UnsetCommitMode says what a sink of spec runs with when its file sets no offset_commit:
// its one mode, the runtime's after_polling, or a refusal when it does not take that.
func UnsetCommitMode(spec sdk.ConfigSpec) string {
	if m, ok := spec.DefaultCommitMode(); ok {
		return m + " (its only mode)"
	}
	if spec.CheckCommitMode("after_polling") == nil {
		return "after_polling"
	}
	return "refused (after_polling is not one of its modes)"
}

// CommitsText says in words what a sink's declaration c means under sink_controlled.
func CommitsText(c sdk.SinkCommits) string {
	switch c {
	case sdk.CommitsNever:
		return "never commits (the mode is refused)"
	case sdk.CommitsEachBatch:
		return "commits each batch once written, inside Consume"
	case sdk.CommitsWhenDurable:
		return "commits once its target holds the data durably (may be after Consume returned)"
	case sdk.CommitsUndeclared:
		return "not declared"
	}
	return string(c)
}

// WriteCommitsMarkdown prints docs/connectors.md's table of the sinks' commit facts.
func WriteCommitsMarkdown(w io.Writer, reg *sdk.Registry) error {
	var b strings.Builder
	b.WriteString("| sink | `offset_commit` it takes | when not set | under `sink_controlled` | `max_in_flight` when not set |\n|---|---|---|---|---|\n")
	for _, c := range List(reg) {
		if c.Kind != "sink" {
			continue
		}
		fmt.Fprintf(&b, "| `builtin:%s` | %s | %s | %s | %s |\n", c.Name, strings.Join(CommitModes(c.Spec), ", "), UnsetCommitMode(c.Spec), CommitsText(c.Spec.Commits), inFlightCell(c))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
