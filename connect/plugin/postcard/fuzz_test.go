package postcard

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

// Fuzz invariants, for every decoder:
//   - no panic, and the Reader never reports consuming more than the input;
//   - a decoded value re-encodes, and decoding that encoding gives the same value, whose
//     encoding is byte-identical (canonical form is a fixed point);
//   - no slice is preallocated from a count the input cannot hold (checked by the decoders'
//     length and capHint guards; a huge count in a short input must fail fast, not OOM).
// Seed corpora live in testdata/fuzz/<FuzzName>.

func FuzzReader(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(b)
		r.U32()
		r.U64()
		r.U128()
		r.Option()
		r.Str()
		r.Bytes()
		if r.Offset() > len(b) || r.Remaining() < 0 {
			t.Fatalf("over-read: off %d len %d", r.Offset(), len(b))
		}
	})
}

func FuzzTopicMetadata(f *testing.F) {
	f.Add(AppendTopicMetadata(nil, sdk.TopicMetadata{Stream: "orders", Topic: "events", StreamID: 1, TopicID: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		tm, ext, err := DecodeTopicMetadata(b)
		if err != nil || !ext {
			return
		}
		enc := AppendTopicMetadata(nil, tm)
		tm2, _, err := DecodeTopicMetadata(enc)
		if err != nil || tm2 != tm || !bytes.Equal(AppendTopicMetadata(nil, tm2), enc) {
			t.Fatalf("round trip: %+v -> %+v (%v)", tm, tm2, err)
		}
	})
}

func FuzzMessagesMetadata(f *testing.F) {
	f.Add([]byte{0x01, 0xac, 0x02, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessagesMetadata(b)
		if err != nil {
			return
		}
		enc, err := AppendMessagesMetadata(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := DecodeMessagesMetadata(enc)
		if err != nil || m2 != m {
			t.Fatalf("round trip: %+v -> %+v (%v)", m, m2, err)
		}
	})
}

func FuzzHeaderMap(f *testing.F) {
	var e Encoder
	b, _ := e.AppendHeaderMap(nil, mapKVN)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeaderMap(b)
		if err != nil {
			return
		}
		var e Encoder
		enc, err := e.AppendHeaderMap(nil, h)
		if err != nil {
			t.Fatal(err)
		}
		h2, err := DecodeHeaderMap(enc)
		if err != nil || !reflect.DeepEqual(h, h2) {
			t.Fatalf("round trip: %+v -> %+v (%v)", h, h2, err)
		}
		if enc2, _ := e.AppendHeaderMap(nil, h2); !bytes.Equal(enc, enc2) {
			t.Fatalf("not canonical: % x vs % x", enc, enc2)
		}
	})
}

func FuzzRawMessages(f *testing.F) {
	f.Add(unhex(f, hexRaw47))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, msgs, err := DecodeRawMessages(b)
		if err != nil {
			return
		}
		var e Encoder
		enc, err := e.AppendRawMessages(nil, s, msgs)
		if err != nil {
			t.Fatal(err)
		}
		s2, msgs2, err := DecodeRawMessages(enc)
		if err != nil || s2 != s || len(msgs2) != len(msgs) {
			t.Fatalf("round trip: %v", err)
		}
		enc2, _ := e.AppendRawMessages(nil, s2, msgs2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("not canonical: % x vs % x", enc, enc2)
		}
	})
}

func FuzzProducedMessages(f *testing.F) {
	f.Add(unhex(f, hexProd))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeProducedMessages(b)
		if err != nil {
			return
		}
		var e Encoder
		enc, err := e.AppendProducedMessages(nil, p)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := DecodeProducedMessages(enc)
		if err != nil || !reflect.DeepEqual(p, p2) {
			t.Fatalf("round trip: %+v -> %+v (%v)", p, p2, err)
		}
		if enc2, _ := e.AppendProducedMessages(nil, p2); !bytes.Equal(enc, enc2) {
			t.Fatalf("not canonical")
		}
	})
}

func FuzzConnectorState(f *testing.F) {
	f.Add([]byte{0x04, 0x81, 0xa1, 0x61, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeConnectorState(b)
		if err != nil {
			return
		}
		if s2, err := DecodeConnectorState(AppendConnectorState(nil, s)); err != nil || !bytes.Equal(s, s2) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
