package transform

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	toml "github.com/pelletier/go-toml/v2"
	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connect/schema"
)

// specsFromTOML reads the [transforms.*] tables of doc in the order they are written (the
// order the connector-file parser gives Build).
func specsFromTOML(t testing.TB, doc string, order ...string) []Spec {
	t.Helper()
	var m struct {
		Transforms map[string]map[string]any `toml:"transforms"`
	}
	if err := toml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("toml: %v", err)
	}
	var out []Spec
	for _, typ := range order {
		tbl := m.Transforms[typ]
		en, _ := tbl["enabled"].(bool)
		out = append(out, Spec{Type: typ, Enabled: en, Table: tbl})
	}
	return out
}

func apply(t testing.TB, c *Chain, in string) string {
	t.Helper()
	var p fastjson.Parser
	var a fastjson.Arena
	v, err := p.Parse(in)
	if err != nil {
		t.Fatalf("input %s: %v", in, err)
	}
	v, err = c.Apply(v, &a)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return string(schema.AppendJSON(nil, v))
}

func fixClock(t *testing.T) {
	t.Helper()
	oldNow, old4, old7 := now, uuidV4, uuidV7
	t.Cleanup(func() { now, uuidV4, uuidV7 = oldNow, old4, old7 })
	now = func() time.Time { return time.Date(2026, 12, 1, 10, 20, 30, 123_000_000, time.UTC) }
	uuidV4 = func() (uuid.UUID, error) { return uuid.MustParse("2f1c3c1e-5b1a-4c7e-9a55-0123456789ab"), nil }
	uuidV7 = func() (uuid.UUID, error) { return uuid.MustParse("01938a4e-7b2c-7d3e-8f40-abcdefabcdef"), nil }
}

