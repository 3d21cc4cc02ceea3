package postcard

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "|", "", "\n", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	mapKV = []sdk.Header{{Key: sdk.String("k"), Value: sdk.String("v")}}
	// Given out of order on purpose: the encoder sorts by kind, then raw key bytes.
	mapKVN = []sdk.Header{
		{Key: sdk.String("n"), Value: sdk.HeaderField{Kind: sdk.HeaderUint32, Value: []byte{7, 0, 0, 0}}},
		{Key: sdk.String("k"), Value: sdk.String("v")},
	}
)

const (
	hexMapKV  = "01 | 01 04 61 77 3d 3d | 01 04 64 67 3d 3d"
	hexMapKVN = "02 | 01 04 61 77 3d 3d | 01 04 64 67 3d 3d | 01 04 62 67 3d 3d | 0a 08 42 77 41 41 41 41 3d 3d"
	hexRaw47  = "00 01 | 01 05 ef fd b6 f5 0d 80 80 f9 c0 c1 c4 82 03 80 80 f9 c0 c1 c4 82 03 | 0d 01 01 04 61 77 3d 3d 01 04 64 67 3d 3d | 07 7b 22 61 22 3a 31 7d"
	hexProd   = "02 01 00 00 00 00 01 01 01 04 61 77 3d 3d 01 04 64 67 3d 3d 02 68 69 01 04 81 a1 61 01"
)

// Every worked example of the postcard layouts of Iggy's connector ABI: exact bytes.
func TestGoldenTopicMetadata(t *testing.T) {
	upstream := unhex(t, "06 6f 72 64 65 72 73 06 65 76 65 6e 74 73")
	tm := sdk.TopicMetadata{Stream: "orders", Topic: "events", StreamID: 3, TopicID: 300}
	got := AppendTopicMetadata(nil, tm)
	want := append(append([]byte{}, upstream...), 0x03, 0xac, 0x02) // Ferry's appended ids
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x, want % x", got, want)
	}
	dec, ext, err := DecodeTopicMetadata(got)
	if err != nil || !ext || dec != tm {
		t.Fatalf("decode extended: %+v %v %v", dec, ext, err)
	}
	dec, ext, err = DecodeTopicMetadata(upstream)
	if err != nil || ext || dec != (sdk.TopicMetadata{Stream: "orders", Topic: "events"}) {
		t.Fatalf("decode upstream: %+v %v %v", dec, ext, err)
	}
}

func TestGoldenMessagesMetadata(t *testing.T) {
	m := sdk.MessagesMetadata{Partition: sdk.Partition{PartitionID: 1}, CurrentOffset: 300, Schema: sdk.SchemaJSON}
	got, err := AppendMessagesMetadata(nil, m)
	if err != nil || !bytes.Equal(got, unhex(t, "01 ac 02 00")) {
		t.Fatalf("got % x, %v", got, err)
	}
	dec, err := DecodeMessagesMetadata(got)
	if err != nil || dec != m {
		t.Fatalf("decode: %+v %v", dec, err)
	}
}

func TestGoldenHeaderMaps(t *testing.T) {
	var e Encoder
	for _, tc := range []struct {
		name string
		h    []sdk.Header
		hex  string
		want []sdk.Header
	}{
		{"one", mapKV, hexMapKV, mapKV},
		{"two", mapKVN, hexMapKVN, []sdk.Header{mapKVN[1], mapKVN[0]}},
	} {
		got, err := e.AppendHeaderMap(nil, tc.h)
		if err != nil || !bytes.Equal(got, unhex(t, tc.hex)) {
			t.Fatalf("%s: got % x, %v", tc.name, got, err)
		}
		dec, err := DecodeHeaderMap(got)
		if err != nil || !reflect.DeepEqual(dec, tc.want) {
			t.Fatalf("%s: decode %+v %v", tc.name, dec, err)
		}
	}
}

func TestGoldenRawMessages(t *testing.T) {
	msgs := []sdk.ConsumedMessage{{
		ID: sdk.MessageIDFromUint64(1), Offset: 5, Checksum: 0xdeadbeef,
		Timestamp: 1_700_000_000_000_000, OriginTimestamp: 1_700_000_000_000_000,
		Headers: mapKV, Payload: []byte(`{"a":1}`),
	}}
	var e Encoder
	got, err := e.AppendRawMessages(nil, sdk.SchemaJSON, msgs)
	want := unhex(t, hexRaw47)
	if err != nil || !bytes.Equal(got, want) || len(got) != 47 {
		t.Fatalf("got % x (%d), %v", got, len(got), err)
	}
	schema, dec, err := DecodeRawMessages(got)
	if err != nil || schema != sdk.SchemaJSON || !reflect.DeepEqual(dec, msgs) {
		t.Fatalf("decode: %v %+v %v", schema, dec, err)
	}
}

