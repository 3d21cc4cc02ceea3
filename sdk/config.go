package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// FieldType is the JSON shape a plugin_config field must have.
type FieldType string

// The field types a ConfigSpec knows.
const (
	TypeString   FieldType = "string"
	TypeBool     FieldType = "bool"
	TypeInteger  FieldType = "integer"  // a JSON integer (may be negative)
	TypeUnsigned FieldType = "unsigned" // a JSON integer ≥ 0
	TypeNumber   FieldType = "number"   // any JSON number
	TypeDuration FieldType = "duration" // a string ParseDuration accepts ("1s", "250ms")
	TypeStrings  FieldType = "string list"
	TypeInts     FieldType = "integer list"
	TypeTables   FieldType = "table list" // an array of objects ([[plugin_config.x]])
	// TypeOutputPath is a non-empty string naming a file the connector writes (creating
	// missing directories). The sdk checks only its shape; `ferry check` also checks on
	// disk that the connector could write it (connect/config.CheckOutputPaths).
	TypeOutputPath FieldType = "output path"
	// The types of the typed fields ([Fields]).
	TypeSize      FieldType = "size"         // a string like "8MiB" or "10MB", or an integer count of bytes
	TypeEnum      FieldType = "enum"         // a string, one of ConfigField.Enum
	TypeSecret    FieldType = "secret"       // a string never shown
	TypeURL       FieldType = "URL"          // a string holding an absolute URL
	TypeStringMap FieldType = "string table" // a table of string values
	TypeJSON      FieldType = "any"          // any value, read by the connector
)

// ConfigField describes one plugin_config key of a built-in connector.
type ConfigField struct {
	Name     string
	Type     FieldType
	Required bool
	// Default is the value used when the key is absent (nil: none). It is applied by
	// [ConfigSpec.Decode] and printed by `ferry connectors`.
	Default any
	Doc     string
	// Set by the typed fields ([Fields]) for `ferry connectors`:
	Aliases  []string      // other keys that mean this field (older or upstream names)
	Secret   bool          // never shown: logs, status and the API redact it
	Enum     []string      // the values an enum takes ("json_lines (also jsonl)"), or a URL's schemes
	Min, Max string        // bounds, as a file writes them; "" for none
	Fields   []ConfigField // the keys of each table of a table list
}

// ConfigSpec is every plugin_config key a built-in connector reads: the one place its
// fields, types and defaults are declared. The connector decodes its config with
// [ConfigSpec.Decode], and `ferry check` validates with [ConfigSpec.Validate], so what check
// accepts is what the connector's Open accepts.
type ConfigSpec struct {
	Fields []ConfigField
	// AnyFields: the connector ignores plugin_config; nothing in it is an error.
	AnyFields bool
	// CommitModes are the offset_commit values a sink runs with ("after_polling",
	// "after_consuming", "sink_controlled"); empty: any. A sink that decides when its offsets
	// advance lists only "sink_controlled", and `ferry check` and the runtime's start refuse
	// a file with another mode (see [ConfigSpec.CheckCommitMode]) instead of its Open.
	CommitModes []string
	// Rules are the rules between keys, in words ("a and b go together: set both or
	// neither"), from a [Config] declaration.
	Rules []string

	// typed is set by [Config.Spec]: it decodes raw into dst (the declaration's *T, or nil
	// to only check), returning every problem.
	typed func(raw []byte, dst any) []error

	// Commits declares what a sink does with its Committer under offset_commit =
	// "sink_controlled" ([SinkCommits]); `ferry connectors` prints it. A sink that declares
	// [CommitsNever] is refused sink_controlled by `ferry check` and at start.
	Commits SinkCommits
}

// SinkCommits is a sink's declaration of when it calls its [Committer] (the
// [ConfigSpec.Commits] of its registration), so the runtime can refuse offset_commit =
// "sink_controlled" for a sink that would never store an offset, and `ferry connectors`
// can say when each sink's offsets advance.
type SinkCommits string

// The declarations a sink can make.
const (
	// CommitsUndeclared is the zero value: the spec does not say (a sink written before
	// the declaration existed). sink_controlled is allowed, as it always was, and `ferry
	// connectors` prints "not declared". Every built-in sink declares one of the others.
	CommitsUndeclared SinkCommits = ""
	// CommitsNever: the sink never calls its Committer. Under sink_controlled no offset of
	// it would ever be stored and every start would deliver everything again, so `ferry
	// check` and the runtime's start refuse that mode for it (see
	// [ConfigSpec.CheckCommitMode]).
	CommitsNever SinkCommits = "never"
	// CommitsEachBatch: under sink_controlled the sink commits each batch's last offset
	// inside Consume, once the batch is written (builtin:stdout, builtin:null).
	CommitsEachBatch SinkCommits = "each batch"
	// CommitsWhenDurable: under sink_controlled the sink commits an offset once its target
	// holds everything up to it durably, which may be after Consume returned (on a flush
	// interval, a transaction's commit, an object's upload; at the latest in Close).
	CommitsWhenDurable SinkCommits = "when durable"
)

