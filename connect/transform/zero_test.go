package transform

import "testing"

// TestZeroValuesAreValues: a transform tells a key that holds 0, false, "" or null from a
// missing key, and a static 0, false or "" is that value: update_fields' key_exists holds
// for them, key_not_exists only for the missing key; add_fields writes the zeros;
// filter_fields matches equals 0 / false / "" and is_null only on null; unwrap_envelope
// unwraps a zero.
func TestZeroValuesAreValues(t *testing.T) {
	tests := []struct {
		name, doc string
		order     []string
		in, want  string
	}{
		{"add_fields static zeros", `
[transforms.add_fields]
enabled = true
fields = [{ key = "i", value.static = 0 }, { key = "f", value.static = 0.0 }, { key = "b", value.static = false }, { key = "s", value.static = "" }]`,
			[]string{"add_fields"}, `{}`, `{"i":0,"f":0.0,"b":false,"s":""}`},
		{"update_fields on zero-valued keys", `
[transforms.update_fields]
enabled = true
fields = [
  { key = "i", value.static = "there", condition = "key_exists" },
  { key = "b", value.static = "there", condition = "key_exists" },
  { key = "s", value.static = "there", condition = "key_exists" },
  { key = "n", value.static = "there", condition = "key_exists" },
  { key = "m", value.static = "there", condition = "key_exists" },
  { key = "i", value.static = "absent", condition = "key_not_exists" },
  { key = "m", value.static = "absent", condition = "key_not_exists" },
]`, []string{"update_fields"}, `{"i":0,"b":false,"s":"","n":null}`, `{"i":"there","b":"there","s":"there","n":"there","m":"absent"}`},
		{"filter_fields zero equals and nulls", `
[transforms.filter_fields]
enabled = true
patterns = [
  { value_pattern = { equals = 0 } },
  { value_pattern = { equals = false } },
  { value_pattern = { equals = "" } },
]`, []string{"filter_fields"}, `{"a":0,"b":false,"c":"","d":null,"e":1,"f":true,"g":"x"}`, `{"a":0,"b":false,"c":""}`},
		{"filter_fields is_null", `
[transforms.filter_fields]
enabled = true
patterns = [{ value_pattern = "is_null" }]`, []string{"filter_fields"}, `{"a":0,"b":false,"c":"","d":null}`, `{"d":null}`},
		{"unwrap_envelope of a zero", `
[transforms.unwrap_envelope]
enabled = true
field = "p"`, []string{"unwrap_envelope"}, `{"p":0}`, `0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(specsFromTOML(t, tt.doc, tt.order...))
			if err != nil {
				t.Fatal(err)
			}
			if got := apply(t, c, tt.in); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
