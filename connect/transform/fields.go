package transform

import (
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fastjson"
)

// The clock and the uuid sources of computed values; tests replace them.
var (
	now    = time.Now
	uuidV4 = uuid.NewRandom
	uuidV7 = uuid.NewV7
)

// value is a field's value: a static one, built once, or a computed kind, evaluated per
// message.
type value struct {
	static   *fastjson.Value
	computed string
}

// computedKinds are the kinds of `value.computed`.
var computedKinds = []string{"date_time", "timestamp_nanos", "timestamp_micros", "timestamp_millis", "timestamp_seconds", "uuid_v4", "uuid_v7"}

func buildValue(t *table) (value, error) {
	vt, ok, err := t.subTable("value")
	if err != nil {
		return value{}, err
	}
	if !ok {
		return value{}, t.errorf("value", "required key missing (want value.static or value.computed)")
	}
	st, hasStatic := vt.get("static")
	kind, hasComputed, err := vt.str("computed", false)
	if err != nil {
		return value{}, err
	}
	if err := vt.unknownKeys(); err != nil {
		return value{}, err
	}
	switch {
	case hasStatic && hasComputed:
		return value{}, vt.errorf("", "want one of static and computed, not both")
	case hasStatic:
		v, err := staticJSON(st)
		if err != nil {
			return value{}, vt.errorf("static", "%v", err)
		}
		return value{static: v}, nil
	case hasComputed:
		for _, k := range computedKinds {
			if k == kind {
				return value{computed: kind}, nil
			}
		}
		return value{}, vt.errorf("computed", "unknown kind %q (want one of %s)", kind, strings.Join(computedKinds, ", "))
	}
	return value{}, vt.errorf("", "want static or computed")
}

// eval returns the value for one message.
func (v value) eval(a *fastjson.Arena) (*fastjson.Value, error) {
	if v.static != nil {
		switch v.static.Type() {
		case fastjson.TypeObject, fastjson.TypeArray:
			// A later transform may change this message's copy (unwrap_envelope, then
			// add_fields): never the shared one.
			return deepCopy(v.static, a), nil
		}
		return v.static, nil
	}
	switch v.computed {
	case "date_time":
		var b [64]byte
		return a.NewStringBytes(appendRFC3339(b[:0], now().UTC())), nil
	case "timestamp_nanos":
		return a.NewNumberInt(int(now().UnixNano())), nil
	case "timestamp_micros":
		return a.NewNumberInt(int(now().UnixMicro())), nil
	case "timestamp_millis":
		return a.NewNumberInt(int(now().UnixMilli())), nil
	case "timestamp_seconds":
		return a.NewNumberInt(int(now().Unix())), nil
	case "uuid_v4", "uuid_v7":
		gen := uuidV4
		if v.computed == "uuid_v7" {
			gen = uuidV7
		}
		u, err := gen()
		if err != nil {
			return nil, err
		}
		var b [36]byte
		hexUUID(b[:], u)
		return a.NewStringBytes(b[:]), nil
	}
	return nil, nil
}

func hexUUID(dst []byte, u uuid.UUID) {
	const hex = "0123456789abcdef"
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst[j] = '-'
			j++
		}
		dst[j], dst[j+1] = hex[c>>4], hex[c&0xf]
		j += 2
	}
}

// appendRFC3339 writes t as chrono's to_rfc3339 does: the fraction with 0, 3, 6 or 9
// digits, and the offset as +00:00.
func appendRFC3339(dst []byte, t time.Time) []byte {
	dst = t.AppendFormat(dst, "2006-01-02T15:04:05")
	switch ns := t.Nanosecond(); {
	case ns == 0:
	case ns%1_000_000 == 0:
		dst = t.AppendFormat(dst, ".000")
	case ns%1_000 == 0:
		dst = t.AppendFormat(dst, ".000000")
	default:
		dst = t.AppendFormat(dst, ".000000000")
	}
	return t.AppendFormat(dst, "-07:00")
}

// field is one entry of add_fields' or update_fields' fields.
type field struct {
	key  string
	val  value
	cond string // update_fields: always, key_exists, key_not_exists
}

