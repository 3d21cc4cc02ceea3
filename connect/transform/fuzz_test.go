package transform

import (
	"encoding/hex"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connect/schema"
	"github.com/ferryio/ferry/sdk"
)

// FuzzBuild feeds arbitrary transform tables to Build. Invariants: Build never panics; a
// chain it accepts applies to any JSON payload without panicking and writes valid JSON;
// ApplyPayload runs it on the payload as raw, text, avro, flat_buffer and proto bytes without panicking,
// and what comes out as json is valid JSON.
func FuzzBuild(f *testing.F) {
	f.Add("[transforms.add_fields]\nenabled = true\nfields = [{ key = \"a\", value.static = 1 }]", `{"a":0,"b":[1]}`)
	f.Add("[transforms.filter_fields]\nenabled = true\nkeep_fields = [\"a\"]\npatterns = [{ key_pattern = { regex = \"b+\" }, value_pattern = { between = [1, 2.5] } }]", `{"a":1,"bb":2}`)
	f.Add("[transforms.unwrap_envelope]\nenabled = true\nfield = \"p\"", `{"p":"x"}`)
	f.Add("[transforms.update_fields]\nenabled = true\nfields = [{ key = \"u\", value.computed = \"uuid_v7\", condition = \"key_exists\" }]", `{"u":null}`)
	f.Add("[transforms.delete_fields]\nenabled = true\nfields = [\"a\"]", `"s"`)
	const opts = "conversion_options = { pretty_json = false, include_metadata = false, strict_mode = false }\n"
	const user = `schema_json = '{"type":"record","name":"U","fields":[{"name":"n","type":"string"},{"name":"a","type":["null","int"]}]}'` + "\n"
	for _, pair := range [][2]string{{"json", "avro"}, {"text", "avro"}, {"avro", "json"}, {"avro", "text"}, {"avro", "raw"}, {"raw", "avro"}} {
		f.Add("[transforms.avro_convert]\nenabled = true\nsource_format = \""+pair[0]+"\"\ntarget_format = \""+pair[1]+"\"\n"+opts+user+"field_mappings = { x = \"n\" }", `{"x":"v","a":{"int":3}}`)
	}
	const fbOpts = "include_paths = []\npreserve_unknown_fields = false\nconversion_options = { verify_buffers = true, pretty_json = false, include_metadata = false, buffer_size_hint = 8, strict_mode = false }\n"
	for _, pair := range [][2]string{{"json", "flat_buffer"}, {"flat_buffer", "json"}, {"flat_buffer", "text"}, {"flat_buffer", "raw"}} {
		f.Add("[transforms.flat_buffer_convert]\nenabled = true\nsource_format = \""+pair[0]+"\"\ntarget_format = \""+pair[1]+"\"\n"+fbOpts+"root_table_name = \"R\"\nfield_mappings = { a = \"b\" }", `{"a":[1,{"c":"\u0000"}],"d":"e"}`)
	}
	const protoOpts = "include_paths = []\npreserve_unknown_fields = false\nconversion_options = { validate_messages = true, pretty_json = true, include_metadata = true, type_url_prefix = \"p\", strict_mode = false }\n"
	for _, pair := range [][2]string{{"proto", "json"}, {"proto", "text"}, {"proto", "raw"}, {"json", "proto"}, {"text", "proto"}, {"raw", "proto"}, {"text", "json"}, {"raw", "json"}} {
		f.Add("[transforms.proto_convert]\nenabled = true\nsource_format = \""+pair[0]+"\"\ntarget_format = \""+pair[1]+"\"\n"+protoOpts+"field_mappings = { a = \"b\" }", "\n\x03t/x\x12\x02\x01\x02")
	}
	// With a schema (proto_schema_test.go's shop.Order): JSON to binary and back.
	const schemaOpts = "include_paths = [\"testdata/proto\"]\npreserve_unknown_fields = false\nconversion_options = { validate_messages = true, pretty_json = false, include_metadata = true, type_url_prefix = \"p\", strict_mode = false }\n" +
		"schema_path = \"testdata/proto/shop/order.proto\"\nmessage_type = \"shop.Order\"\n"
	bin, _ := hex.DecodeString(orderHex)
	for _, seed := range [][3]string{{"json", "proto", orderJSON}, {"text", "proto", orderJSON}, {"proto", "json", string(bin)}} {
		f.Add("[transforms.proto_convert]\nenabled = true\nsource_format = \""+seed[0]+"\"\ntarget_format = \""+seed[1]+"\"\n"+schemaOpts+"field_mappings = { a = \"id\" }", seed[2])
	}
	f.Add("[transforms.proto_convert]\nenabled = true\nsource_format = \"proto\"\ntarget_format = \"json\"\n"+protoOpts+"message_type = \"shop.Order\"\ndescriptor_set = [10, 3, 97, 46, 112]", "\x08\x01")
	f.Fuzz(func(t *testing.T, doc, payload string) {
		var m struct {
			Transforms map[string]any `toml:"transforms"`
		}
		if toml.Unmarshal([]byte(doc), &m) != nil {
			return
		}
		var specs []Spec
		for typ, v := range m.Transforms {
			tbl, ok := v.(map[string]any)
			if !ok {
				return
			}
			en, _ := tbl["enabled"].(bool)
			specs = append(specs, Spec{Type: typ, Enabled: en, Table: tbl})
		}
		c, err := Build(specs)
		if err != nil {
			return
		}
		var a fastjson.Arena
		for _, f := range []sdk.Schema{sdk.SchemaRaw, sdk.SchemaText, sdk.SchemaAvro, sdk.SchemaFlatBuffer, sdk.SchemaProto} {
			p, err := c.ApplyPayload(Payload{Format: f, Bytes: []byte(payload)}, &a)
			if err == nil && p.Format == sdk.SchemaJSON {
				if out := schema.AppendJSON(nil, p.JSON); fastjson.ValidateBytes(out) != nil {
					t.Fatalf("%s payload: output %q is not JSON", f, out)
				}
			}
		}
		d, _ := schema.NewDecoder(sdk.SchemaJSON, "")
		v, err := d.Decode([]byte(payload))
		if err != nil {
			return
		}
		v, err = c.Apply(v, &a)
		if err != nil {
			return
		}
		out := schema.AppendJSON(nil, v)
		if err := fastjson.ValidateBytes(out); err != nil {
			t.Fatalf("output %q is not JSON: %v", out, err)
		}
	})
}
