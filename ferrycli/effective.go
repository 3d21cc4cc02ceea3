package ferrycli

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// configAttrs turns a redacted TOML document (Runtime.String, Sink.String, Source.String)
// into one slog attribute per leaf, named by its dotted path (iggy.address,
// streams[0].topics): the effective config then reads as fields of one line, where the
// TOML text was a single value of literal "\n"s.
func configAttrs(doc string) []any {
	var tree map[string]any
	if err := toml.Unmarshal([]byte(doc), &tree); err != nil {
		return []any{slog.String("config", doc)}
	}
	var attrs []any
	flattenInto(&attrs, "", tree)
	return attrs
}

func flattenInto(attrs *[]any, prefix string, v any) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			flattenInto(attrs, name, t[k])
		}
	case []any:
		if len(t) > 0 {
			if _, tables := t[0].(map[string]any); tables {
				for i, e := range t {
					flattenInto(attrs, fmt.Sprintf("%s[%d]", prefix, i), e)
				}
				return
			}
		}
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = fmt.Sprint(e)
		}
		*attrs = append(*attrs, slog.String(prefix, "["+strings.Join(parts, ",")+"]"))
	default:
		*attrs = append(*attrs, slog.Any(prefix, t))
	}
}