func buildFields(t *table, withCondition bool) ([]field, error) {
	l, err := t.list("fields", true)
	if err != nil {
		return nil, err
	}
	out := make([]field, 0, len(l))
	for i, e := range l {
		ft, err := t.sub("fields", i, e)
		if err != nil {
			return nil, err
		}
		key, _, err := ft.str("key", true)
		if err != nil {
			return nil, err
		}
		v, err := buildValue(ft)
		if err != nil {
			return nil, err
		}
		f := field{key: key, val: v, cond: "always"}
		if withCondition {
			c, ok, err := ft.str("condition", false)
			if err != nil {
				return nil, err
			}
			if ok {
				switch c {
				case "always", "key_exists", "key_not_exists":
					f.cond = c
				default:
					return nil, ft.errorf("condition", "unknown condition %q (want always, key_exists or key_not_exists)", c)
				}
			}
		}
		if err := ft.unknownKeys(); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// setFields sets each field whose condition holds on an object; other values pass.
type setFields struct{ fields []field }

func buildAdd(t *table) (Transform, error) {
	fs, err := buildFields(t, false)
	return &setFields{fs}, err
}

func buildUpdate(t *table) (Transform, error) {
	fs, err := buildFields(t, true)
	return &setFields{fs}, err
}

func (s *setFields) Apply(v *fastjson.Value, a *fastjson.Arena) (*fastjson.Value, error) {
	o := object(v)
	if o == nil {
		return v, nil // not an object: field transforms pass it unchanged
	}
	for _, f := range s.fields {
		switch f.cond {
		case "key_exists":
			if o.Get(f.key) == nil {
				continue
			}
		case "key_not_exists":
			if o.Get(f.key) != nil {
				continue
			}
		}
		x, err := f.val.eval(a)
		if err != nil {
			return nil, err
		}
		o.Set(f.key, x)
	}
	return v, nil
}

// deleteFields removes keys from an object.
type deleteFields struct{ keys []string }

func buildDelete(t *table) (Transform, error) {
	l, err := t.list("fields", true)
	if err != nil {
		return nil, err
	}
	d := &deleteFields{}
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil, t.errorf("fields", "element %d: want a string, got %s", i, typeName(e))
		}
		d.keys = append(d.keys, s)
	}
	return d, nil
}

func (d *deleteFields) Apply(v *fastjson.Value, _ *fastjson.Arena) (*fastjson.Value, error) {
	o := object(v)
	if o == nil {
		return v, nil // not an object: field transforms pass it unchanged
	}
	for _, k := range d.keys {
		for o.Get(k) != nil { // a key written twice is deleted twice
			o.Del(k)
		}
	}
	return v, nil
}

// unwrap replaces an object by the value of one of its keys (missing key: unchanged).
type unwrap struct{ field string }

func buildUnwrap(t *table) (Transform, error) {
	f, _, err := t.str("field", true)
	if err != nil {
		return nil, err
	}
	if f == "" {
		return nil, t.errorf("field", "must not be empty")
	}
	return &unwrap{f}, nil
}

func (u *unwrap) Apply(v *fastjson.Value, _ *fastjson.Arena) (*fastjson.Value, error) {
	o := object(v)
	if o == nil {
		return v, nil // not an object: field transforms pass it unchanged
	}
	if x := o.Get(u.field); x != nil {
		return x, nil
	}
	return v, nil
}

// deepCopy copies the objects and arrays of v into a; scalars are shared (nothing
// changes them).
func deepCopy(v *fastjson.Value, a *fastjson.Arena) *fastjson.Value {
	switch v.Type() {
	case fastjson.TypeObject:
		o := a.NewObject()
		src, _ := v.Object()
		src.Visit(func(k []byte, x *fastjson.Value) { o.Set(string(k), deepCopy(x, a)) })
		return o
	case fastjson.TypeArray:
		arr := a.NewArray()
		src, _ := v.Array()
		for i, x := range src {
			arr.SetArrayItem(i, deepCopy(x, a))
		}
		return arr
	}
	return v
}
