package transform

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/sdk"
)

const protoOpts = "conversion_options = { validate_messages = true, pretty_json = false, include_metadata = false, type_url_prefix = \"type.googleapis.com\", strict_mode = false }\n"

func protoTable(from, to, opts, extra string) string {
	return "[transforms.proto_convert]\nenabled = true\nsource_format = \"" + from + "\"\ntarget_format = \"" + to + "\"\n" +
		"include_paths = [\".\"]\npreserve_unknown_fields = false\n" + opts + extra
}

// anyTX is a google.protobuf.Any: type_url "t/x" (field 1), value {1, 2} (field 2).
var anyTX = []byte{0x0a, 0x03, 't', '/', 'x', 0x12, 0x02, 0x01, 0x02}

func TestProtoConvert(t *testing.T) {
	fixClock(t)
	ms := now().UnixMilli()
	withMeta := strings.Replace(protoOpts, "include_metadata = false", "include_metadata = true", 1)
	pretty := strings.Replace(protoOpts, "pretty_json = false", "pretty_json = true", 1)
	raw := func(f sdk.Schema, b ...byte) func(testing.TB) Payload {
		return func(testing.TB) Payload { return Payload{Format: f, Bytes: b} }
	}
	str := func(f sdk.Schema, s string) func(testing.TB) Payload { return raw(f, []byte(s)...) }
	js := func(s string) func(testing.TB) Payload {
		return func(t testing.TB) Payload { return jsonPayload(t, s) }
	}
	tests := []struct {
		name, doc string
		in        func(t testing.TB) Payload
		want      string // render(payload), or the error after "transform proto_convert: "
		wantErr   bool
	}{
		{"proto to json: a raw Any", protoTable("proto", "json", protoOpts, ""), raw(sdk.SchemaRaw, anyTX...),
			`json {"type_url":"t/x","value":"AQI="}`, false},
		{"proto to json: a raw Any with metadata", protoTable("proto", "json", withMeta, ""), raw(sdk.SchemaRaw, anyTX...),
			fmt.Sprintf(`json {"type_url":"t/x","value":"AQI=","metadata":{"converted_from":"protobuf_any","timestamp":%d}}`, ms), false},
		{"proto to json: raw bytes not an Any", protoTable("proto", "json", protoOpts, ""), raw(sdk.SchemaRaw, 0xff),
			`json {"binary_data":"/w==","format":"raw_binary"}`, false},
		{"proto to json: proto text that is JSON", protoTable("proto", "json", protoOpts, ""), str(sdk.SchemaProto, ` {"a" : 1}`),
			`json {"a":1}`, false},
		{"proto to json: with metadata and message_type", protoTable("proto", "json", withMeta, "message_type = \"pkg.Msg\"\n"), str(sdk.SchemaProto, `{"a":1}`),
			fmt.Sprintf(`json {"data":{"a":1},"metadata":{"converted_from":"protobuf","timestamp":%d,"message_type":"pkg.Msg"}}`, ms), false},
		{"proto to json: metadata without message_type", protoTable("proto", "json", withMeta, ""), str(sdk.SchemaProto, `[]`),
			fmt.Sprintf(`json {"data":[],"metadata":{"converted_from":"protobuf","timestamp":%d,"message_type":"unknown"}}`, ms), false},
		{"proto to json: proto text not JSON", protoTable("proto", "json", protoOpts, ""), str(sdk.SchemaProto, `x: 1`),
			`json {"proto_text":"x: 1","format":"text"}`, false},
		{"proto to json: a json payload (a proto stream's sink)", protoTable("proto", "json", protoOpts, ""), js(`{"type_url":"t/x","value":"AQI="}`),
			"want a proto or raw payload, got json", true},
		{"proto to text: a raw Any", protoTable("proto", "text", protoOpts, ""), raw(sdk.SchemaRaw, anyTX...),
			"text Type: t/x\nData: 2 bytes\nBase64: AQI=", false},
		{"proto to text: raw bytes not an Any", protoTable("proto", "text", protoOpts, ""), raw(sdk.SchemaRaw, 0xff),
			"text Binary protobuf data: 1 bytes\nBase64: /w==", false},
		{"proto to text: proto text", protoTable("proto", "text", protoOpts, ""), str(sdk.SchemaProto, "x: 1"), "text x: 1", false},
		{"proto to raw", protoTable("proto", "raw", protoOpts, ""), str(sdk.SchemaProto, "x: 1"), "raw x: 1", false},
		{"proto to avro: raw bytes", protoTable("proto", "avro", protoOpts, ""), raw(sdk.SchemaRaw, 1, 2), "avro \x01\x02", false},
		{"proto to flat_buffer: text payload", protoTable("proto", "flat_buffer", protoOpts, ""), str(sdk.SchemaText, "x"),
			"want a proto or raw payload, got text", true},
		{"json to proto, keys renamed", protoTable("json", "proto", protoOpts, "field_mappings = { b = \"c\" }\n"), js(`{"b": 1.50, "d": [true]}`),
			`proto {"c":1.50,"d":[true]}`, false},
		{"json to proto, pretty", protoTable("json", "proto", pretty, ""), js(`{"b":1,"d":[]}`),
			"proto {\n  \"b\": 1,\n  \"d\": []\n}", false},
		{"json to proto, text payload", protoTable("json", "proto", protoOpts, ""), str(sdk.SchemaText, "{}"), "want a json payload, got text", true},
		{"text to proto: JSON text re-written", protoTable("text", "proto", protoOpts, ""), str(sdk.SchemaText, ` { "a" : 1 } `), `proto {"a":1}`, false},
		{"text to proto: other text as is", protoTable("text", "proto", protoOpts, ""), str(sdk.SchemaText, "a: 1"), "proto a: 1", false},
		{"raw to proto: UTF-8 as is", protoTable("raw", "proto", protoOpts, ""), str(sdk.SchemaRaw, "hé"), "proto hé", false},
		{"raw to proto: binary as base64 text", protoTable("raw", "proto", protoOpts, ""), raw(sdk.SchemaRaw, 0xff), `proto binary_data: "/w=="`, false},
		{"avro to proto: avro bytes", protoTable("avro", "proto", protoOpts, ""), str(sdk.SchemaAvro, "a"), "proto a", false},
		{"avro to proto: raw payload", protoTable("avro", "proto", protoOpts, ""), str(sdk.SchemaRaw, "a"), "want an avro payload, got raw", true},
		{"json to text", protoTable("json", "text", protoOpts, ""), js(`{ "a" : 1 }`), `text {"a":1}`, false},
		{"json to raw", protoTable("json", "raw", protoOpts, ""), js(`[1, 2]`), `raw [1,2]`, false},
		{"text to json", protoTable("text", "json", protoOpts, ""), str(sdk.SchemaText, `{"a":1}`), `json {"a":1}`, false},
		{"raw to json, not JSON", protoTable("raw", "json", protoOpts, ""), str(sdk.SchemaRaw, `{"a":`), "raw payload is not JSON: ", true},
		{"same format", protoTable("proto", "proto", protoOpts, ""), str(sdk.SchemaProto, "x"), "proto x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(specsFromTOML(t, tt.doc, "proto_convert"))
			if err != nil {
				t.Fatal(err)
			}
			checkProtoApply(t, c, tt.in(t), tt.want, tt.wantErr)
		})
	}
}

func TestProtoConvertConfigErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"pair not converted", protoTable("json", "avro", protoOpts, ""),
			"transforms.proto_convert.target_format: invalid transform: proto_convert does not convert json to avro"},
		{"target_format missing", "[transforms.proto_convert]\nenabled = true\nsource_format = \"json\"\n",
			"transforms.proto_convert.target_format: invalid transform: required key missing"},
		{"include_paths missing", "[transforms.proto_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"proto\"\npreserve_unknown_fields = false\n" + protoOpts,
			"transforms.proto_convert.include_paths: invalid transform: required key missing"},
		{"preserve_unknown_fields missing", "[transforms.proto_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"proto\"\ninclude_paths = []\n" + protoOpts,
			"transforms.proto_convert.preserve_unknown_fields: invalid transform: required key missing"},
		{"type_url_prefix missing", protoTable("json", "proto", strings.Replace(protoOpts, `, type_url_prefix = "type.googleapis.com"`, "", 1), ""),
			"transforms.proto_convert.conversion_options.type_url_prefix: invalid transform: required key missing"},
		{"type_url_prefix not a string", protoTable("json", "proto", strings.Replace(protoOpts, `"type.googleapis.com"`, "1", 1), ""),
			"transforms.proto_convert.conversion_options.type_url_prefix: invalid transform: want a string, got an integer"},
		{"validate_messages missing", protoTable("json", "proto", strings.Replace(protoOpts, "validate_messages = true, ", "", 1), ""),
			"transforms.proto_convert.conversion_options.validate_messages: invalid transform: required key missing"},
		{"message_type not a string", protoTable("json", "proto", protoOpts, "message_type = 1\n"),
			"transforms.proto_convert.message_type: invalid transform: want a string, got an integer"},
		{"unknown key", protoTable("json", "proto", protoOpts, "schema_json = \"x\"\n"),
			"transforms.proto_convert.schema_json: invalid transform: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(specsFromTOML(t, tt.doc, "proto_convert"))
			if err == nil || !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %v, want prefix %q", err, tt.want)
			}
		})
	}
	if _, err := Build(specsFromTOML(t, protoTable("json", "proto", protoOpts, "schema_registry_url = \"http://r\"\n"), "proto_convert")); err != nil {
		t.Fatalf("schema_registry_url (read, unused as upstream): %v", err)
	}
}

// checkProtoApply applies c to in: with wantErr the error must start with
// "transform proto_convert: " + want, else the rendered result must be want.
func checkProtoApply(t *testing.T, c *Chain, in Payload, want string, wantErr bool) {
	t.Helper()
	var a fastjson.Arena
	got, err := c.ApplyPayload(in, &a)
	if wantErr {
		if err == nil || !strings.HasPrefix(err.Error(), "transform proto_convert: "+want) {
			t.Fatalf("got %q, %v; want the error %q", render(got), err, want)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if r := render(got); r != want {
		t.Fatalf("got  %q\nwant %q", r, want)
	}
}
