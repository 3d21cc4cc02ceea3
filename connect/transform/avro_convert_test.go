package transform

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connect/schema"
	"github.com/ferryio/ferry/sdk"
)

const userSchema = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}`

const avroOpts = "conversion_options = { pretty_json = false, include_metadata = false, strict_mode = false }\n"

// alice30 is the datum {"name":"Alice","age":30} of userSchema: the string's zigzag
// length 5 (0x0a), its bytes, the int 30 zigzag-encoded (0x3c).
var alice30 = []byte{0x0a, 'A', 'l', 'i', 'c', 'e', 0x3c}

// bob25 is {"name":"Bob","age":25}.
var bob25 = []byte{0x06, 'B', 'o', 'b', 0x32}

func avroTable(from, to, extra string) string {
	return "[transforms.avro_convert]\nenabled = true\nsource_format = \"" + from + "\"\ntarget_format = \"" + to + "\"\n" + avroOpts + extra
}

func withSchema(extra string) string { return "schema_json = '" + userSchema + "'\n" + extra }

// jsonPayload parses s into a json Payload.
func jsonPayload(t testing.TB, s string) Payload {
	t.Helper()
	var p fastjson.Parser
	v, err := p.Parse(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return Payload{Format: sdk.SchemaJSON, JSON: v}
}

// render is a payload as a test compares it: its format, then its JSON or bytes.
func render(p Payload) string {
	if p.Format == sdk.SchemaJSON {
		return "json " + string(schema.AppendJSON(nil, p.JSON))
	}
	return string(p.Format) + " " + string(p.Bytes)
}

func TestAvroConvert(t *testing.T) {
	tests := []struct {
		name, doc string
		in        func(t testing.TB) Payload
		want      string // format and content, or the error's text
		wantErr   bool
	}{
		{"json to avro", avroTable("json", "avro", withSchema("")),
			func(t testing.TB) Payload { return jsonPayload(t, `{"age":25,"name":"Bob"}`) }, "avro " + string(bob25), false},
		{"json to avro after field_mappings", avroTable("json", "avro", withSchema("field_mappings = { full = \"name\" }\n")),
			func(t testing.TB) Payload { return jsonPayload(t, `{"full":"Bob","age":25}`) }, "avro " + string(bob25), false},
		{"json to avro, record missing a field", avroTable("json", "avro", withSchema("")),
			func(t testing.TB) Payload { return jsonPayload(t, `{"name":"Bob"}`) }, `avro: cannot decode textual record "User": only found 1 of 2 fields`, true},
		{"json to avro, raw bytes taken as avro", avroTable("json", "avro", withSchema("")),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaRaw, Bytes: []byte{1, 2}} }, "avro \x01\x02", false},
		{"text to avro", avroTable("text", "avro", withSchema("")),
			func(t testing.TB) Payload {
				return Payload{Format: sdk.SchemaText, Bytes: []byte(`{"name":"Bob","age":25}`)}
			}, "avro " + string(bob25), false},
		{"text to avro, text not JSON", avroTable("text", "avro", withSchema("")),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaText, Bytes: []byte(`Bob`)} }, "text payload is not JSON", true},
		{"avro to json", avroTable("avro", "json", withSchema("")),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaAvro, Bytes: alice30} }, `json {"name":"Alice","age":30}`, false},
		{"avro to json with field_mappings", avroTable("avro", "json", withSchema("field_mappings = { name = \"full_name\" }\n")),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaAvro, Bytes: alice30} }, `json {"full_name":"Alice","age":30}`, false},
		{"avro to json, trailing byte", avroTable("avro", "json", withSchema("")),
			func(t testing.TB) Payload {
				return Payload{Format: sdk.SchemaAvro, Bytes: append(append([]byte{}, alice30...), 0)}
			},
			"avro: 1 trailing bytes after the datum (byte 7)", true},
		{"avro to json, empty", avroTable("avro", "json", withSchema("")),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaAvro} }, "empty avro payload", true},
		{"avro to json, json payload", avroTable("avro", "json", withSchema("")),
			func(t testing.TB) Payload { return jsonPayload(t, `{"name":"Alice","age":30}`) }, "want an avro payload, got json", true},
		{"avro to text", avroTable("avro", "text", ""),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaAvro, Bytes: []byte{1, 2, 3, 4, 5}} }, "text AQIDBAU=", false},
		{"avro to text, json payload pretty", avroTable("avro", "text", ""),
			func(t testing.TB) Payload { return jsonPayload(t, `{"a":[1,2.50],"b":{},"c":[],"d":{"e":"x\ny"}}`) },
			"text {\n  \"a\": [\n    1,\n    2.50\n  ],\n  \"b\": {},\n  \"c\": [],\n  \"d\": {\n    \"e\": \"x\\ny\"\n  }\n}", false},
		{"avro to text, raw payload", avroTable("avro", "text", ""),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaRaw, Bytes: []byte("hé")} }, "text hé", false},
		{"avro to text, raw payload not UTF-8", avroTable("avro", "text", ""),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaRaw, Bytes: []byte{0xff}} }, "raw payload is not UTF-8 text", true},
		{"avro to text, flat_buffer payload unchanged", avroTable("avro", "text", ""),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaFlatBuffer, Bytes: []byte{1}} }, "flat_buffer \x01", false},
		{"avro to raw", avroTable("avro", "raw", ""),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaAvro, Bytes: alice30} }, "raw " + string(alice30), false},
		{"avro to raw, json payload compact", avroTable("avro", "raw", ""),
			func(t testing.TB) Payload { return jsonPayload(t, `{ "a" : [1, 2.50] }`) }, `raw {"a":[1,2.50]}`, false},
		{"avro to raw, text payload", avroTable("avro", "raw", ""),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaText, Bytes: []byte("hi")} }, "raw hi", false},
		{"raw to avro, unchecked", avroTable("raw", "avro", ""),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaRaw, Bytes: []byte{9, 9}} }, "avro \x09\x09", false},
		{"raw to avro, json payload", avroTable("raw", "avro", ""),
			func(t testing.TB) Payload { return jsonPayload(t, `{}`) }, "want a raw payload, got json", true},
		{"same format passes", avroTable("avro", "avro", ""),
			func(t testing.TB) Payload { return Payload{Format: sdk.SchemaAvro, Bytes: []byte{1}} }, "avro \x01", false},
		{"pair upstream does not convert passes", avroTable("json", "text", "field_mappings = { a = \"b\" }\n"),
			func(t testing.TB) Payload { return jsonPayload(t, `{"a":1,"c":2}`) }, `json {"b":1,"c":2}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(specsFromTOML(t, tt.doc, "avro_convert"))
			if err != nil {
				t.Fatal(err)
			}
			var a fastjson.Arena
			got, err := c.ApplyPayload(tt.in(t), &a)
			if tt.wantErr {
				if err == nil || !strings.HasPrefix(err.Error(), "transform avro_convert: ") || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("got %v, %v; want an error containing %q", render(got), err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := render(got); r != tt.want {
				t.Fatalf("got  %q\nwant %q", r, tt.want)
			}
		})
	}
}

