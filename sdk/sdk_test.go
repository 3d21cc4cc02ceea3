package sdk

import (
	"context"
	"reflect"
	"testing"
)

func TestParseSchema(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Schema
		wantErr bool
	}{
		{"json", SchemaJSON, false},
		{"raw", SchemaRaw, false},
		{"text", SchemaText, false},
		{"proto", SchemaProto, false},
		{"flat_buffer", SchemaFlatBuffer, false},
		{"flatbuffer", SchemaFlatBuffer, false},
		{"avro", SchemaAvro, false},
		{"JSON", "", true},
		{"", "", true},
	} {
		got, err := ParseSchema(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseSchema(%q) = %q, %v; want %q, err=%v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestMessageID(t *testing.T) {
	id := MessageIDFromUint64(0x0102030405060708)
	if got, want := id.String(), "00000000000000000102030405060708"; got != want {
		t.Fatalf("String() = %s, want %s", got, want)
	}
	lo, hi := id.Halves()
	if lo != 0x0102030405060708 || hi != 0 {
		t.Fatalf("Halves() = %x, %x", lo, hi)
	}
	if id.IsZero() || !(MessageID{}).IsZero() {
		t.Fatal("IsZero wrong")
	}
}

type nopSink struct{}

func (nopSink) Open(context.Context, SinkEnv) error { return nil }
func (nopSink) Consume(context.Context, TopicMetadata, MessagesMetadata, []ConsumedMessage) error {
	return nil
}
func (nopSink) Close(context.Context) error { return nil }

func TestRegistry(t *testing.T) {
	r := NewRegistry().AddSink("b", func() Sink { return nopSink{} }).AddSink("a", func() Sink { return nopSink{} })
	if got := r.SinkNames(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("SinkNames = %v", got)
	}
	if _, ok := r.Sink("a"); !ok {
		t.Fatal("sink a not found")
	}
	if _, ok := r.Sink("c"); ok {
		t.Fatal("sink c found")
	}
	if _, ok := r.Source("a"); ok {
		t.Fatal("source a found in sinks-only registry")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate registration did not panic")
		}
	}()
	r.AddSink("a", func() Sink { return nopSink{} })
}

func TestUint64Header(t *testing.T) {
	h := Uint64(7)
	if h.Kind != HeaderUint64 || !reflect.DeepEqual(h.Value, []byte{7, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("Uint64(7) = %+v", h)
	}
	if s := String("x"); s.Kind != HeaderString || string(s.Value) != "x" {
		t.Fatalf("String(x) = %+v", s)
	}
}
