package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// EnvPrefix starts every environment variable the Iggy connectors runtime reads.
const EnvPrefix = "IGGY_CONNECTORS_"

// envMap turns "K=V" entries into a map; later entries win, as in os.Environ.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// typeEnvValue types an environment value as upstream (figment) does: "[a, b]" is an array
// whose elements are typed the same way, true/false (any case) a bool, then u64, i64, f64,
// otherwise a string (surrounding double quotes stripped). Used for plugin_config values.
func typeEnvValue(s string) any {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		out := []any{}
		for _, e := range splitEnvArray(s[1 : len(s)-1]) {
			out = append(out, typeEnvValue(e))
		}
		return out
	}
	if strings.EqualFold(s, "true") {
		return true
	}
	if strings.EqualFold(s, "false") {
		return false
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return u
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i
	}
	if isPlainFloat(s) {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f
		}
	}
	return unquote(s)
}

func isPlainFloat(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c == '.', c == 'e', c == 'E', c == '-', c == '+':
		default:
			return false
		}
	}
	return true
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

// splitEnvArray splits on commas outside quotes and drops empty elements.
func splitEnvArray(s string) []string {
	var out []string
	var quote byte
	start := 0
	flush := func(end int) {
		if e := strings.TrimSpace(s[start:end]); e != "" {
			out = append(out, e)
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ',':
			flush(i)
			start = i + 1
		}
	}
	flush(len(s))
	return out
}

// envField is one settable field of a raw config struct, named for the environment.
type envField struct {
	name  string // environment suffix, e.g. "STREAMS_BATCH_LENGTH" without index, "IGGY_ADDRESS"
	path  string // dotted TOML path, e.g. "iggy.address"
	index []int  // reflect field index path from the root struct
}

// envFields lists every scalar or string-list field of struct type t (recursing into
// structs and pointers to structs), named by the upper-cased toml path joined with "_".
// Slices of structs and maps are skipped (callers handle them).
func envFields(t reflect.Type) []envField {
	var out []envField
	var walk func(t reflect.Type, name, path string, index []int)
	walk = func(t reflect.Type, name, path string, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type, name, path, append(append([]int{}, index...), i))
				continue
			}
			if tag == "" || tag == "-" {
				continue
			}
			n, p := strings.ToUpper(tag), tag
			if name != "" {
				n, p = name+"_"+n, path+"."+tag
			}
			idx := append(append([]int{}, index...), i)
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct:
				walk(ft, n, p, idx)
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.String,
				ft.Kind() == reflect.Map, ft.Kind() == reflect.Interface:
			default:
				out = append(out, envField{name: n, path: p, index: idx})
			}
		}
	}
	walk(t, "", "", nil)
	return out
}

// setEnvField sets the field at index in root (a struct value, addressable) from an
// environment value. String fields take the text as is; bools want true/false; integers a
// decimal number; string lists the array syntax "[a, b]". secret keeps val out of errors.
func setEnvField(root reflect.Value, index []int, val string, secret bool) error {
	v := root
	for _, i := range index {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(i)
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	shown := strconv.Quote(val)
	if secret {
		shown = "(redacted)"
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(val)
	case reflect.Bool:
		switch strings.ToLower(strings.TrimSpace(val)) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			return fmt.Errorf("want true or false, got %s", shown)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, err := strconv.ParseUint(strings.TrimSpace(val), 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want an unsigned integer of %d bits, got %s", v.Type().Bits(), shown)
		}
		v.SetUint(u)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want an integer of %d bits, got %s", v.Type().Bits(), shown)
		}
		v.SetInt(n)
	case reflect.Slice:
		s := strings.TrimSpace(val)
		if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
			return fmt.Errorf("want a list in array syntax [a, b], got %s", shown)
		}
		elems := splitEnvArray(s[1 : len(s)-1])
		out := reflect.MakeSlice(v.Type(), len(elems), len(elems))
		for i, e := range elems {
			out.Index(i).SetString(unquote(e))
		}
		v.Set(out)
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}