func TestGoldenProducedMessages(t *testing.T) {
	p := ProducedMessages{
		Schema:   sdk.SchemaText,
		Messages: []ProducedMessage{{Headers: mapKV, HasHeaders: true, Payload: []byte("hi")}},
		State:    []byte{0x81, 0xa1, 0x61, 0x01}, HasState: true,
	}
	var e Encoder
	got, err := e.AppendProducedMessages(nil, p)
	if err != nil || !bytes.Equal(got, unhex(t, hexProd)) {
		t.Fatalf("got % x, %v", got, err)
	}
	dec, err := DecodeProducedMessages(got)
	if err != nil || !reflect.DeepEqual(dec, p) {
		t.Fatalf("decode: %+v %v", dec, err)
	}
	// The id follows a 01 Some tag with the same bytes as a bare u128.
	p.Messages[0].ID, p.Messages[0].HasID = idLE0011, true
	got, _ = e.AppendProducedMessages(nil, p)
	if !bytes.HasPrefix(got, unhex(t, "02 01 01 80 a2 88 99 c3 a8 95 b3 f7 90 e6 d4 ba 97 f3 ee ee ff 03 00")) {
		t.Fatalf("with id: % x", got)
	}
}

var idLE0011 = sdk.MessageID{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}

func TestGoldenVarints(t *testing.T) {
	lo, hi := idLE0011.Halves()
	if got := AppendU128(nil, lo, hi); !bytes.Equal(got, unhex(t, "80 a2 88 99 c3 a8 95 b3 f7 90 e6 d4 ba 97 f3 ee ee ff 03")) {
		t.Fatalf("u128 id: % x", got)
	}
	max128 := append(bytes.Repeat([]byte{0xff}, 18), 0x03)
	if got := AppendU128(nil, ^uint64(0), ^uint64(0)); !bytes.Equal(got, max128) {
		t.Fatalf("u128 max: % x", got)
	}
	max64 := append(bytes.Repeat([]byte{0xff}, 9), 0x01)
	if got := AppendUvarint(nil, ^uint64(0)); !bytes.Equal(got, max64) {
		t.Fatalf("u64 max: % x", got)
	}
	if got := AppendUvarint(nil, 0xffffffff); !bytes.Equal(got, unhex(t, "ff ff ff ff 0f")) {
		t.Fatalf("u32 max: % x", got)
	}
	r := NewReader(append(append(append([]byte{}, max128...), max64...), unhex(t, "ff ff ff ff 0f")...))
	l, h := r.U128()
	if l != ^uint64(0) || h != ^uint64(0) || r.U64() != ^uint64(0) || r.U32() != 0xffffffff || r.Err() != nil {
		t.Fatalf("decode max: %x %x %v", l, h, r.Err())
	}
	r = NewReader(unhex(t, "80 a2 88 99 c3 a8 95 b3 f7 90 e6 d4 ba 97 f3 ee ee ff 03"))
	if l, h := r.U128(); l != lo || h != hi {
		t.Fatalf("decode id: %x %x", l, h)
	}
}

func TestVarintRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		read func(*Reader) uint64
		want uint64
		err  error
	}{
		{"u32 non-minimal accepted", "80 00", func(r *Reader) uint64 { return uint64(r.U32()) }, 0, nil},
		{"u32 last byte overflow", "ff ff ff ff 10", func(r *Reader) uint64 { return uint64(r.U32()) }, 0, ErrBadVarint},
		{"u32 too long", "80 80 80 80 80 00", func(r *Reader) uint64 { return uint64(r.U32()) }, 0, ErrBadVarint},
		{"u32 truncated", "80", func(r *Reader) uint64 { return uint64(r.U32()) }, 0, ErrTruncated},
		{"u64 last byte overflow", "ff ff ff ff ff ff ff ff ff 02", func(r *Reader) uint64 { return r.U64() }, 0, ErrBadVarint},
		{"u64 too long", "80 80 80 80 80 80 80 80 80 80 00", func(r *Reader) uint64 { return r.U64() }, 0, ErrBadVarint},
		{"u64 300", "ac 02", func(r *Reader) uint64 { return r.U64() }, 300, nil},
		{"u128 last byte overflow", strings.Repeat("ff ", 18) + "04", func(r *Reader) uint64 { l, _ := r.U128(); return l }, 0, ErrBadVarint},
		{"u128 too long", strings.Repeat("80 ", 19) + "00", func(r *Reader) uint64 { l, _ := r.U128(); return l }, 0, ErrBadVarint},
		{"option bad tag", "02", func(r *Reader) uint64 { r.Option(); return 0 }, 0, ErrBadOption},
		{"string bad utf8", "01 ff", func(r *Reader) uint64 { r.Str(); return 0 }, 0, ErrBadUTF8},
		{"bytes length past end", "05 01 02", func(r *Reader) uint64 { r.Bytes(); return 0 }, 0, ErrTruncated},
		{"bytes huge length", "ff ff ff ff ff ff ff ff 7f", func(r *Reader) uint64 { r.Bytes(); return 0 }, 0, ErrTruncated},
		{"schema index 6", "06", func(r *Reader) uint64 { r.Schema(); return 0 }, 0, ErrUnknownVariant},
	} {
		r := NewReader(unhex(t, tc.in))
		got := tc.read(r)
		if !errors.Is(r.Err(), tc.err) || (tc.err == nil && got != tc.want) {
			t.Errorf("%s: got %d, err %v; want %d, %v", tc.name, got, r.Err(), tc.want, tc.err)
		}
	}
}

