package sdk

import (
	"fmt"
	"strconv"
	"strings"
)

// Rules between the keys of one plugin_config. They run after every key was decoded,
// on what the file wrote (a default does not make a key present); `ferry connectors`
// prints them under the connector's fields.

type fieldRule struct {
	text  string
	check func(f *Fields) error
}

// BothOrNeither requires a and b together: a file sets both keys or neither.
func (f *Fields) BothOrNeither(a, b string) {
	f.rules = append(f.rules, fieldRule{
		text: fmt.Sprintf("%s and %s go together: set both or neither", a, b),
		check: func(f *Fields) error {
			da, db := f.def(a), f.def(b)
			if da.present != db.present {
				return FieldErr(a, "%s and %s go together: set both or neither", a, b)
			}
			return nil
		},
	})
}

// AtMostOne allows at most one of keys.
func (f *Fields) AtMostOne(keys ...string) {
	f.rules = append(f.rules, fieldRule{
		text: fmt.Sprintf("at most one of %s", strings.Join(keys, ", ")),
		check: func(f *Fields) error {
			if set := f.presentOf(keys); len(set) > 1 {
				return FieldErr(set[1], "set only one of %s (%s are set)", strings.Join(keys, ", "), strings.Join(set, " and "))
			}
			return nil
		},
	})
}

// ExactlyOne requires exactly one of keys.
func (f *Fields) ExactlyOne(keys ...string) {
	f.rules = append(f.rules, fieldRule{
		text: fmt.Sprintf("exactly one of %s", strings.Join(keys, ", ")),
		check: func(f *Fields) error {
			switch set := f.presentOf(keys); len(set) {
			case 0:
				return FieldErr(keys[0], "set one of %s", strings.Join(keys, ", "))
			case 1:
				return nil
			default:
				return FieldErr(set[1], "set only one of %s (%s are set)", strings.Join(keys, ", "), strings.Join(set, " and "))
			}
		},
	})
}

// RequiredWhen requires key when other has one of values (compared as the file would
// write them, after an enum's aliases are resolved: a default counts).
func (f *Fields) RequiredWhen(key, other string, values ...string) {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strconv.Quote(v)
	}
	f.rules = append(f.rules, fieldRule{
		text: fmt.Sprintf("%s is required when %s = %s", key, other, strings.Join(quoted, " or ")),
		check: func(f *Fields) error {
			d, o := f.def(key), f.def(other)
			if d.present {
				return nil
			}
			for _, q := range quoted {
				if o.shown == q || o.shown == strings.Trim(q, `"`) {
					return FieldErr(key, "required with %s = %s", other, q)
				}
			}
			return nil
		},
	})
}

func (f *Fields) presentOf(keys []string) []string {
	var set []string
	for _, k := range keys {
		if f.def(k).present {
			set = append(set, k)
		}
	}
	return set
}

func (f *Fields) ruleTexts() []string {
	var out []string
	for _, r := range f.rules {
		out = append(out, r.text)
	}
	return out
}