func TestTransforms(t *testing.T) {
	fixClock(t)
	tests := []struct {
		name, doc string
		order     []string
		in, want  string
	}{
		{"add_fields static and computed", `
[transforms.add_fields]
enabled = true
fields = [
  { key = "source", value.static = "iggy" },
  { key = "n", value.static = 5.0 },
  { key = "obj", value.static = { b = 1, a = [true, "x<y"] } },
  { key = "at", value.computed = "date_time" },
  { key = "ns", value.computed = "timestamp_nanos" },
  { key = "us", value.computed = "timestamp_micros" },
  { key = "ms", value.computed = "timestamp_millis" },
  { key = "s", value.computed = "timestamp_seconds" },
  { key = "u4", value.computed = "uuid_v4" },
  { key = "u7", value.computed = "uuid_v7" },
  { key = "id", value.static = 7 },
]`, []string{"add_fields"}, `{"id":1,"x":"a\u0001"}`,
			`{"id":7,"x":"a\u0001","source":"iggy","n":5.0,"obj":{"a":[true,"x<y"],"b":1},"at":"2026-12-01T10:20:30.123+00:00","ns":1796120430123000000,"us":1796120430123000,"ms":1796120430123,"s":1796120430,"u4":"2f1c3c1e-5b1a-4c7e-9a55-0123456789ab","u7":"01938a4e-7b2c-7d3e-8f40-abcdefabcdef"}`},
		{"add_fields leaves a non-object", `
[transforms.add_fields]
enabled = true
fields = [{ key = "a", value.static = 1 }]`, []string{"add_fields"}, `[1,2]`, `[1,2]`},
		{"update_fields conditions", `
[transforms.update_fields]
enabled = true
fields = [
  { key = "a", value.static = "always" },
  { key = "b", value.static = "exists", condition = "key_exists" },
  { key = "c", value.static = "exists", condition = "key_exists" },
  { key = "d", value.static = "new", condition = "key_not_exists" },
  { key = "e", value.static = "new", condition = "key_not_exists" },
]`, []string{"update_fields"}, `{"b":1,"e":2}`, `{"b":"exists","e":2,"a":"always","d":"new"}`},
		{"delete_fields", `
[transforms.delete_fields]
enabled = true
fields = ["secret", "missing"]`, []string{"delete_fields"}, `{"id":1,"secret":"x","n":2.50}`, `{"id":1,"n":2.50}`},
		{"delete_fields a key written twice", `
[transforms.delete_fields]
enabled = true
fields = ["a"]`, []string{"delete_fields"}, `{"a":1,"b":2,"a":3}`, `{"b":2}`},
		{"filter_fields keep_fields only", `
[transforms.filter_fields]
enabled = true
keep_fields = ["id", "name"]`, []string{"filter_fields"}, `{"id":1,"x":2,"name":"n","y":3}`, `{"id":1,"name":"n"}`},
		{"filter_fields both empty is a no-op", `
[transforms.filter_fields]
enabled = true`, []string{"filter_fields"}, `{"a":1}`, `{"a":1}`},
		{"filter_fields include_matching key patterns", `
[transforms.filter_fields]
enabled = true
keep_fields = ["id"]
patterns = [
  { key_pattern = { starts_with = "meta_" } },
  { key_pattern = { regex = "^x[0-9]$" } },
]`, []string{"filter_fields"}, `{"id":1,"meta_a":2,"b":3,"x1":4,"x12":5}`, `{"id":1,"meta_a":2,"x1":4}`},
		{"filter_fields exclude matching values", `
[transforms.filter_fields]
enabled = true
include_matching = false
patterns = [
  { value_pattern = "is_null" },
  { key_pattern = { ends_with = "_tmp" }, value_pattern = "is_string" },
]`, []string{"filter_fields"}, `{"a":null,"b_tmp":"s","c_tmp":1,"d":"s"}`, `{"c_tmp":1,"d":"s"}`},
		{"filter_fields numeric patterns match integers too", `
[transforms.filter_fields]
enabled = true
patterns = [
  { key_pattern = { exact = "gt" }, value_pattern = { greater_than = 4.5 } },
  { key_pattern = { exact = "lt" }, value_pattern = { less_than = 10 } },
  { key_pattern = { exact = "bt" }, value_pattern = { between = [1, 5] } },
]`, []string{"filter_fields"}, `{"gt":5,"lt":9.5,"bt":5,"other":1,"gt2":6}`, `{"gt":5,"lt":9.5,"bt":5}`},
		{"filter_fields string and equality values", `
[transforms.filter_fields]
enabled = true
patterns = [
  { value_pattern = { contains = "ok" } },
  { value_pattern = { regex = "^v\\d" } },
  { value_pattern = { equals = { k = [1, 2] } } },
  { value_pattern = "is_boolean" },
]`, []string{"filter_fields"}, `{"a":"is ok","b":"v1","c":{"k":[1,2]},"d":{"k":[2,1]},"e":false,"f":"nope","g":7}`, `{"a":"is ok","b":"v1","c":{"k":[1,2]},"e":false}`},
		{"unwrap_envelope", `
[transforms.unwrap_envelope]
enabled = true
field = "payload"`, []string{"unwrap_envelope"}, `{"meta":1,"payload":{"id":2}}`, `{"id":2}`},
		{"unwrap_envelope missing key leaves it", `
[transforms.unwrap_envelope]
enabled = true
field = "payload"`, []string{"unwrap_envelope"}, `{"meta":1}`, `{"meta":1}`},
		{"disabled transforms are skipped", `
[transforms.delete_fields]
enabled = false
fields = ["a"]`, []string{"delete_fields"}, `{"a":1}`, `{"a":1}`},
		{"file order: add then delete", `
[transforms.add_fields]
enabled = true
fields = [{ key = "b", value.static = 2 }]
[transforms.delete_fields]
enabled = true
fields = ["b"]`, []string{"add_fields", "delete_fields"}, `{"a":1}`, `{"a":1}`},
		{"file order: delete then add", `
[transforms.add_fields]
enabled = true
fields = [{ key = "b", value.static = 2 }]
[transforms.delete_fields]
enabled = true
fields = ["b"]`, []string{"delete_fields", "add_fields"}, `{"a":1,"b":0}`, `{"a":1,"b":2}`},
		{"unwrap a static object then change it", `
[transforms.add_fields]
enabled = true
fields = [{ key = "env", value.static = { x = 1 } }]
[transforms.unwrap_envelope]
enabled = true
field = "env"
[transforms.delete_fields]
enabled = true
fields = ["x"]`, []string{"add_fields", "unwrap_envelope", "delete_fields"}, `{}`, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(specsFromTOML(t, tt.doc, tt.order...))
			if err != nil {
				t.Fatal(err)
			}
			// Twice: per-message state (arenas, copies of static values) must not leak.
			for range 2 {
				if got := apply(t, c, tt.in); got != tt.want {
					t.Fatalf("got  %s\nwant %s", got, tt.want)
				}
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name, doc, typ, want string
	}{
		{"unknown type", "[transforms.rename]\nenabled = true", "rename", "transforms.rename: invalid transform: unknown type"},
		{"unknown type disabled", "[transforms.rename]\nenabled = false", "rename", "transforms.rename: invalid transform: unknown type"},
		{"fields missing", "[transforms.add_fields]\nenabled = true", "add_fields", "transforms.add_fields.fields: invalid transform: required key missing"},
		{"value missing", "[transforms.add_fields]\nenabled = true\nfields = [{ key = \"a\" }]", "add_fields", "transforms.add_fields.fields[0].value: invalid transform: required key missing"},
		{"computed kind", "[transforms.add_fields]\nenabled = true\nfields = [{ key = \"a\", value.computed = \"now\" }]", "add_fields", `transforms.add_fields.fields[0].value.computed: invalid transform: unknown kind "now"`},
		{"both values", "[transforms.add_fields]\nenabled = true\nfields = [{ key = \"a\", value = { static = 1, computed = \"uuid_v4\" } }]", "add_fields", "transforms.add_fields.fields[0].value: invalid transform: want one of static and computed"},
		{"condition", "[transforms.update_fields]\nenabled = true\nfields = [{ key = \"a\", value.static = 1, condition = \"sometimes\" }]", "update_fields", `transforms.update_fields.fields[0].condition: invalid transform: unknown condition "sometimes"`},
		{"unknown key", "[transforms.delete_fields]\nenabled = true\nfields = []\nfeilds = []", "delete_fields", "transforms.delete_fields.feilds: invalid transform: unknown key"},
		{"delete wants strings", "[transforms.delete_fields]\nenabled = true\nfields = [1]", "delete_fields", "transforms.delete_fields.fields: invalid transform: element 0: want a string, got an integer"},
		{"unwrap empty", "[transforms.unwrap_envelope]\nenabled = true\nfield = \"\"", "unwrap_envelope", "transforms.unwrap_envelope.field: invalid transform: must not be empty"},
		{"regex", "[transforms.filter_fields]\nenabled = true\npatterns = [{ key_pattern = { regex = \"(\" } }]", "filter_fields", "transforms.filter_fields.patterns[0].key_pattern.regex: invalid transform: error parsing regexp"},
		{"value pattern", "[transforms.filter_fields]\nenabled = true\npatterns = [{ value_pattern = \"is_int\" }]", "filter_fields", `transforms.filter_fields.patterns[0].value_pattern: invalid transform: unknown pattern "is_int"`},
		{"between", "[transforms.filter_fields]\nenabled = true\npatterns = [{ value_pattern = { between = [1] } }]", "filter_fields", "transforms.filter_fields.patterns[0].value_pattern.between: invalid transform: want [low, high]"},
		{"convert", "[transforms.proto_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"proto\"\ninclude_paths = []\npreserve_unknown_fields = false\nmessage_type = \"M\"\nschema_path = \"a.proto\"", "proto_convert", "transforms.proto_convert.schema_path: invalid transform: stat a.proto: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(specsFromTOML(t, tt.doc, tt.typ))
			if err == nil || !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestRFC3339Fractions(t *testing.T) {
	for _, tt := range []struct {
		ns   int
		want string
	}{
		{0, "2026-01-02T03:04:05+00:00"},
		{5_000_000, "2026-01-02T03:04:05.005+00:00"},
		{5_000, "2026-01-02T03:04:05.000005+00:00"},
		{5, "2026-01-02T03:04:05.000000005+00:00"},
	} {
		got := string(appendRFC3339(nil, time.Date(2026, 1, 2, 3, 4, 5, tt.ns, time.UTC)))
		if got != tt.want {
			t.Errorf("%d ns: got %s, want %s", tt.ns, got, tt.want)
		}
	}
}