// TestAvroConvertRoundTrip: a datum converted to JSON and back is the same bytes (the JSON
// form is an avro stream's), with a union and an enum in the record.
func TestAvroConvertRoundTrip(t *testing.T) {
	const s = `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"tag","type":["null","string"]},{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}}]}`
	toJSON, err := Build(specsFromTOML(t, avroTable("avro", "json", "schema_json = '"+s+"'\n"), "avro_convert"))
	if err != nil {
		t.Fatal(err)
	}
	toAvro, err := Build(specsFromTOML(t, avroTable("json", "avro", "schema_json = '"+s+"'\n"), "avro_convert"))
	if err != nil {
		t.Fatal(err)
	}
	// id 300 (zigzag 600 = d8 04), tag branch 1 "x", enum index 1.
	datum := []byte{0xd8, 0x04, 0x02, 0x02, 'x', 0x02}
	var a fastjson.Arena
	j, err := toJSON.ApplyPayload(Payload{Format: sdk.SchemaAvro, Bytes: datum}, &a)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := render(j), `json {"id":300,"tag":{"string":"x"},"e":"B"}`; got != want {
		t.Fatalf("to json: got %q, want %q", got, want)
	}
	back, err := toAvro.ApplyPayload(j, &a)
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Bytes) != string(datum) || back.Format != sdk.SchemaAvro {
		t.Fatalf("back: got %s %x, want avro %x", back.Format, back.Bytes, datum)
	}
}

// TestAvroConvertThroughApply: Chain.Apply (JSON values only) runs a conversion that stays
// JSON and refuses one that leaves JSON.
func TestAvroConvertThroughApply(t *testing.T) {
	c, err := Build(specsFromTOML(t, avroTable("avro", "text", "field_mappings = { a = \"b\" }\n"), "avro_convert"))
	if err != nil {
		t.Fatal(err)
	}
	var p fastjson.Parser
	var a fastjson.Arena
	v, _ := p.Parse(`{"a":1}`)
	_, err = c.Apply(v, &a)
	if !errors.Is(err, errNotJSON) || !strings.HasPrefix(err.Error(), "transform avro_convert: now text: ") {
		t.Fatalf("got %v", err)
	}
	c, err = Build(specsFromTOML(t, avroTable("json", "text", "field_mappings = { a = \"b\" }\n"), "avro_convert"))
	if err != nil {
		t.Fatal(err)
	}
	if got := apply(t, c, `{"a":1}`); got != `{"b":1}` {
		t.Fatalf("got %s", got)
	}
}

