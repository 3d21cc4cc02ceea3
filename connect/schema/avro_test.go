package schema

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/linkedin/goavro/v2"

	"github.com/ferryio/ferry/sdk"
)

// testAvroSchema is a record with every kind the decoder's JSON shows differently.
const testAvroSchema = `{"type":"record","name":"Event","fields":[
 {"name":"id","type":"long"},
 {"name":"name","type":"string"},
 {"name":"score","type":"double"},
 {"name":"note","type":["null","string"]},
 {"name":"raw","type":"bytes"},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}}]}`

func fuzzAvroSchema(s sdk.Schema) string {
	if s == sdk.SchemaAvro {
		return testAvroSchema
	}
	return ""
}

func avroDatum(t testing.TB, native map[string]any) []byte {
	t.Helper()
	c, err := goavro.NewCodec(testAvroSchema)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.BinaryFromNative(nil, native)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeAvro(t *testing.T) {
	d, err := NewDecoder(sdk.SchemaAvro, testAvroSchema)
	if err != nil {
		t.Fatal(err)
	}
	datum := avroDatum(t, map[string]any{"id": int64(7), "name": "x<y", "score": 1.5,
		"note": goavro.Union("string", "hi"), "raw": []byte{0, 'a'}, "kind": "B"})
	v, err := d.Decode(datum)
	if err != nil {
		t.Fatal(err)
	}
	// Avro's JSON encoding, fields in schema order.
	if got, want := string(AppendJSON(nil, v)), `{"id":7,"name":"x<y","score":1.5,"note":{"string":"hi"},"raw":"\u0000a","kind":"B"}`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, err := d.Decode(append(datum, 0)); err == nil || !strings.HasPrefix(err.Error(), "avro: 1 trailing bytes after the datum") {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := d.Decode(datum[:3]); err == nil || !strings.HasPrefix(err.Error(), "avro:") {
		t.Fatalf("short datum: %v", err)
	}
	none, err := NewDecoder(sdk.SchemaAvro, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Decode(datum); !errors.Is(err, ErrNoAvroSchema) {
		t.Fatalf("no schema: %v", err)
	}
	if _, err := NewDecoder(sdk.SchemaAvro, `{"type":"recordx"}`); err == nil || !strings.HasPrefix(err.Error(), "avro schema:") {
		t.Fatalf("bad schema: %v", err)
	}
}

// TestEncodeAvro: a JSON value in Avro's JSON encoding becomes the binary datum; the
// decoder reads it back to the same JSON; avro bytes are checked and passed.
func TestEncodeAvro(t *testing.T) {
	e, err := NewEncoder(sdk.SchemaAvro, testAvroSchema)
	if err != nil {
		t.Fatal(err)
	}
	in := `{"id":7,"name":"n","score":2.25,"note":null,"raw":"ab","kind":"A"}`
	out, err := e.Encode(nil, sdk.SchemaJSON, nil, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := avroDatum(t, map[string]any{"id": int64(7), "name": "n", "score": 2.25, "note": nil, "raw": []byte("ab"), "kind": "A"})
	if string(out) != string(want) {
		t.Fatalf("datum %x, want %x", out, want)
	}
	d, _ := NewDecoder(sdk.SchemaAvro, testAvroSchema)
	v, err := d.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendJSON(nil, v)); got != in {
		t.Fatalf("round trip %s, want %s", got, in)
	}
	if got, err := e.Encode(nil, sdk.SchemaAvro, nil, want); err != nil || string(got) != string(want) {
		t.Fatalf("avro → avro: %x, %v", got, err)
	}
	if _, err := e.Encode(nil, sdk.SchemaAvro, nil, append(want, 1)); err == nil {
		t.Fatal("trailing byte accepted")
	}
	if _, err := e.Encode(nil, sdk.SchemaJSON, nil, []byte(`{"id":"x"}`)); err == nil || !strings.HasPrefix(err.Error(), "avro:") {
		t.Fatalf("wrong type: %v", err)
	}
	if _, err := e.Encode(nil, sdk.SchemaText, nil, []byte(`x`)); err == nil || err.Error() != "cannot convert a text payload to the stream's schema avro" {
		t.Fatalf("text: %v", err)
	}
	none, _ := NewEncoder(sdk.SchemaAvro, "")
	if _, err := none.Encode(nil, sdk.SchemaJSON, nil, []byte(in)); !errors.Is(err, ErrNoAvroSchema) {
		t.Fatalf("no schema: %v", err)
	}
}

func FuzzDecodeAvro(f *testing.F) {
	fuzzDecoder(f, sdk.SchemaAvro, avroDatum(f, map[string]any{"id": int64(-3), "name": "é", "score": 0.0,
		"note": nil, "raw": []byte{}, "kind": "A"}), []byte{0x02})
}

// TestDecodeAvroNested: nested and named records, a union of a named record, arrays, maps
// (keys sorted), fixed, and a logical type read as its underlying long.
func TestDecodeAvroNested(t *testing.T) {
	const s = `{"type":"record","name":"Outer","namespace":"ns","fields":[
	 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
	 {"name":"inner","type":{"type":"record","name":"Inner","fields":[{"name":"z","type":"int"},{"name":"a","type":"float"}]}},
	 {"name":"maybe","type":["null","Inner"]},
	 {"name":"list","type":{"type":"array","items":"Inner"}},
	 {"name":"m","type":{"type":"map","values":"string"}},
	 {"name":"f","type":{"type":"fixed","name":"F2","size":2}}]}`
	enc, err := NewEncoder(sdk.SchemaAvro, s)
	if err != nil {
		t.Fatal(err)
	}
	in := `{"at":1700000000000,"inner":{"z":1,"a":0.5},"maybe":{"ns.Inner":{"z":2,"a":1.25}},"list":[{"z":3,"a":-1}],"m":{"a":"1","b":"2"},"f":"\u00ffA"}`
	datum, err := enc.Encode(nil, sdk.SchemaJSON, nil, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoder(sdk.SchemaAvro, s)
	if err != nil {
		t.Fatal(err)
	}
	v, err := d.Decode(datum)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(AppendJSON(nil, v)), strings.Replace(in, `\u00ff`, "ÿ", 1); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestEncodeAvroBytesAreCodePoints: in Avro's JSON encoding a bytes or fixed value is a
// string whose code points 0-255 are the bytes; "\u00ff" is the byte ff, not its UTF-8.
func TestEncodeAvroBytesAreCodePoints(t *testing.T) {
	const s = `{"type":"record","name":"R","fields":[{"name":"b","type":"bytes"},{"name":"f","type":{"type":"fixed","name":"F","size":2}}]}`
	enc, err := NewEncoder(sdk.SchemaAvro, s)
	if err != nil {
		t.Fatal(err)
	}
	out, err := enc.Encode(nil, sdk.SchemaJSON, nil, []byte(`{"b":"\u0000\u00ff","f":"\u00ffA"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x04, 0x00, 0xff, 0xff, 0x41}; !bytes.Equal(out, want) {
		t.Fatalf("datum % x, want % x", out, want)
	}
}
