package sdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Config declares a connector's plugin_config once: each key is a typed field bound to a
// field of the connector's config struct T, with its default, bounds and meaning. From
// that one declaration come the decoding ([Config.Parse]: a T whose durations are
// time.Duration, sizes [ByteSize], enums the connector's own type, secrets [Secret]), the
// checks `ferry check` runs ([Config.Spec], the same code as Parse) and what `ferry
// connectors` prints. A connector therefore names each key once, and its config struct
// holds nothing left to re-parse:
//
//	type config struct {
//		Path  string
//		Every time.Duration
//	}
//
//	var Config = sdk.NewConfig(func(c *config, f *sdk.Fields) {
//		f.OutputPath("path", &c.Path).Required().Doc("the file to append to")
//		f.Duration("flush_interval", &c.Every).Default(time.Second).Min(time.Millisecond).Doc("how often to fsync")
//	})
//
// declare is called once for [Config.Spec] (on a zero T) and once per Parse (on the T
// being filled); it must only declare fields, never read them.
type Config[T any] struct {
	declare func(c *T, f *Fields)
}

// NewConfig returns the declaration of a plugin_config decoded into a T.
func NewConfig[T any](declare func(c *T, f *Fields)) Config[T] {
	return Config[T]{declare: declare}
}

// Parse decodes raw (plugin_config as JSON; empty or "null" is an empty table) into a new T:
// every present key is checked for its type, bounds and choices, every absent one gets
// its default, then the rules between fields and the checks of the declaration run. The
// error joins one [*FieldError] per problem (all of them, not the first), each naming
// the key; nil when the config is valid.
func (c Config[T]) Parse(raw []byte) (T, error) {
	var v T
	errs := c.parseInto(raw, &v)
	return v, errors.Join(errs...)
}

func (c Config[T]) parseInto(raw []byte, dst *T) []error {
	f := &Fields{}
	c.declare(dst, f)
	obj, err := configObject(raw)
	if err != nil {
		return []error{err}
	}
	return f.decode(obj)
}

// Spec returns the ConfigSpec of this declaration: its fields as `ferry connectors`
// prints them, and a Validate that runs Parse.
func (c Config[T]) Spec() ConfigSpec {
	f := &Fields{}
	var zero T
	c.declare(&zero, f)
	s := ConfigSpec{Fields: f.describe(), Rules: f.ruleTexts(), CommitModes: f.modes, Commits: f.commit, AnyFields: f.any}
	s.typed = func(raw []byte, dst any) []error {
		if p, ok := dst.(*T); ok && p != nil {
			return c.parseInto(raw, p)
		}
		var scratch T
		return c.parseInto(raw, &scratch)
	}
	return s
}

// Fields collects the fields of one plugin_config (or of one table of a [Tables] list)
// while a [Config]'s declare function runs. Its methods add a field and return it, to be
// refined with the field's own methods (Default, Required, Min, Doc, …).
type Fields struct {
	prefix string // "columns[2]." inside a table list
	defs   []*fieldDef
	rules  []fieldRule
	checks []func() error
	modes  []string
	commit SinkCommits
	any    bool
}

// CommitModes restricts the offset_commit modes a sink runs with (see
// [ConfigSpec.CommitModes]).
func (f *Fields) CommitModes(modes ...string) { f.modes = append(f.modes, modes...) }

// Commits declares when the sink calls its Committer (see [ConfigSpec.Commits]).
func (f *Fields) Commits(c SinkCommits) { f.commit = c }

// AnyKeys makes every key not declared pass unchecked (a connector that passes its
// config on, or ignores it).
func (f *Fields) AnyKeys() { f.any = true }

// Check adds a check that runs after every field was decoded and every rule held, to
// test what only the connector knows (a value that depends on two fields). Return a
// [*FieldError] (see [FieldErr]) to name the key at fault.
func (f *Fields) Check(fn func() error) { f.checks = append(f.checks, fn) }

// FieldErr returns the error of one plugin_config key, for [Fields.Check].
func FieldErr(key, format string, args ...any) *FieldError {
	return &FieldError{Field: key, Msg: fmt.Sprintf(format, args...)}
}