// TestConvertFileOrder: the field transforms before and after a conversion see the JSON
// they are given in file order, and pass a non-JSON payload unchanged.
func TestConvertFileOrder(t *testing.T) {
	doc := avroTable("avro", "json", withSchema("")) + "\n[transforms.add_fields]\nenabled = true\nfields = [{ key = \"k\", value.static = 1 }]\n"
	c, err := Build(specsFromTOML(t, doc, "add_fields", "avro_convert"))
	if err != nil {
		t.Fatal(err)
	}
	var a fastjson.Arena
	got, err := c.ApplyPayload(Payload{Format: sdk.SchemaAvro, Bytes: alice30}, &a)
	if err != nil {
		t.Fatal(err)
	}
	if r := render(got); r != `json {"name":"Alice","age":30}` { // add_fields met avro bytes
		t.Fatalf("add_fields first: got %s", r)
	}
	c, err = Build(specsFromTOML(t, doc, "avro_convert", "add_fields"))
	if err != nil {
		t.Fatal(err)
	}
	got, err = c.ApplyPayload(Payload{Format: sdk.SchemaAvro, Bytes: alice30}, &a)
	if err != nil {
		t.Fatal(err)
	}
	if r := render(got); r != `json {"name":"Alice","age":30,"k":1}` {
		t.Fatalf("add_fields second: got %s", r)
	}
	if !c.Converts() {
		t.Fatal("Converts: false")
	}
}

func TestAvroConvertConfigErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "user.avsc")
	if err := os.WriteFile(good, []byte(userSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	head := "[transforms.avro_convert]\nenabled = true\n"
	tests := []struct{ name, doc, want string }{
		{"source_format missing", head + "target_format = \"json\"\n" + avroOpts,
			"transforms.avro_convert.source_format: invalid transform: required key missing"},
		{"target_format missing", head + "source_format = \"json\"\n" + avroOpts,
			"transforms.avro_convert.target_format: invalid transform: required key missing"},
		{"target_format unknown", avroTable("json", "xml", ""),
			`transforms.avro_convert.target_format: invalid transform: unknown schema "xml"`},
		{"source_format not a string", head + "source_format = 1\ntarget_format = \"json\"\n" + avroOpts,
			"transforms.avro_convert.source_format: invalid transform: want a string, got an integer"},
		{"conversion_options missing", head + "source_format = \"avro\"\ntarget_format = \"raw\"\n",
			"transforms.avro_convert.conversion_options: invalid transform: required key missing"},
		{"conversion_options field missing", head + "source_format = \"avro\"\ntarget_format = \"raw\"\nconversion_options = { pretty_json = false, include_metadata = false }\n",
			"transforms.avro_convert.conversion_options.strict_mode: invalid transform: required key missing"},
		{"conversion_options field not a boolean", head + "source_format = \"avro\"\ntarget_format = \"raw\"\nconversion_options = { pretty_json = 1, include_metadata = false, strict_mode = false }\n",
			"transforms.avro_convert.conversion_options.pretty_json: invalid transform: want true or false, got an integer"},
		{"conversion_options unknown key", head + "source_format = \"avro\"\ntarget_format = \"raw\"\nconversion_options = { pretty_json = false, include_metadata = false, strict_mode = false, verify_buffers = true }\n",
			"transforms.avro_convert.conversion_options.verify_buffers: invalid transform: unknown key"},
		{"field_mappings value", avroTable("avro", "raw", "field_mappings = { a = 1 }\n"),
			"transforms.avro_convert.field_mappings.a: invalid transform: want a string, got an integer"},
		{"field_mappings not a table", avroTable("avro", "raw", "field_mappings = [\"a\"]\n"),
			"transforms.avro_convert.field_mappings: invalid transform: want a table, got an array"},
		{"schema_json invalid", avroTable("avro", "json", "schema_json = '{\"type\":\"record\"}'\n"),
			"transforms.avro_convert.schema_json: invalid transform: avro schema: "},
		{"schema_path unreadable", avroTable("avro", "json", "schema_path = '"+filepath.Join(dir, "none.avsc")+"'\n"),
			"transforms.avro_convert.schema_path: invalid transform: open "},
		{"json to avro without a schema", avroTable("json", "avro", ""),
			"transforms.avro_convert: invalid transform: json → avro needs schema_json or schema_path"},
		{"avro to json without a schema", avroTable("avro", "json", ""),
			"transforms.avro_convert: invalid transform: avro → json needs schema_json or schema_path"},
		{"unknown key", avroTable("avro", "raw", "schema = 'x'\n"),
			"transforms.avro_convert.schema: invalid transform: unknown key"},
		{"enabled missing is a disabled spec elsewhere; unknown key after a good schema_path", avroTable("avro", "json", "schema_path = '"+good+"'\nroot_table_name = 'x'\n"),
			"transforms.avro_convert.root_table_name: invalid transform: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(specsFromTOML(t, tt.doc, "avro_convert"))
			if err == nil || !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %v, want prefix %q", err, tt.want)
			}
		})
	}
	// schema_path read at Build: the file's schema converts.
	c, err := Build(specsFromTOML(t, avroTable("avro", "json", "schema_path = '"+good+"'\n"), "avro_convert"))
	if err != nil {
		t.Fatal(err)
	}
	var a fastjson.Arena
	got, err := c.ApplyPayload(Payload{Format: sdk.SchemaAvro, Bytes: alice30}, &a)
	if err != nil || render(got) != `json {"name":"Alice","age":30}` {
		t.Fatalf("schema_path: got %s, %v", render(got), err)
	}
}
