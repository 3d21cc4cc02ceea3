package connect

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

const convUserSchema = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}`

// transformsOf reads one [transforms.<typ>] table of doc as the connector-file parser
// hands it to the runtime.
func transformsOf(t *testing.T, doc, typ string) []config.Transform {
	t.Helper()
	var m struct {
		Transforms map[string]map[string]any `toml:"transforms"`
	}
	if err := toml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return []config.Transform{{Type: typ, Enabled: true, Config: m.Transforms[typ]}}
}

func avroConvertDoc(from, to string) string {
	return fmt.Sprintf("[transforms.avro_convert]\nenabled = true\nsource_format = %q\ntarget_format = %q\nschema_json = '%s'\n"+
		"conversion_options = { pretty_json = false, include_metadata = false, strict_mode = false }\n", from, to, convUserSchema)
}

// TestSinkAvroConvert: on a json stream, avro_convert json → avro hands the sink the Avro
// datum's bytes; a message the schema refuses is poison at stage transform, its dead
// letter carrying ferry-stage = transform and the payload as polled.
func TestSinkAvroConvert(t *testing.T) {
	pipe, err := newPayloadPipeline(sdk.SchemaJSON, "", transformsOf(t, avroConvertDoc("json", "avro"), "avro_convert"))
	if err != nil {
		t.Fatal(err)
	}
	c := converter{pipe: pipe}
	var counters Counters
	out := c.convert([]wire.Message{
		{Offset: 10, Payload: []byte(`{"name":"Bob","age":25}`)},
		{Offset: 11, Payload: []byte(`{"name":"Bob"}`)},
		{Offset: 12, Payload: []byte(`{"age":30,"name":"Alice"}`)},
	}, &counters)
	if len(out) != 2 || out[0].Offset != 10 || fmt.Sprintf("%x", out[0].Payload) != "06426f6232" ||
		out[1].Offset != 12 || fmt.Sprintf("%x", out[1].Payload) != "0a416c6963653c" {
		t.Fatalf("converted %+v", out)
	}
	if len(c.poison) != 1 || c.poison[0].msg.Offset != 11 || c.poison[0].stage != stageTransform {
		t.Fatalf("poison %+v", c.poison)
	}
	const cause = `offset 11: transform: transform avro_convert: avro: cannot decode textual record "User": only found 1 of 2 fields`
	if got := c.poison[0].cause().Error(); got != cause {
		t.Fatalf("cause %q", got)
	}
	dl := deadLetters(poisonFailure(sdk.TopicMetadata{Stream: "s", Topic: "t"}, 0, c.poison[:1]))[0]
	hs := map[string]string{}
	for _, h := range dl.Headers {
		hs[string(h.Key.Value)] = string(h.Value.Value)
	}
	if hs[HeaderStage] != "transform" || hs[HeaderError] != cause || string(dl.Payload) != `{"name":"Bob"}` {
		t.Fatalf("dead letter %+v", hs)
	}
	if s := counters.Snapshot(); s.Decoded != 3 || s.TransformErrors != 1 || s.DecodeErrors != 0 {
		t.Fatalf("counters %+v", s)
	}
}

// TestSinkRawStreamConverts: a raw stream has no pipeline, except with a format
// conversion: raw → avro passes the bytes, avro → text meets a raw payload as upstream
// (raw bytes that are UTF-8 become text; others are poison).
func TestSinkRawStreamConverts(t *testing.T) {
	if p, err := newPayloadPipeline(sdk.SchemaRaw, "", nil); p != nil || err != nil {
		t.Fatalf("raw without transforms: %v, %v", p, err)
	}
	pipe, err := newPayloadPipeline(sdk.SchemaRaw, "", transformsOf(t, avroConvertDoc("avro", "text"), "avro_convert"))
	if err != nil || pipe == nil {
		t.Fatalf("raw with avro_convert: %v, %v", pipe, err)
	}
	c := converter{pipe: pipe}
	var counters Counters
	out := c.convert([]wire.Message{{Offset: 1, Payload: []byte("hé")}, {Offset: 2, Payload: []byte{0xff}}}, &counters)
	if len(out) != 1 || string(out[0].Payload) != "hé" || len(c.poison) != 1 || c.poison[0].msg.Offset != 2 ||
		c.poison[0].err.Error() != "transform avro_convert: raw payload is not UTF-8 text" {
		t.Fatalf("out %+v poison %+v", out, c.poison)
	}
}

// TestSinkAvroStreamAvroConvert: on an avro stream the decoder has already turned the
// datum into JSON, so avro_convert avro → json meets a JSON payload and fails (upstream
// alike); json → text is a pair upstream passes unchanged.
func TestSinkAvroStreamAvroConvert(t *testing.T) {
	pipe, err := newPayloadPipeline(sdk.SchemaAvro, convUserSchema, transformsOf(t, avroConvertDoc("avro", "json"), "avro_convert"))
	if err != nil {
		t.Fatal(err)
	}
	c := converter{pipe: pipe}
	var counters Counters
	out := c.convert([]wire.Message{{Offset: 5, Payload: []byte{0x0a, 'A', 'l', 'i', 'c', 'e', 0x3c}}}, &counters)
	if len(out) != 0 || len(c.poison) != 1 || c.poison[0].stage != stageTransform ||
		c.poison[0].err.Error() != "transform avro_convert: want an avro payload, got json" {
		t.Fatalf("out %+v poison %+v", out, c.poison)
	}
}

// TestSourceAvroConvert: a source producing avro into a json stream, with avro_convert
// avro → json: the datum reaches Iggy as its JSON; a datum that does not decode is rejected
// at stage transform. Producing json into an avro stream with json → avro sends the datum.
func TestSourceAvroConvert(t *testing.T) {
	p := sourcePipelineWith(t, avroConvertDoc("avro", "json"), "avro_convert", sdk.SchemaJSON, "")
	sent, bad := p.encode(sdk.SourceBatch{Schema: sdk.SchemaAvro, Messages: []sdk.ProducedMessage{
		{Payload: []byte{0x0a, 'A', 'l', 'i', 'c', 'e', 0x3c}},
		{Payload: []byte{0x0a, 'A'}},
	}})
	if len(sent) != 1 || string(sent[0].Payload) != `{"name":"Alice","age":30}` {
		t.Fatalf("sent %+v", sent)
	}
	if len(bad) != 1 || bad[0].stage != "transform" || !strings.HasPrefix(bad[0].err.Error(), "message 1: transform: transform avro_convert: avro: ") {
		t.Fatalf("bad %+v", bad)
	}

	p = sourcePipelineWith(t, avroConvertDoc("json", "avro"), "avro_convert", sdk.SchemaAvro, convUserSchema)
	sent, bad = p.encode(sdk.SourceBatch{Schema: sdk.SchemaJSON, Messages: []sdk.ProducedMessage{
		{Payload: []byte(`{"name":"Bob","age":25}`)},
		{Payload: []byte(`{"name":`)},
	}})
	if len(sent) != 1 || fmt.Sprintf("%x", sent[0].Payload) != "06426f6232" {
		t.Fatalf("sent %+v", sent)
	}
	if len(bad) != 1 || bad[0].stage != "encode" || !strings.HasPrefix(bad[0].err.Error(), "message 1: encode: json: ") {
		t.Fatalf("bad %+v", bad)
	}
}

const fbConvertOpts = "include_paths = [\".\"]\npreserve_unknown_fields = false\n" +
	"conversion_options = { verify_buffers = true, pretty_json = false, include_metadata = false, buffer_size_hint = 64, strict_mode = false }\n"

// TestSinkFlatBufferConvert: on a json stream, flat_buffer_convert json → flat_buffer hands
// the sink the FlatBuffer's bytes; a payload that is not an object is its JSON as the root
// string.
func TestSinkFlatBufferConvert(t *testing.T) {
	doc := "[transforms.flat_buffer_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"flat_buffer\"\n" + fbConvertOpts
	pipe, err := newPayloadPipeline(sdk.SchemaJSON, "", transformsOf(t, doc, "flat_buffer_convert"))
	if err != nil {
		t.Fatal(err)
	}
	c := converter{pipe: pipe}
	var counters Counters
	out := c.convert([]wire.Message{{Offset: 1, Payload: []byte(`{"a":1}`)}, {Offset: 2, Payload: []byte(`[1, "x"]`)}}, &counters)
	if len(out) != 2 || len(c.poison) != 0 ||
		fmt.Sprintf("%x", out[0].Payload) != "0400000002000000080000001000000001000000310000000100000061000000" ||
		fmt.Sprintf("%x", out[1].Payload) != "04000000070000005b312c2278225d00" {
		t.Fatalf("out %+v poison %+v", out, c.poison)
	}
}

// TestSourceFlatBufferConvert: a source producing flat_buffer into a json stream with
// flat_buffer_convert flat_buffer → json sends upstream's summary; a 2-byte buffer is
// rejected at stage transform.
func TestSourceFlatBufferConvert(t *testing.T) {
	doc := "[transforms.flat_buffer_convert]\nenabled = true\nsource_format = \"flat_buffer\"\ntarget_format = \"json\"\n" + fbConvertOpts
	p := sourcePipelineWith(t, doc, "flat_buffer_convert", sdk.SchemaJSON, "")
	sent, bad := p.encode(sdk.SourceBatch{Schema: sdk.SchemaFlatBuffer, Messages: []sdk.ProducedMessage{
		{Payload: []byte{1, 2, 3, 4}}, {Payload: []byte{1, 2}},
	}})
	if len(sent) != 1 || string(sent[0].Payload) != `{"buffer_size":4,"has_root_table":true,"raw_data_base64":"AQIDBA=="}` {
		t.Fatalf("sent %+v", sent)
	}
	if len(bad) != 1 || bad[0].stage != "transform" ||
		bad[0].err.Error() != "message 1: transform: transform flat_buffer_convert: 2 bytes, a FlatBuffer has at least 4 (verify_buffers)" {
		t.Fatalf("bad %+v", bad)
	}
}

const protoConvertOpts = "include_paths = []\npreserve_unknown_fields = false\n" +
	"conversion_options = { validate_messages = true, pretty_json = false, include_metadata = false, type_url_prefix = \"type.googleapis.com\", strict_mode = false }\n"

// TestProtoConvertPipelines: a source producing raw protobuf Any bytes into a json stream,
// with proto_convert proto → json, sends the Any's JSON; on a proto stream's sink the
// decoder has already made that JSON, so proto → json fails there (upstream alike) and
// json → proto hands the sink the JSON text.
func TestProtoConvertPipelines(t *testing.T) {
	doc := "[transforms.proto_convert]\nenabled = true\nsource_format = \"proto\"\ntarget_format = \"json\"\n" + protoConvertOpts
	p := sourcePipelineWith(t, doc, "proto_convert", sdk.SchemaJSON, "")
	anyTX := []byte{0x0a, 0x03, 't', '/', 'x', 0x12, 0x02, 0x01, 0x02}
	sent, bad := p.encode(sdk.SourceBatch{Schema: sdk.SchemaRaw, Messages: []sdk.ProducedMessage{{Payload: anyTX}}})
	if len(bad) != 0 || len(sent) != 1 || string(sent[0].Payload) != `{"type_url":"t/x","value":"AQI="}` {
		t.Fatalf("sent %+v bad %+v", sent, bad)
	}

	pipe, err := newPayloadPipeline(sdk.SchemaProto, "", transformsOf(t, doc, "proto_convert"))
	if err != nil {
		t.Fatal(err)
	}
	c := converter{pipe: pipe}
	var counters Counters
	if out := c.convert([]wire.Message{{Offset: 3, Payload: anyTX}}, &counters); len(out) != 0 || len(c.poison) != 1 ||
		c.poison[0].err.Error() != "transform proto_convert: want a proto or raw payload, got json" {
		t.Fatalf("out %+v poison %+v", out, c.poison)
	}
	doc = "[transforms.proto_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"proto\"\n" + protoConvertOpts
	if pipe, err = newPayloadPipeline(sdk.SchemaProto, "", transformsOf(t, doc, "proto_convert")); err != nil {
		t.Fatal(err)
	}
	c = converter{pipe: pipe}
	if out := c.convert([]wire.Message{{Offset: 4, Payload: anyTX}}, &counters); len(out) != 1 || len(c.poison) != 0 ||
		string(out[0].Payload) != `{"type_url":"t/x","value":"AQI="}` {
		t.Fatalf("out %+v poison %+v", out, c.poison)
	}
}

// TestProtoConvertSchemaPipelines: with a schema, a json stream's sink running
// proto_convert json → proto gets the message's binary form, and JSON that does not fit is
// poison at stage transform; a source producing that binary as raw bytes into a json
// stream, with proto → json, sends the message's JSON.
func TestProtoConvertSchemaPipelines(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.proto"), []byte("syntax = \"proto3\";\npackage p;\nmessage M { int64 id = 1; string name = 2; }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := fmt.Sprintf("include_paths = [%q]\npreserve_unknown_fields = false\nschema_path = %q\nmessage_type = \"p.M\"\n", dir, filepath.Join(dir, "m.proto")) +
		"conversion_options = { validate_messages = true, pretty_json = false, include_metadata = false, type_url_prefix = \"type.googleapis.com\", strict_mode = false }\n"
	doc := "[transforms.proto_convert]\nenabled = true\nsource_format = \"json\"\ntarget_format = \"proto\"\n" + keys
	pipe, err := newPayloadPipeline(sdk.SchemaJSON, "", transformsOf(t, doc, "proto_convert"))
	if err != nil {
		t.Fatal(err)
	}
	c := converter{pipe: pipe}
	var counters Counters
	out := c.convert([]wire.Message{
		{Offset: 5, Payload: []byte(`{"id":7,"name":"Ann"}`)},
		{Offset: 6, Payload: []byte(`{"id":"x"}`)},
	}, &counters)
	if len(out) != 1 || out[0].Offset != 5 || fmt.Sprintf("%x", out[0].Payload) != "08071203416e6e" {
		t.Fatalf("converted %+v", out)
	}
	if len(c.poison) != 1 || c.poison[0].msg.Offset != 6 || c.poison[0].stage != stageTransform ||
		!strings.HasPrefix(c.poison[0].err.Error(), "transform proto_convert: json payload is not a p.M: ") {
		t.Fatalf("poison %+v", c.poison)
	}

	doc = "[transforms.proto_convert]\nenabled = true\nsource_format = \"proto\"\ntarget_format = \"json\"\n" + keys
	p := sourcePipelineWith(t, doc, "proto_convert", sdk.SchemaJSON, "")
	sent, bad := p.encode(sdk.SourceBatch{Schema: sdk.SchemaRaw, Messages: []sdk.ProducedMessage{{Payload: []byte{0x08, 0x07, 0x12, 0x03, 'A', 'n', 'n'}}}})
	if len(bad) != 0 || len(sent) != 1 || string(sent[0].Payload) != `{"id":"7","name":"Ann"}` {
		t.Fatalf("sent %+v bad %+v", sent, bad)
	}
}

// sourcePipelineWith builds the source pipeline of a stream in schema to (avro: its Avro
// schema) with the one transform named name of the connector-file text doc.
func sourcePipelineWith(t *testing.T, doc, name string, to sdk.Schema, avro string) *sourcePipeline {
	t.Helper()
	chain, err := buildChain(transformsOf(t, doc, name))
	if err != nil {
		t.Fatal(err)
	}
	p, err := newSourcePipeline(to, avro, chain)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
