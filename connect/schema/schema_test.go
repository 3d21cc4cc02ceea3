package schema

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ferryio/ferry/sdk"
)

func anyBytes(typeURL string, value []byte) []byte {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendString(b, typeURL)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendBytes(b, value)
}

func TestDecode(t *testing.T) {
	tests := []struct {
		schema  sdk.Schema
		in      []byte
		want    string // the bytes handed to the plugin; "" with wantErr
		wantErr string
	}{
		{sdk.SchemaJSON, []byte(` { "b" : 1.50, "a" : [ 1e3, -0, "x<y&z\u0001\u00e9" ], "c":null } `), `{"b":1.50,"a":[1e3,-0,"x<y&z\u0001é"],"c":null}`, ""},
		{sdk.SchemaJSON, []byte(`"\ud83d\ude00"`), `"😀"`, ""},
		{sdk.SchemaJSON, []byte(`{"a":1`), "", "json: cannot parse JSON"},
		{sdk.SchemaJSON, []byte(`000`), "", "json: cannot parse JSON"},
		{sdk.SchemaJSON, []byte(`"\x"`), "", "json:"},
		{sdk.SchemaJSON, []byte("\"a\xff\""), "", "json: invalid UTF-8 at byte 2"},
		{sdk.SchemaJSON, []byte(``), "", "json:"},
		{sdk.SchemaRaw, []byte("\x00\xff"), "\x00\xff", ""},
		{sdk.SchemaText, []byte("héllo"), "héllo", ""},
		{sdk.SchemaText, []byte("ab\xc3"), "", "text: invalid UTF-8 at byte 2"},
		{sdk.SchemaProto, anyBytes("type.googleapis.com/x.Y", []byte{1, 2, 3}), `{"type_url":"type.googleapis.com/x.Y","value":"AQID"}`, ""},
		{sdk.SchemaProto, append(protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 9), anyBytes("t", nil)...), `{"type_url":"t","value":""}`, ""},
		{sdk.SchemaProto, nil, "", "proto: empty payload"},
		{sdk.SchemaProto, []byte{0x0a, 0x05, 'a'}, "", "proto: byte 1: field 1: unexpected EOF"},
		{sdk.SchemaProto, []byte(`{"a":1}`), "", "proto: byte"},
		{sdk.SchemaFlatBuffer, []byte{8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, `{"buffer_size":12,"has_root_table":true,"raw_data_base64":"CAAAAAECAwQFBgcI"}`, ""},
		{sdk.SchemaFlatBuffer, []byte{200, 0, 0, 0, 1}, `{"buffer_size":5,"has_root_table":false,"raw_data_base64":"yAAAAAE="}`, ""},
		{sdk.SchemaFlatBuffer, []byte{1, 2, 3}, "", "flat_buffer: 3 bytes, a FlatBuffer has at least 4"},
	}
	for _, tt := range tests {
		t.Run(string(tt.schema)+"/"+strings.ToValidUTF8(string(tt.in), "?"), func(t *testing.T) {
			d, err := NewDecoder(tt.schema, "")
			if err != nil {
				t.Fatal(err)
			}
			v, err := d.Decode(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want prefix %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := tt.in
			if d.JSON() {
				got = AppendJSON(nil, v)
			} else if v != nil {
				t.Fatalf("%s decoded to a JSON value", tt.schema)
			}
			if string(got) != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	obj := func(s string) *fastjson.Value { return fastjson.MustParse(s) }
	tests := []struct {
		from, to sdk.Schema
		v        *fastjson.Value
		payload  string
		want     string
		wantErr  string
	}{
		{sdk.SchemaJSON, sdk.SchemaJSON, obj(`{"a": "<b>"}`), "", `{"a":"<b>"}`, ""},
		{sdk.SchemaText, sdk.SchemaJSON, nil, "say \"hi\"\n<ok>", `"say \"hi\"\n<ok>"`, ""},
		{sdk.SchemaRaw, sdk.SchemaJSON, nil, `[1, 2]`, `[1, 2]`, ""},
		{sdk.SchemaRaw, sdk.SchemaJSON, nil, `[1,`, "", "payload is not valid JSON (stream schema json)"},
		{sdk.SchemaText, sdk.SchemaText, nil, "héllo", "héllo", ""},
		{sdk.SchemaJSON, sdk.SchemaText, obj(`{"a":1}`), "", `{"a":1}`, ""},
		{sdk.SchemaRaw, sdk.SchemaText, nil, "\xff", "", "payload is not text (stream schema text): invalid UTF-8 at byte 0"},
		{sdk.SchemaRaw, sdk.SchemaRaw, nil, "\x00\x01", "\x00\x01", ""},
		{sdk.SchemaJSON, sdk.SchemaRaw, obj(`{"a" : 1}`), "", `{"a":1}`, ""},
		{sdk.SchemaJSON, sdk.SchemaProto, obj(`{"type_url":"t","value":"AQID"}`), "", string(anyBytes("t", []byte{1, 2, 3})), ""},
		{sdk.SchemaJSON, sdk.SchemaProto, obj(`[1]`), "", "", "proto: want a JSON object {type_url, value}"},
		{sdk.SchemaProto, sdk.SchemaProto, nil, "\x0a\x01t", "\x0a\x01t", ""},
		{sdk.SchemaRaw, sdk.SchemaFlatBuffer, nil, "\x04\x00\x00\x00", "\x04\x00\x00\x00", ""},
		{sdk.SchemaText, sdk.SchemaFlatBuffer, nil, "x", "", "cannot convert a text payload to the stream's schema flat_buffer"},
		{sdk.SchemaText, sdk.SchemaProto, nil, "x", "", "cannot convert a text payload to the stream's schema proto"},
	}
	for _, tt := range tests {
		t.Run(string(tt.from)+"->"+string(tt.to), func(t *testing.T) {
			got, err := Encode(nil, tt.from, tt.to, tt.v, []byte(tt.payload))
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want prefix %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		s       sdk.Schema
		in      string
		wantErr string
	}{
		{sdk.SchemaJSON, `{"a":[1]}`, ""},
		{sdk.SchemaJSON, `{"a":`, "payload is not valid JSON (stream schema json)"},
		{sdk.SchemaJSON, "\"\xff\"", "payload is not JSON: invalid UTF-8 at byte 1"},
		{sdk.SchemaText, "ok", ""},
		{sdk.SchemaText, "\xc3", "payload is not text (stream schema text): invalid UTF-8 at byte 0"},
		{sdk.SchemaRaw, "\xff", ""},
		{sdk.SchemaProto, "\xff", ""},
	} {
		err := Check(tt.s, []byte(tt.in))
		if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), tt.wantErr)) {
			t.Errorf("Check(%s, %q) = %v, want %q", tt.s, tt.in, err, tt.wantErr)
		}
	}
}

func TestVerbatim(t *testing.T) {
	j, _ := NewDecoder(sdk.SchemaJSON, "")
	for _, c := range []struct {
		in   string
		ok   bool
		fail string
	}{
		{`{"a":"b c","n":[1,2.50,-0e1],"t":true}`, true, ""},
		{`{"a":1,"a":2}`, true, ""},             // duplicate keys are kept, as AppendJSON keeps them
		{`{"a": 1}`, false, ""},                 // whitespace outside a string: re-encoded
		{`{"a":"\u00e9"}`, false, ""},           // an escape: re-encoded
		{`{"a":1`, false, "json: cannot parse"}, // poison: the decode error, as Decode's
		{"\"\xff\"", false, "json: invalid UTF-8 at byte 1"},
	} {
		ok, err := j.Verbatim([]byte(c.in))
		if ok != c.ok || (err == nil) != (c.fail == "") || (err != nil && !strings.HasPrefix(err.Error(), c.fail)) {
			t.Errorf("Verbatim(%q) = %v, %v; want %v, an error starting %q", c.in, ok, err, c.ok, c.fail)
		}
	}
	for _, s := range []sdk.Schema{sdk.SchemaText, sdk.SchemaRaw, sdk.SchemaProto} {
		d, _ := NewDecoder(s, "")
		if ok, err := d.Verbatim([]byte(`{"a":1}`)); ok || err != nil {
			t.Errorf("%s: Verbatim = %v, %v; want false (only json is handed on)", s, ok, err)
		}
	}
}

// quickCompactCases are payloads with quickCompact's answer.
var quickCompactCases = []struct {
	in   string
	want bool
}{
	{`{"a":"b c","d":[1,-2.5e3,true,null,false],"e":{},"f":[],"g":[[{}]]}`, true},
	{`"x"`, true}, {`0`, true}, {`-0.5E+7`, true}, {`1e-2`, true}, {`true`, true}, {`[]`, true}, {`{}`, true},
	{`{"é€😀":"é€😀","":""}`, true},
	{"\"\xef\xbf\xbd\"", true}, // U+FFFD itself is valid UTF-8
	{`{"a": 1}`, false},        // whitespace outside a string: not compact
	{` 1`, false}, {`1 `, false},
	{`"a\nb"`, false},                                                     // an escape: not compact
	{"\"a\tb\"", false},                                                   // a control byte in a string: invalid
	{"{\"a\x01\":1}", false},                                              // in a key too
	{"\"\xff\"", false}, {"\"\xed\xa0\x80\"", false}, {"\"\xc3\"", false}, // invalid UTF-8
	{"\xc3\xa9", false},
	{``, false}, {`"`, false}, {`"abc`, false}, {`[1,2`, false}, {`{"a":1`, false}, {`{"a"}`, false}, {`{"a":}`, false},
	{`[1,]`, false}, {`{"a":1,}`, false}, {`{,}`, false}, {`[}`, false}, {`{]`, false}, {`]`, false}, {`[1]]`, false},
	{`{1:2}`, false}, {`01`, false}, {`-`, false}, {`1.`, false}, {`.5`, false}, {`1e`, false}, {`1e+`, false}, {`+1`, false},
	{`tru`, false}, {`truex`, false}, {`nul`, false}, {`[true false]`, false}, {`{"a":1}{}`, false}, {`"a""b"`, false},
	// Strings past the byte-by-byte start: each word step and the tail see each kind of byte.
	{`"` + strings.Repeat("x", 40) + `"`, true},
	{`"` + strings.Repeat("x", 20) + "é" + strings.Repeat("x", 20) + `"`, true},
	{`"` + strings.Repeat("x", 20) + `\n"`, false}, {`"` + strings.Repeat("x", 33) + `\n"`, false},
	{`"` + strings.Repeat("x", 40) + `\n"`, false},
	{`"` + strings.Repeat("x", 20) + "\x01\"", false}, {`"` + strings.Repeat("x", 33) + "\x1f\"", false},
	{`"` + strings.Repeat("x", 40) + "\n\"", false},
	{`"` + strings.Repeat("x", 20) + "\xff\"", false}, {`"` + strings.Repeat("x", 20) + "é\x01\"", false},
	{`"` + strings.Repeat("x", 20) + `é\"`, false}, {`"` + strings.Repeat("x", 20) + "é", false},
	{strings.Repeat("[", quickMaxDepth) + strings.Repeat("]", quickMaxDepth), true},
	{strings.Repeat("[", quickMaxDepth+1) + strings.Repeat("]", quickMaxDepth+1), false}, // deeper: left to the general checks
}

func TestQuickCompact(t *testing.T) {
	for _, c := range quickCompactCases {
		if got := quickCompact([]byte(c.in)); got != c.want {
			t.Errorf("quickCompact(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	// Each kind of byte at every place of a long string: the byte-by-byte start, both
	// word steps and the tail each meet every kind.
	for pad := range 64 {
		for _, c := range []struct {
			b    string
			want bool
		}{{"é", true}, {"\U0001F600", true}, {`\`, false}, {"\x01", false}, {"\x1f", false}, {"\x7f", true}, {"\xff", false}, {"\xc3", false}} {
			for _, tail := range []int{0, 3, 40} {
				in := `"` + strings.Repeat("x", pad) + c.b + strings.Repeat("y", tail) + `"`
				if got := quickCompact([]byte(in)); got != c.want {
					t.Errorf("quickCompact(%q) = %v, want %v", in, got, c.want)
				}
			}
		}
	}
	// The deeper payload is still handed on as it is, by the general checks.
	deep := strings.Repeat("[", quickMaxDepth+1) + strings.Repeat("]", quickMaxDepth+1)
	j, _ := NewDecoder(sdk.SchemaJSON, "")
	if ok, err := j.Verbatim([]byte(deep)); !ok || err != nil {
		t.Errorf("Verbatim(%d levels) = %v, %v; want true", quickMaxDepth+1, ok, err)
	}
}

// BenchmarkVerbatim checks the payload of the PostgreSQL side-by-side benchmark (a JSON
// object of 200 bytes, most of it one string) with Verbatim, and with the general checks
// alone (what Verbatim did before quickCompact).
func BenchmarkVerbatim(b *testing.B) {
	p := []byte(`{"p":1,"o":12345,"user":"u26","pad":"` + strings.Repeat("x", 160) + `"}`)
	j, _ := NewDecoder(sdk.SchemaJSON, "")
	b.Run("quick", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if ok, err := j.Verbatim(p); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("general", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if !compactJSON(p) || !utf8.Valid(p) || fastjson.ValidateBytes(p) != nil {
				b.Fatal("refused")
			}
		}
	})
}
