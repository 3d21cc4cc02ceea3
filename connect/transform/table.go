package transform

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connect/schema"
)

// table reads one TOML table of a transform, remembering which keys were read so that an
// unknown key is an error naming it.
type table struct {
	path string
	m    map[string]any
	used map[string]bool
}

func (t *table) errorf(key, format string, args ...any) error {
	p := t.path
	if key != "" {
		p += "." + key
	}
	return &ConfigError{Path: p, Msg: fmt.Sprintf(format, args...)}
}

func (t *table) get(key string) (any, bool) {
	if t.used == nil {
		t.used = map[string]bool{}
	}
	t.used[key] = true
	v, ok := t.m[key]
	return v, ok
}

func (t *table) unknownKeys() error {
	var extra []string
	for k := range t.m {
		if !t.used[k] {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	sort.Strings(extra)
	return t.errorf(extra[0], "unknown key")
}

func (t *table) str(key string, required bool) (string, bool, error) {
	v, ok := t.get(key)
	if !ok {
		if required {
			return "", false, t.errorf(key, "required key missing")
		}
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", false, t.errorf(key, "want a string, got %s", typeName(v))
	}
	return s, true, nil
}

func (t *table) boolean(key string, def bool) (bool, error) {
	v, ok := t.get(key)
	if !ok {
		return def, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, t.errorf(key, "want true or false, got %s", typeName(v))
	}
	return b, nil
}

func (t *table) list(key string, required bool) ([]any, error) {
	v, ok := t.get(key)
	if !ok {
		if required {
			return nil, t.errorf(key, "required key missing")
		}
		return nil, nil
	}
	l, isList := v.([]any)
	if !isList {
		if ml, isMaps := v.([]map[string]any); isMaps { // an array of tables
			for _, m := range ml {
				l = append(l, m)
			}
			return l, nil
		}
		return nil, t.errorf(key, "want an array, got %s", typeName(v))
	}
	return l, nil
}

// sub returns element i of list key as a table.
func (t *table) sub(key string, i int, v any) (*table, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, t.errorf(fmt.Sprintf("%s[%d]", key, i), "want a table, got %s", typeName(v))
	}
	return &table{path: fmt.Sprintf("%s.%s[%d]", t.path, key, i), m: m, used: map[string]bool{}}, nil
}

// subTable returns key as a table.
func (t *table) subTable(key string) (*table, bool, error) {
	v, ok := t.get(key)
	if !ok {
		return nil, false, nil
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return nil, false, t.errorf(key, "want a table, got %s", typeName(v))
	}
	return &table{path: t.path + "." + key, m: m, used: map[string]bool{}}, true, nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, int, uint64:
		return "an integer"
	case float64:
		return "a float"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", v)
}

// staticJSON parses a config value (TOML or JSON decoded) into a JSON value kept for the
// life of the chain. Floats keep a fraction (5.0 stays 5.0, as upstream's serializer
// writes an f64).
func staticJSON(v any) (*fastjson.Value, error) {
	b, err := appendConfigJSON(nil, v)
	if err != nil {
		return nil, err
	}
	var p fastjson.Parser
	return p.ParseBytes(b) // a Parser owns its values; this one is dropped, the values stay
}

func appendConfigJSON(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return schema.AppendString(dst, []byte(x)), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%v cannot be written as JSON", x)
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return append(dst, s...), nil
	case time.Time:
		return schema.AppendString(dst, []byte(x.Format(time.RFC3339Nano))), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendConfigJSON(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x))
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = schema.AppendString(dst, []byte(k))
			dst = append(dst, ':')
			var err error
			if dst, err = appendConfigJSON(dst, x[k]); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("%s cannot be written as JSON", typeName(v))
}
