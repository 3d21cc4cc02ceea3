package schema

import (
	"strings"
	"testing"

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
