package schema

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/ferryio/ferry/sdk"
)

// fuzzDecoder checks one decoder: it never panics, and what it accepts re-encodes to
// valid JSON that decodes to the same bytes again (re-encoding is a fixed point).
func fuzzDecoder(f *testing.F, s sdk.Schema, seeds ...[]byte) {
	for _, b := range seeds {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := NewDecoder(s, fuzzAvroSchema(s))
		if err != nil {
			t.Fatal(err)
		}
		v, err := d.Decode(in)
		if err != nil || !d.JSON() {
			if err == nil && s == sdk.SchemaText && !utf8.Valid(in) {
				t.Fatalf("text accepted invalid UTF-8 %q", in)
			}
			return
		}
		out := AppendJSON(nil, v)
		if err := fastjson.ValidateBytes(out); err != nil || !utf8.Valid(out) {
			t.Fatalf("%q re-encoded to invalid JSON %q: %v", in, out, err)
		}
		j, _ := NewDecoder(sdk.SchemaJSON, "")
		v2, err := j.Decode(out)
		if err != nil {
			t.Fatalf("re-decode %q: %v", out, err)
		}
		if again := AppendJSON(nil, v2); !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q then %q", out, again)
		}
	})
}

func FuzzDecodeJSON(f *testing.F) {
	fuzzDecoder(f, sdk.SchemaJSON, []byte(`{"a":[1,2.5e3,"\u00e9\n"],"b":{"c":null}}`), []byte(`"\ud83d"`), []byte(`-0.0`))
}

func FuzzDecodeText(f *testing.F) { fuzzDecoder(f, sdk.SchemaText, []byte("héllo"), []byte("\xc3")) }

func FuzzDecodeProto(f *testing.F) {
	fuzzDecoder(f, sdk.SchemaProto, []byte("\x0a\x01t\x12\x02\x01\x02"), []byte("\x18\x05"))
}

func FuzzDecodeFlatBuffer(f *testing.F) {
	fuzzDecoder(f, sdk.SchemaFlatBuffer, []byte{8, 0, 0, 0, 1, 2, 3, 4}, []byte{1, 2})
}

// FuzzEncode: Encode never panics, and what it writes to a json or text stream is valid
// JSON or UTF-8.
func FuzzEncode(f *testing.F) {
	f.Add(byte(0), byte(1), []byte(`{"a":1}`))
	f.Add(byte(1), byte(0), []byte("text"))
	schemas := []sdk.Schema{sdk.SchemaJSON, sdk.SchemaText, sdk.SchemaRaw, sdk.SchemaProto, sdk.SchemaFlatBuffer}
	f.Fuzz(func(t *testing.T, from, to byte, payload []byte) {
		fs, ts := schemas[int(from)%len(schemas)], schemas[int(to)%len(schemas)]
		var v *fastjson.Value
		if d, _ := NewDecoder(fs, ""); d.JSON() {
			var err error
			if v, err = d.Decode(payload); err != nil {
				return
			}
		}
		out, err := Encode(nil, fs, ts, v, payload)
		if err != nil {
			return
		}
		switch ts {
		case sdk.SchemaJSON:
			if !utf8.Valid(out) || fastjson.ValidateBytes(out) != nil {
				t.Fatalf("%s->json wrote %q", fs, out)
			}
		case sdk.SchemaText:
			if !utf8.Valid(out) {
				t.Fatalf("%s->text wrote %q", fs, out)
			}
		}
	})
}

// FuzzVerbatim: a payload Verbatim hands on as it is is exactly what decoding and
// re-encoding it gives, and one it refuses is one Decode refuses with the same error.
func FuzzVerbatim(f *testing.F) {
	for _, s := range []string{`{"a":"b c","d":[1,-2.5e3,true,null],"e":{}}`, `{"a": 1}`, `{"a":"\n"}`, `"x\ty"`, "\"x\ty\"",
		`{"a":1,"a":2}`, `01`, `{"a":"é"}`, "\"\xff\"", `[1,2`, `1e999`, `"\u0000"`, ` 1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d, _ := NewDecoder(sdk.SchemaJSON, "")
		ok, verr := d.Verbatim(in)
		v, err := d.Decode(in)
		switch {
		case verr != nil:
			if err == nil || err.Error() != verr.Error() {
				t.Fatalf("%q: Verbatim refused it (%v), Decode said %v", in, verr, err)
			}
		case ok:
			if err != nil {
				t.Fatalf("%q: Verbatim accepted it, Decode refused it: %v", in, err)
			}
			if out := AppendJSON(nil, v); !bytes.Equal(out, in) {
				t.Fatalf("%q handed on as it is, but re-encodes to %q", in, out)
			}
		}
	})
}

// FuzzQuickCompact: quickCompact says yes to exactly the payloads the general checks find
// valid UTF-8, valid JSON and compact, up to quickMaxDepth levels of nesting.
func FuzzQuickCompact(f *testing.F) {
	for _, s := range quickCompactCases {
		f.Add([]byte(s.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		general := compactJSON(in) && utf8.Valid(in) && fastjson.ValidateBytes(in) == nil
		quick := quickCompact(in)
		switch {
		case quick && !general:
			t.Fatalf("quickCompact(%q) = true; the general checks refuse it", in)
		case general && !quick && nesting(in) <= quickMaxDepth:
			t.Fatalf("quickCompact(%q) = false; the general checks accept it (nesting %d)", in, nesting(in))
		}
	})
}

// nesting is the deepest nesting of brackets outside strings in compact JSON p (no
// escapes: a quote always starts or ends a string).
func nesting(p []byte) int {
	depth, deepest, in := 0, 0, false
	for _, c := range p {
		switch {
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