// valid reports whether c is one of the declarations above.
func (c SinkCommits) valid() bool {
	switch c {
	case CommitsUndeclared, CommitsNever, CommitsEachBatch, CommitsWhenDurable:
		return true
	}
	return false
}

// CheckSinkSpec returns an error when s cannot describe a sink: an unknown Commits, or
// CommitModes taking "sink_controlled" from a sink that declares [CommitsNever] (no file
// could run it in that mode). [Registry.AddSink] panics on it, since specs are written in
// code.
func (s ConfigSpec) CheckSinkSpec() error {
	if !s.Commits.valid() {
		return fmt.Errorf("unknown Commits %q (want one of the sdk.Commits… constants)", s.Commits)
	}
	if s.Commits == CommitsNever && slices.Contains(s.CommitModes, "sink_controlled") {
		return errors.New(`CommitModes lists "sink_controlled" but Commits is CommitsNever`)
	}
	return nil
}

// DefaultCommitMode returns the offset_commit mode a sink of this spec uses when its file
// sets none: the one mode CommitModes lists (ok true), as a sink that runs only with
// "sink_controlled" takes a file copied from a runtime that knows no such key. With none
// or several modes listed it returns ok false: the runtime's default applies.
func (s ConfigSpec) DefaultCommitMode() (mode string, ok bool) {
	if len(s.CommitModes) == 1 {
		return s.CommitModes[0], true
	}
	return "", false
}

// CheckCommitMode returns nil when a sink of this spec runs with offset_commit mode, else
// an error naming the key, the mode and the fix: the modes it takes, or, for
// "sink_controlled" of a sink that declares [CommitsNever], the mode to use instead.
func (s ConfigSpec) CheckCommitMode(mode string) error {
	if mode == "sink_controlled" && s.Commits == CommitsNever {
		return errors.New(`offset_commit = "sink_controlled": the sink never commits its offsets, so none would be stored and every start would deliver everything again; ` +
			`set offset_commit = "after_consuming" (each batch's offset is stored once the sink wrote it) or remove the key (after_polling)`)
	}
	if len(s.CommitModes) == 0 || slices.Contains(s.CommitModes, mode) {
		return nil
	}
	want := make([]string, len(s.CommitModes))
	for i, m := range s.CommitModes {
		want[i] = strconv.Quote(m)
	}
	return fmt.Errorf("offset_commit = %q: the sink runs only with offset_commit = %s", mode, strings.Join(want, " or "))
}

// Field returns the field named name.
func (s ConfigSpec) Field(name string) (ConfigField, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return ConfigField{}, false
}

// FieldError is one problem with one plugin_config key.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("plugin_config.%s: %s", e.Field, e.Msg) }

// Validate checks raw (plugin_config as JSON; empty or "null" = none) against the spec:
// unknown keys, values of the wrong type, missing required keys. It returns every problem
// found, in key order; nil when the config is valid. It does no I/O: output paths are
// checked for their shape only.
func (s ConfigSpec) Validate(raw []byte) []error {
	if s.typed != nil {
		return s.typed(raw, nil)
	}
	obj, err := configObject(raw)
	if err != nil {
		return []error{err}
	}
	var errs []error
	keys := slices.Sorted(maps.Keys(obj))
	for _, k := range keys {
		f, ok := s.Field(k)
		if !ok {
			if !s.AnyFields {
				errs = append(errs, &FieldError{k, fmt.Sprintf("unknown field (known: %s)", strings.Join(s.names(), ", "))})
			}
			continue
		}
		if msg := checkType(f.Type, obj[k]); msg != "" {
			errs = append(errs, &FieldError{k, msg})
		}
	}
	for _, f := range s.Fields {
		if _, ok := obj[f.Name]; f.Required && !ok {
			errs = append(errs, &FieldError{f.Name, "required field is missing"})
		}
	}
	return errs
}

