package transform

import (
	"strings"
	"testing"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/connect/schema"
	"github.com/ferryio/ferry/sdk"
)

// BenchmarkConvert runs each conversion on one small record per op, beside add_fields on
// the same JSON (the cost of a field transform) for the ratio.
func BenchmarkConvert(b *testing.B) {
	const rec = `{"name":"Alice","age":30}`
	cases := []struct {
		name, doc, typ string
		in             Payload
	}{
		{"add_fields", "[transforms.add_fields]\nenabled = true\nfields = [{ key = \"k\", value.static = 1 }]\n", "add_fields", Payload{}},
		{"avro_json_to_avro", avroTable("json", "avro", withSchema("")), "avro_convert", Payload{}},
		{"avro_avro_to_json", avroTable("avro", "json", withSchema("")), "avro_convert", Payload{Format: sdk.SchemaAvro, Bytes: alice30}},
		{"flat_buffer_json_to_flat_buffer", fbTable("json", "flat_buffer", fbOpts), "flat_buffer_convert", Payload{}},
		{"flat_buffer_to_json", fbTable("flat_buffer", "json", fbOpts), "flat_buffer_convert", Payload{Format: sdk.SchemaFlatBuffer, Bytes: alice30}},
		{"proto_json_to_proto", protoTable("json", "proto", protoOpts, ""), "proto_convert", Payload{}},
		{"proto_raw_any_to_json", protoTable("proto", "json", protoOpts, ""), "proto_convert", Payload{Format: sdk.SchemaRaw, Bytes: anyTX}},
		{"proto_schema_json_to_proto", userProto("json", "proto"), "proto_convert", Payload{}},
		{"proto_schema_raw_to_json", userProto("proto", "json"), "proto_convert", Payload{Format: sdk.SchemaRaw, Bytes: []byte("\x0a\x05Alice\x10\x1e")}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c, err := Build(specsFromTOML(b, tc.doc, tc.typ))
			if err != nil {
				b.Fatal(err)
			}
			var p fastjson.Parser
			var a fastjson.Arena
			var out []byte
			for b.Loop() {
				a.Reset()
				in := tc.in
				if in.Format == "" {
					v, _ := p.Parse(rec)
					in = Payload{Format: sdk.SchemaJSON, JSON: v}
				}
				got, err := c.ApplyPayload(in, &a)
				if err != nil {
					b.Fatal(err)
				}
				if got.Format == sdk.SchemaJSON {
					out = schema.AppendJSON(out[:0], got.JSON)
				} else {
					out = append(out[:0], got.Bytes...)
				}
			}
		})
	}
}

// userProto is proto_convert with testdata/proto/user.proto's User, the benchmark's record.
func userProto(from, to string) string {
	return strings.Replace(protoTable(from, to, protoOpts, "schema_path = \"testdata/proto/user.proto\"\nmessage_type = \"User\"\n"),
		"include_paths = [\".\"]", "include_paths = [\"testdata/proto\"]", 1)
}