// fieldDef is what Fields keeps of one field, whatever its Go type.
type fieldDef struct {
	meta     ConfigField
	decode   func(raw json.RawMessage) []error // parse, check and store one present value
	fallback func()                            // store the default (nil: none)
	present  bool
	shown    string // the decoded value as a file writes it (for the rules)
}

func (f *Fields) add(name string, typ FieldType) *fieldDef {
	for _, d := range f.defs {
		if d.meta.Name == name || slices.Contains(d.meta.Aliases, name) {
			panic(fmt.Sprintf("sdk: plugin_config field %q declared twice", name))
		}
	}
	d := &fieldDef{meta: ConfigField{Name: name, Type: typ}}
	f.defs = append(f.defs, d)
	return d
}

func (f *Fields) def(name string) *fieldDef {
	for _, d := range f.defs {
		if d.meta.Name == name {
			return d
		}
	}
	panic(fmt.Sprintf("sdk: plugin_config rule names %q, which is not declared", name))
}

// decode fills the bound fields from obj and returns every problem, in key order for the
// keys written, then the missing required keys, then the rules, then the checks (these
// only when nothing before failed: they read decoded values).
func (f *Fields) decode(obj map[string]json.RawMessage) []error {
	var errs []error
	byKey := map[string]*fieldDef{}
	for _, d := range f.defs {
		byKey[d.meta.Name] = d
		for _, a := range d.meta.Aliases {
			byKey[a] = d
		}
	}
	seen := map[*fieldDef]string{} // the key each field was given under
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		d, ok := byKey[k]
		if !ok {
			if !f.any {
				errs = append(errs, &FieldError{f.prefix + k, fmt.Sprintf("unknown field (known: %s)", strings.Join(f.known(), ", "))})
			}
			continue
		}
		if other, dup := seen[d]; dup {
			alias, name := k, other
			if k == d.meta.Name {
				alias, name = other, k
			}
			errs = append(errs, &FieldError{f.prefix + alias, fmt.Sprintf("is an alias of %s: set one of them", name)})
			continue
		}
		seen[d] = k
		if isNull(obj[k]) {
			// A JSON null (TOML cannot write one) is the key left out.
			continue
		}
		d.present = true
		for _, e := range d.decode(obj[k]) {
			errs = append(errs, f.scoped(e))
		}
	}
	for _, d := range f.defs {
		if d.present {
			continue
		}
		if d.meta.Required {
			errs = append(errs, &FieldError{f.prefix + d.meta.Name, "required field is missing"})
		} else if d.fallback != nil {
			d.fallback()
		}
	}
	if len(errs) > 0 {
		return errs
	}
	for _, r := range f.rules {
		if e := r.check(f); e != nil {
			errs = append(errs, f.scoped(e))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	for _, c := range f.checks {
		if e := c(); e != nil {
			errs = append(errs, f.scoped(e))
		}
	}
	return errs
}

// scoped puts a nested table's prefix before the key an error names.
func (f *Fields) scoped(e error) error {
	var fe *FieldError
	if f.prefix != "" && errors.As(e, &fe) && !strings.HasPrefix(fe.Field, f.prefix) {
		return &FieldError{f.prefix + fe.Field, fe.Msg}
	}
	if !errors.As(e, &fe) {
		return &FieldError{strings.TrimSuffix(f.prefix, "."), e.Error()}
	}
	return e
}

func (f *Fields) known() []string {
	var out []string
	for _, d := range f.defs {
		out = append(out, d.meta.Name)
		out = append(out, d.meta.Aliases...)
	}
	return out
}

func (f *Fields) describe() []ConfigField {
	out := make([]ConfigField, len(f.defs))
	for i, d := range f.defs {
		out[i] = d.meta
	}
	return out
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// Field is one declared plugin_config key bound to a V. Its methods refine it and return
// it, so a declaration reads as one line per key; they are called by the declare
// function only.
type Field[V any] struct {
	d      *fieldDef
	dst    *V
	parse  func(raw json.RawMessage) (V, error)
	show   func(V) string // the value as written in a file
	cmp    func(a, b V) int
	min    *V
	max    *V
	checks []func(V) error
}

func newField[V any](f *Fields, name string, typ FieldType, dst *V, parse func(json.RawMessage) (V, error), show func(V) string) *Field[V] {
	fd := &Field[V]{d: f.add(name, typ), dst: dst, parse: parse, show: show}
	fd.d.decode = fd.decode
	return fd
}

func (fd *Field[V]) decode(raw json.RawMessage) []error {
	v, err := fd.parse(raw)
	if err != nil {
		if many, ok := err.(interface{ Unwrap() []error }); ok {
			return many.Unwrap() // a table list's problems, each naming its key
		}
		return []error{&FieldError{fd.d.meta.Name, err.Error()}}
	}
	if fd.cmp != nil {
		if fd.min != nil && fd.cmp(v, *fd.min) < 0 {
			return []error{&FieldError{fd.d.meta.Name, fmt.Sprintf("%s is below the minimum %s", fd.show(v), fd.show(*fd.min))}}
		}
		if fd.max != nil && fd.cmp(v, *fd.max) > 0 {
			return []error{&FieldError{fd.d.meta.Name, fmt.Sprintf("%s is above the maximum %s", fd.show(v), fd.show(*fd.max))}}
		}
	}
	for _, c := range fd.checks {
		if err := c(v); err != nil {
			return []error{&FieldError{fd.d.meta.Name, err.Error()}}
		}
	}
	*fd.dst = v
	fd.d.shown = fd.show(v)
	return nil
}

// Default sets the value used when the key is absent (what `ferry connectors` prints).
// The default is not checked against Min, Max or Check: it is the connector's own.
func (fd *Field[V]) Default(v V) *Field[V] {
	fd.d.meta.Default = fileValue(fd.show(v))
	fd.d.fallback = func() { *fd.dst = v; fd.d.shown = fd.show(v) }
	return fd
}

// fileValue is a value as a file writes it (shown) as ConfigField.Default holds it: the
// JSON value it reads as (a number, a bool, a string without its quotes, a list), or,
// when it reads as none (a duration: 10s), the text itself.
func fileValue(shown string) any {
	var v any
	if json.Unmarshal([]byte(shown), &v) != nil {
		return shown
	}
	return v
}

// Required makes the key mandatory: a file without it is refused.
func (fd *Field[V]) Required() *Field[V] { fd.d.meta.Required = true; return fd }

// Doc sets the field's one-line meaning, printed by `ferry connectors`.
func (fd *Field[V]) Doc(s string) *Field[V] { fd.d.meta.Doc = s; return fd }

// Alias accepts the field under other keys too (an older or upstream name); a file that
// sets two of them is refused.
func (fd *Field[V]) Alias(keys ...string) *Field[V] {
	fd.d.meta.Aliases = append(fd.d.meta.Aliases, keys...)
	return fd
}

// Present records in *p whether the file set the key (for a default that depends on
// another field).
func (fd *Field[V]) Present(p *bool) *Field[V] {
	prev := fd.d.decode
	fd.d.decode = func(raw json.RawMessage) []error {
		errs := prev(raw)
		*p = len(errs) == 0
		return errs
	}
	return fd
}

// Min refuses values below v. Only for ordered fields (numbers, durations, sizes); it
// panics on others, a programming error.
func (fd *Field[V]) Min(v V) *Field[V] {
	fd.ordered("Min")
	fd.min = &v
	fd.d.meta.Min = fd.show(v)
	return fd
}

// Max refuses values above v (see Min).
func (fd *Field[V]) Max(v V) *Field[V] {
	fd.ordered("Max")
	fd.max = &v
	fd.d.meta.Max = fd.show(v)
	return fd
}

func (fd *Field[V]) ordered(what string) {
	if fd.cmp == nil {
		panic(fmt.Sprintf("sdk: plugin_config field %q: %s on a field of type %s", fd.d.meta.Name, what, fd.d.meta.Type))
	}
}

// Check adds a test of the decoded value; its error becomes the key's.
func (fd *Field[V]) Check(fn func(V) error) *Field[V] { fd.checks = append(fd.checks, fn); return fd }

// NonEmpty refuses an empty (or all-space) string or secret; only for those fields.
func (fd *Field[V]) NonEmpty() *Field[V] {
	return fd.Check(func(v V) error {
		s, ok := any(v).(string)
		if secret, isSecret := any(v).(Secret); isSecret {
			s, ok = secret.Reveal(), true
		}
		if ok && strings.TrimSpace(s) == "" {
			return errors.New("must not be empty")
		}
		return nil
	})
}