// Decode validates raw and decodes it into dst (a pointer to the connector's config
// struct, JSON tags named as the fields), with each absent field's Default applied first.
// The error joins every problem Validate found. For a spec of a [Config] declaration, dst
// must be the declaration's *T (anything else is only validated): prefer [Config.Parse].
func (s ConfigSpec) Decode(raw []byte, dst any) error {
	if s.typed != nil {
		return errors.Join(s.typed(raw, dst)...)
	}
	if errs := s.Validate(raw); len(errs) > 0 {
		return errors.Join(errs...)
	}
	obj, err := configObject(raw)
	if err != nil {
		return err
	}
	for _, f := range s.Fields {
		if _, ok := obj[f.Name]; !ok && f.Default != nil {
			b, err := json.Marshal(f.Default)
			if err != nil {
				return fmt.Errorf("plugin_config.%s: default: %w", f.Name, err)
			}
			obj[f.Name] = b
		}
	}
	full, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(full))
	if !s.AnyFields {
		d.DisallowUnknownFields()
	}
	if err := d.Decode(dst); err != nil {
		return fmt.Errorf("plugin_config: %w", err)
	}
	return nil
}

func (s ConfigSpec) names() []string {
	out := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		out[i] = f.Name
	}
	return out
}

// configObject parses plugin_config into its top-level keys.
func configObject(raw []byte) (map[string]json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return obj, nil
	}
	if t[0] != '{' {
		return nil, errors.New("plugin_config: want a table")
	}
	if err := json.Unmarshal(t, &obj); err != nil {
		return nil, fmt.Errorf("plugin_config: %w", err)
	}
	return obj, nil
}

// checkType returns what is wrong with v as a value of type t, or "".
func checkType(t FieldType, v json.RawMessage) string {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return err.Error()
	}
	want := func() string { return fmt.Sprintf("want %s %s, got %s", article(t), t, describe(x)) }
	switch t {
	case TypeString, TypeEnum, TypeSecret, TypeURL:
		if _, ok := x.(string); !ok {
			return want()
		}
	case TypeBool:
		if _, ok := x.(bool); !ok {
			return want()
		}
	case TypeInteger, TypeUnsigned:
		n, ok := x.(json.Number)
		if !ok {
			return want()
		}
		var err error
		if t == TypeUnsigned {
			_, err = strconv.ParseUint(n.String(), 10, 64)
		} else {
			_, err = strconv.ParseInt(n.String(), 10, 64)
		}
		if err != nil {
			return fmt.Sprintf("want %s %s, got %s", article(t), t, n)
		}
	case TypeNumber:
		n, ok := x.(json.Number)
		if !ok {
			return want()
		}
		if f, err := n.Float64(); err != nil || math.IsInf(f, 0) {
			return fmt.Sprintf("want %s %s, got %s", article(t), t, n)
		}
	case TypeDuration:
		s, ok := x.(string)
		if !ok {
			return want()
		}
		if _, err := ParseDuration(s); err != nil {
			return fmt.Sprintf("want a duration like \"1s\" or \"250ms\", got %q", s)
		}
	case TypeStrings:
		xs, ok := x.([]any)
		if !ok {
			return want()
		}
		for i, e := range xs {
			if _, ok := e.(string); !ok {
				return fmt.Sprintf("element %d: want a string, got %s", i, describe(e))
			}
		}
	case TypeInts:
		xs, ok := x.([]any)
		if !ok {
			return want()
		}
		for i, e := range xs {
			n, ok := e.(json.Number)
			if !ok {
				return fmt.Sprintf("element %d: want an integer, got %s", i, describe(e))
			}
			if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
				return fmt.Sprintf("element %d: want an integer, got %s", i, n)
			}
		}
	case TypeTables:
		xs, ok := x.([]any)
		if !ok {
			return want()
		}
		for i, e := range xs {
			if _, ok := e.(map[string]any); !ok {
				return fmt.Sprintf("element %d: want a table, got %s", i, describe(e))
			}
		}
	case TypeOutputPath:
		s, ok := x.(string)
		if !ok {
			return want()
		}
		if s == "" {
			return "empty path"
		}
	case TypeSize:
		switch v := x.(type) {
		case string:
			if _, err := ParseByteSize(v); err != nil {
				return err.Error()
			}
		case json.Number:
			if _, err := strconv.ParseUint(v.String(), 10, 64); err != nil {
				return fmt.Sprintf("want a size like \"8MiB\" or a count of bytes, got %s", v)
			}
		default:
			return fmt.Sprintf("want a size like \"8MiB\" or a count of bytes, got %s", describe(x))
		}
	case TypeStringMap:
		m, ok := x.(map[string]any)
		if !ok {
			return want()
		}
		for k, e := range m {
			if _, ok := e.(string); !ok {
				return fmt.Sprintf("key %q: want a string, got %s", k, describe(e))
			}
		}
	case TypeJSON:
	default:
		return fmt.Sprintf("spec has unknown type %q", t)
	}
	return ""
}

func describe(x any) string {
	switch v := x.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", v)
	case bool:
		return fmt.Sprintf("bool %v", v)
	case json.Number:
		return "number " + v.String()
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", x)
}

func article(t FieldType) string {
	if strings.ContainsRune("aeiou", rune(t[0])) {
		return "an"
	}
	return "a"
}
