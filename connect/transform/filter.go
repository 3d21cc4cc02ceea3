package transform

import (
	"bytes"
	"regexp"
	"strings"

	"github.com/valyala/fastjson"
)

// filterFields keeps or drops an object's fields by name and by pattern; it never drops
// a message.
type filterFields struct {
	keep            map[string]bool
	patterns        []pattern
	includeMatching bool
	drop            []string
}

type pattern struct {
	key   *keyPattern
	value *valuePattern
}

type keyPattern struct {
	kind string // exact, starts_with, ends_with, contains, regex
	s    string
	re   *regexp.Regexp
}

type valuePattern struct {
	kind   string // equals, contains, regex, greater_than, less_than, between, is_*
	equals *fastjson.Value
	s      string
	re     *regexp.Regexp
	lo, hi float64
}

func buildFilter(t *table) (Transform, error) {
	f := &filterFields{keep: map[string]bool{}}
	keep, err := t.list("keep_fields", false)
	if err != nil {
		return nil, err
	}
	for i, e := range keep {
		s, ok := e.(string)
		if !ok {
			return nil, t.errorf("keep_fields", "element %d: want a string, got %s", i, typeName(e))
		}
		f.keep[s] = true
	}
	if f.includeMatching, err = t.boolean("include_matching", true); err != nil {
		return nil, err
	}
	ps, err := t.list("patterns", false)
	if err != nil {
		return nil, err
	}
	for i, e := range ps {
		pt, err := t.sub("patterns", i, e)
		if err != nil {
			return nil, err
		}
		var p pattern
		if kv, ok := pt.get("key_pattern"); ok {
			if p.key, err = buildKeyPattern(pt, kv); err != nil {
				return nil, err
			}
		}
		if vv, ok := pt.get("value_pattern"); ok {
			if p.value, err = buildValuePattern(pt, vv); err != nil {
				return nil, err
			}
		}
		if err := pt.unknownKeys(); err != nil {
			return nil, err
		}
		f.patterns = append(f.patterns, p)
	}
	return f, nil
}

// onlyEntry returns the single key and value of an externally tagged pattern table.
func onlyEntry(t *table, key string, v any) (string, any, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, t.errorf(key, "want a table with one key, e.g. {exact = \"id\"}")
	}
	for k, x := range m {
		return k, x, nil
	}
	return "", nil, nil
}

func buildKeyPattern(t *table, v any) (*keyPattern, error) {
	kind, x, err := onlyEntry(t, "key_pattern", v)
	if err != nil {
		return nil, err
	}
	s, ok := x.(string)
	if !ok {
		return nil, t.errorf("key_pattern."+kind, "want a string, got %s", typeName(x))
	}
	kp := &keyPattern{kind: kind, s: s}
	switch kind {
	case "exact", "starts_with", "ends_with", "contains":
	case "regex":
		if kp.re, err = regexp.Compile(s); err != nil {
			return nil, t.errorf("key_pattern.regex", "%v", err)
		}
	default:
		return nil, t.errorf("key_pattern", "unknown pattern %q (want exact, starts_with, ends_with, contains or regex)", kind)
	}
	return kp, nil
}

var bareValuePatterns = []string{"is_null", "is_not_null", "is_string", "is_number", "is_boolean", "is_object", "is_array"}

func buildValuePattern(t *table, v any) (*valuePattern, error) {
	if s, ok := v.(string); ok {
		for _, b := range bareValuePatterns {
			if b == s {
				return &valuePattern{kind: s}, nil
			}
		}
		return nil, t.errorf("value_pattern", "unknown pattern %q (want one of %s, or a table)", s, strings.Join(bareValuePatterns, ", "))
	}
	kind, x, err := onlyEntry(t, "value_pattern", v)
	if err != nil {
		return nil, err
	}
	path := "value_pattern." + kind
	vp := &valuePattern{kind: kind}
	switch kind {
	case "equals":
		if vp.equals, err = staticJSON(x); err != nil {
			return nil, t.errorf(path, "%v", err)
		}
	case "contains", "regex":
		s, ok := x.(string)
		if !ok {
			return nil, t.errorf(path, "want a string, got %s", typeName(x))
		}
		vp.s = s
		if kind == "regex" {
			if vp.re, err = regexp.Compile(s); err != nil {
				return nil, t.errorf(path, "%v", err)
			}
		}
	case "greater_than", "less_than":
		f, ok := number(x)
		if !ok {
			return nil, t.errorf(path, "want a number, got %s", typeName(x))
		}
		vp.lo = f
	case "between":
		l, ok := x.([]any)
		if !ok || len(l) != 2 {
			return nil, t.errorf(path, "want [low, high]")
		}
		lo, ok1 := number(l[0])
		hi, ok2 := number(l[1])
		if !ok1 || !ok2 {
			return nil, t.errorf(path, "want [low, high] numbers")
		}
		vp.lo, vp.hi = lo, hi
	default:
		return nil, t.errorf("value_pattern", "unknown pattern %q (want equals, contains, regex, greater_than, less_than, between or one of %s)", kind, strings.Join(bareValuePatterns, ", "))
	}
	return vp, nil
}