func TestSchemaIndexes(t *testing.T) {
	for i, s := range []sdk.Schema{sdk.SchemaJSON, sdk.SchemaRaw, sdk.SchemaText, sdk.SchemaProto, sdk.SchemaFlatBuffer, sdk.SchemaAvro} {
		if got, err := SchemaIndex(s); err != nil || got != uint32(i) {
			t.Fatalf("%s: %d %v", s, got, err)
		}
	}
	if _, err := SchemaIndex("xml"); !errors.Is(err, ErrUnknownVariant) {
		t.Fatalf("xml: %v", err)
	}
}

func TestHeaderRules(t *testing.T) {
	var e Encoder
	// Duplicate keys: the later value wins, as in a Rust BTreeMap.
	dup := []sdk.Header{{Key: sdk.String("a"), Value: sdk.String("1")}, {Key: sdk.String("a"), Value: sdk.String("2")}}
	got, _ := e.AppendHeaderMap(nil, dup)
	dec, err := DecodeHeaderMap(got)
	if err != nil || len(dec) != 1 || string(dec[0].Value.Value) != "2" {
		t.Fatalf("dup: %+v %v", dec, err)
	}
	if _, err := e.AppendHeaderMap(nil, []sdk.Header{{Key: sdk.HeaderField{Kind: 16}, Value: sdk.String("x")}}); !errors.Is(err, ErrUnknownVariant) {
		t.Fatalf("kind 16: %v", err)
	}
	// Sorting compares raw bytes, not Base64 text: "\xff" < ... order by raw value.
	h := []sdk.Header{{Key: sdk.HeaderField{Kind: sdk.HeaderRaw, Value: []byte{0xff}}, Value: sdk.String("x")},
		{Key: sdk.HeaderField{Kind: sdk.HeaderRaw, Value: []byte{0x00}}, Value: sdk.String("y")}}
	got, _ = e.AppendHeaderMap(nil, h)
	if dec, _ := DecodeHeaderMap(got); dec[0].Key.Value[0] != 0x00 {
		t.Fatalf("raw order: %+v", dec)
	}
	for _, tc := range []struct {
		b64 string
		ok  bool
	}{
		{"aw==", true}, {"aw", true}, {"ax==", false}, {"a\nw=", false}, {"a-==", false}, {"", true},
	} {
		in := append([]byte{0x01, 0x00, 0x00, 0x00, byte(len(tc.b64))}, tc.b64...)
		_, err := DecodeHeaderMap(in)
		if (err == nil) != tc.ok {
			t.Errorf("base64 %q: %v", tc.b64, err)
		}
	}
}

// The consume path re-encodes every batch into reused buffers: no allocation per message.
func TestEncodeNoAllocs(t *testing.T) {
	msgs := make([]sdk.ConsumedMessage, 100)
	for i := range msgs {
		msgs[i] = sdk.ConsumedMessage{ID: sdk.MessageIDFromUint64(uint64(i)), Offset: uint64(i), Headers: mapKVN, Payload: []byte("payload")}
	}
	var e Encoder
	buf, _ := e.AppendRawMessages(nil, sdk.SchemaRaw, msgs)
	tm := sdk.TopicMetadata{Stream: "s", Topic: "t", StreamID: 1, TopicID: 2}
	allocs := testing.AllocsPerRun(100, func() {
		buf, _ = e.AppendRawMessages(buf[:0], sdk.SchemaRaw, msgs)
		buf = AppendTopicMetadata(buf[:0], tm)
		buf, _ = AppendMessagesMetadata(buf[:0], sdk.MessagesMetadata{Schema: sdk.SchemaRaw})
	})
	if allocs != 0 {
		t.Fatalf("allocs per batch = %v, want 0", allocs)
	}
}
