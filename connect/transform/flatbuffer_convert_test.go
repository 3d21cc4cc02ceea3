package transform

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/sdk"
)

const fbOpts = "conversion_options = { verify_buffers = true, pretty_json = false, include_metadata = false, buffer_size_hint = 1024, strict_mode = false }\n"

func fbTable(from, to, extra string) string {
	return "[transforms.flat_buffer_convert]\nenabled = true\nsource_format = \"" + from + "\"\ntarget_format = \"" + to + "\"\n" +
		"include_paths = [\".\"]\npreserve_unknown_fields = false\n" + extra
}

func TestFlatBufferConvert(t *testing.T) {
	raw := func(f sdk.Schema, b ...byte) func(testing.TB) Payload {
		return func(testing.TB) Payload { return Payload{Format: f, Bytes: b} }
	}
	js := func(s string) func(testing.TB) Payload {
		return func(t testing.TB) Payload { return jsonPayload(t, s) }
	}
	tests := []struct {
		name, doc string
		in        func(t testing.TB) Payload
		want      string // "<format> <hex bytes, spaces ignored>", "json <JSON>", or the error's text
		wantErr   bool
	}{
		// Root offset 4 → vector [8, 16] (the positions of "a" and "1" from the end), then
		// "1" (length, byte, zero, 2 pad), then "a".
		{"json object to flat_buffer", fbTable("json", "flat_buffer", fbOpts), js(`{"a":1}`),
			"flat_buffer 04000000 02000000 08000000 10000000 01000000 31000000 01000000 61000000", false},
		{"string value as is, after field_mappings", fbTable("json", "flat_buffer", fbOpts+"field_mappings = { key = \"k\" }\n"), js(`{"key":"vv"}`),
			"flat_buffer 04000000 02000000 08000000 10000000 02000000 76760000 01000000 6b000000", false},
		{"nested values as compact JSON", fbTable("json", "flat_buffer", fbOpts), js(`{"n":null,"o":{ "x" : [1, 2.50] }}`),
			// vector [8, 20, 28, 48]; the 14-byte object text gets its zero and 1 pad byte.
			"flat_buffer 04000000 04000000 08000000 14000000 1c000000 30000000 " +
				"0e000000 7b2278223a5b312c322e35305d7d 00 00 01000000 6f000000 04000000 6e756c6c 00 000000 01000000 6e000000", false},
		{"json array to flat_buffer: its JSON as the root string", fbTable("json", "flat_buffer", fbOpts), js(`[1, "x"]`),
			"flat_buffer 04000000 07000000 5b312c2278225d00", false},
		{"json scalar to flat_buffer", fbTable("json", "flat_buffer", fbOpts), js(`"x"`),
			"flat_buffer 04000000 03000000 22782200", false},
		{"empty object: an empty vector", fbTable("json", "flat_buffer", fbOpts), js(`{}`),
			"flat_buffer 04000000 00000000", false},
		{"json to flat_buffer, text payload", fbTable("json", "flat_buffer", fbOpts), raw(sdk.SchemaText, 'x'),
			"want a json payload, got text", true},
		{"flat_buffer to json", fbTable("flat_buffer", "json", fbOpts), raw(sdk.SchemaFlatBuffer, 1, 2, 3, 4),
			`json {"buffer_size":4,"has_root_table":true,"raw_data_base64":"AQIDBA=="}`, false},
		{"flat_buffer to json, root_table_name and field_mappings", fbTable("flat_buffer", "json", fbOpts+"root_table_name = \"Monster\"\nfield_mappings = { raw_data_base64 = \"data\" }\n"),
			raw(sdk.SchemaFlatBuffer, 1, 2, 3, 4), `json {"buffer_size":4,"has_root_table":true,"root_table_type":"Monster","data":"AQIDBA=="}`, false},
		{"flat_buffer to json, short buffer verified", fbTable("flat_buffer", "json", fbOpts), raw(sdk.SchemaFlatBuffer, 1, 2, 3),
			"3 bytes, a FlatBuffer has at least 4 (verify_buffers)", true},
		{"flat_buffer to json, short buffer unverified", fbTable("flat_buffer", "json", strings.Replace(fbOpts, "verify_buffers = true", "verify_buffers = false", 1)),
			raw(sdk.SchemaFlatBuffer, 1, 2, 3), `json {"buffer_size":3,"has_root_table":true,"raw_data_base64":"AQID"}`, false},
		{"flat_buffer to json, empty", fbTable("flat_buffer", "json", strings.Replace(fbOpts, "verify_buffers = true", "verify_buffers = false", 1)),
			raw(sdk.SchemaFlatBuffer), "empty flat_buffer payload", true},
		{"flat_buffer to json, json payload", fbTable("flat_buffer", "json", fbOpts), js(`{}`), "want a flat_buffer payload, got json", true},
		{"flat_buffer to text", fbTable("flat_buffer", "text", fbOpts), raw(sdk.SchemaFlatBuffer, 1, 2, 3, 4, 5), "text 415149444241553d", false},
		{"flat_buffer to raw", fbTable("flat_buffer", "raw", fbOpts), raw(sdk.SchemaFlatBuffer, 1, 2, 3, 4, 5), "raw 0102030405", false},
		{"flat_buffer to raw, raw payload", fbTable("flat_buffer", "raw", fbOpts), raw(sdk.SchemaRaw, 1), "want a flat_buffer payload, got raw", true},
		{"same format passes", fbTable("flat_buffer", "flat_buffer", fbOpts), raw(sdk.SchemaFlatBuffer, 9), "flat_buffer 09", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(specsFromTOML(t, tt.doc, "flat_buffer_convert"))
			if err != nil {
				t.Fatal(err)
			}
			var a fastjson.Arena
			got, err := c.ApplyPayload(tt.in(t), &a)
			if tt.wantErr {
				if err == nil || err.Error() != "transform flat_buffer_convert: "+tt.want {
					t.Fatalf("got %v, %v; want the error %q", render(got), err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := render(got)
			if got.Format != sdk.SchemaJSON {
				r = fmt.Sprintf("%s %x", got.Format, got.Bytes)
			}
			if got.Format == sdk.SchemaJSON && r != tt.want || got.Format != sdk.SchemaJSON && strings.ReplaceAll(r, " ", "") != strings.ReplaceAll(tt.want, " ", "") {
				t.Fatalf("got  %s\nwant %s", r, tt.want)
			}
		})
	}
}

func TestFlatBufferConvertConfigErrors(t *testing.T) {
	head := "[transforms.flat_buffer_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"flat_buffer\"\n"
	tests := []struct{ name, doc, want string }{
		{"unsupported pair", fbTable("json", "avro", fbOpts),
			"transforms.flat_buffer_convert.target_format: invalid transform: unsupported FlatBuffer conversion: json → avro"},
		{"source_format missing", "[transforms.flat_buffer_convert]\nenabled = true\ntarget_format = \"json\"\n",
			"transforms.flat_buffer_convert.source_format: invalid transform: required key missing"},
		{"include_paths missing", head + "preserve_unknown_fields = false\n" + fbOpts,
			"transforms.flat_buffer_convert.include_paths: invalid transform: required key missing"},
		{"include_paths element", head + "include_paths = [1]\npreserve_unknown_fields = false\n" + fbOpts,
			"transforms.flat_buffer_convert.include_paths[0]: invalid transform: want a string, got an integer"},
		{"preserve_unknown_fields missing", head + "include_paths = []\n" + fbOpts,
			"transforms.flat_buffer_convert.preserve_unknown_fields: invalid transform: required key missing"},
		{"preserve_unknown_fields not a boolean", head + "include_paths = []\npreserve_unknown_fields = \"no\"\n" + fbOpts,
			"transforms.flat_buffer_convert.preserve_unknown_fields: invalid transform: want true or false, got a string"},
		{"conversion_options missing", fbTable("json", "flat_buffer", ""),
			"transforms.flat_buffer_convert.conversion_options: invalid transform: required key missing"},
		{"buffer_size_hint missing", fbTable("json", "flat_buffer", strings.Replace(fbOpts, "buffer_size_hint = 1024, ", "", 1)),
			"transforms.flat_buffer_convert.conversion_options.buffer_size_hint: invalid transform: required key missing"},
		{"buffer_size_hint negative", fbTable("json", "flat_buffer", strings.Replace(fbOpts, "1024", "-1", 1)),
			"transforms.flat_buffer_convert.conversion_options.buffer_size_hint: invalid transform: want a non-negative integer, got an integer"},
		{"verify_buffers missing", fbTable("json", "flat_buffer", strings.Replace(fbOpts, "verify_buffers = true, ", "", 1)),
			"transforms.flat_buffer_convert.conversion_options.verify_buffers: invalid transform: required key missing"},
		{"root_table_name not a string", fbTable("json", "flat_buffer", fbOpts+"root_table_name = 1\n"),
			"transforms.flat_buffer_convert.root_table_name: invalid transform: want a string, got an integer"},
		{"unknown key", fbTable("json", "flat_buffer", fbOpts+"schema_json = \"x\"\n"),
			"transforms.flat_buffer_convert.schema_json: invalid transform: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(specsFromTOML(t, tt.doc, "flat_buffer_convert"))
			if err == nil || !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %v, want prefix %q", err, tt.want)
			}
		})
	}
	if _, err := Build(specsFromTOML(t, fbTable("flat_buffer", "text", fbOpts+"schema_path = \"monster.fbs\"\n"), "flat_buffer_convert")); err != nil {
		t.Fatalf("schema_path (accepted, unused as upstream): %v", err)
	}
}

// TestFlatBufferConvertReusesBuilder: the builder is reused message to message; a small
// buffer after a larger one is still exactly its own bytes (padding zeroed).
func TestFlatBufferConvertReusesBuilder(t *testing.T) {
	c, err := Build(specsFromTOML(t, fbTable("json", "flat_buffer", strings.Replace(fbOpts, "1024", "8", 1)), "flat_buffer_convert"))
	if err != nil {
		t.Fatal(err)
	}
	var a fastjson.Arena
	var first []byte
	for i, in := range []string{`{"a":1}`, `{"long key ÿ":"` + strings.Repeat("v", 101) + `"}`, `{"a":1}`} {
		got, err := c.ApplyPayload(jsonPayload(t, in), &a)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = got.Bytes
		}
		if i == 2 && fmt.Sprintf("%x", got.Bytes) != "0400000002000000080000001000000001000000310000000100000061000000" {
			t.Fatalf("after a larger buffer: %x", got.Bytes)
		}
	}
	if fmt.Sprintf("%x", first) != "0400000002000000080000001000000001000000310000000100000061000000" {
		t.Fatalf("first buffer changed by later ones: %x", first)
	}
}