func number(x any) (float64, bool) {
	switch n := x.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func (f *filterFields) Apply(v *fastjson.Value, _ *fastjson.Arena) (*fastjson.Value, error) {
	if len(f.keep) == 0 && len(f.patterns) == 0 {
		return v, nil
	}
	o := object(v)
	if o == nil {
		return v, nil // not an object: field transforms pass it unchanged
	}
	f.drop = f.drop[:0]
	o.Visit(func(k []byte, x *fastjson.Value) {
		key := string(k) // no allocation for the map lookup below
		if f.keep[key] {
			return
		}
		if len(f.patterns) == 0 { // keep_fields only: exactly those stay
			f.drop = append(f.drop, key)
			return
		}
		matched := false
		for i := range f.patterns {
			if f.match(&f.patterns[i], k, x) {
				matched = true
				break
			}
		}
		if matched != f.includeMatching {
			f.drop = append(f.drop, key)
		}
	})
	for _, k := range f.drop {
		o.Del(k)
	}
	return v, nil
}

func (f *filterFields) match(p *pattern, k []byte, x *fastjson.Value) bool {
	if p.key != nil && !p.key.match(k) {
		return false
	}
	if p.value != nil && !f.matchValue(p.value, x) {
		return false
	}
	return true
}

func (kp *keyPattern) match(k []byte) bool {
	switch kp.kind {
	case "exact":
		return string(k) == kp.s
	case "starts_with":
		return bytes.HasPrefix(k, []byte(kp.s))
	case "ends_with":
		return bytes.HasSuffix(k, []byte(kp.s))
	case "contains":
		return bytes.Contains(k, []byte(kp.s))
	}
	return kp.re.Match(k)
}

func (f *filterFields) matchValue(vp *valuePattern, x *fastjson.Value) bool {
	t := x.Type()
	switch vp.kind {
	case "is_null":
		return t == fastjson.TypeNull
	case "is_not_null":
		return t != fastjson.TypeNull
	case "is_string":
		return t == fastjson.TypeString
	case "is_number":
		return t == fastjson.TypeNumber
	case "is_boolean":
		return t == fastjson.TypeTrue || t == fastjson.TypeFalse
	case "is_object":
		return t == fastjson.TypeObject
	case "is_array":
		return t == fastjson.TypeArray
	case "equals":
		return equal(x, vp.equals)
	case "contains", "regex":
		if t != fastjson.TypeString {
			return false
		}
		s := f.stringOf(x)
		if vp.kind == "contains" {
			return bytes.Contains(s, []byte(vp.s))
		}
		return vp.re.Match(s)
	}
	// Numeric comparisons: integers match too (a deliberate difference; upstream reads
	// only float literals).
	if t != fastjson.TypeNumber {
		return false
	}
	n := x.GetFloat64()
	switch vp.kind {
	case "greater_than":
		return n > vp.lo
	case "less_than":
		return n < vp.lo
	}
	return n >= vp.lo && n <= vp.hi
}

// stringOf returns the unescaped text of a string value (unescaping it in place is
// harmless: schema.AppendJSON escapes strings again).
func (f *filterFields) stringOf(x *fastjson.Value) []byte {
	s, _ := x.StringBytes()
	return s
}

// equal compares JSON values: objects by their keys whatever the order, numbers by value.
func equal(a, b *fastjson.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Type() {
	case fastjson.TypeNumber:
		return a.GetFloat64() == b.GetFloat64()
	case fastjson.TypeString:
		x, _ := a.StringBytes()
		y, _ := b.StringBytes()
		return bytes.Equal(x, y)
	case fastjson.TypeArray:
		x, _ := a.Array()
		y, _ := b.Array()
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case fastjson.TypeObject:
		x, _ := a.Object()
		y, _ := b.Object()
		if x.Len() != y.Len() {
			return false
		}
		same := true
		x.Visit(func(k []byte, v *fastjson.Value) {
			if w := y.Get(string(k)); w == nil || !equal(v, w) {
				same = false
			}
		})
		return same
	}
	return true // null, true, false
}
