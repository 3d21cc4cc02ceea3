package stdout

import (
	"bytes"
	"context"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

func TestLines(t *testing.T) {
	for _, tc := range []struct {
		cfg    string
		schema sdk.Schema
		want   string
	}{
		{`null`, sdk.SchemaText, "s/t partition=3 offset=7 id=00000000000000000000000000000001\ns/t partition=3 offset=8 id=00000000000000000000000000000002\n"},
		{`{"print_payload":true}`, sdk.SchemaText, "s/t partition=3 offset=7 id=00000000000000000000000000000001 payload=hello\ns/t partition=3 offset=8 id=00000000000000000000000000000002 payload=base64:/w==\n"},
		{`{"print_payload":true}`, sdk.SchemaRaw, "s/t partition=3 offset=7 id=00000000000000000000000000000001 payload=base64:aGVsbG8=\ns/t partition=3 offset=8 id=00000000000000000000000000000002 payload=base64:/w==\n"},
	} {
		var out bytes.Buffer
		s := NewWriter(&out)
		if err := s.Open(context.Background(), sdk.SinkEnv{Config: []byte(tc.cfg)}); err != nil {
			t.Fatal(err)
		}
		msgs := []sdk.ConsumedMessage{{Offset: 7, ID: sdk.MessageIDFromUint64(1), Payload: []byte("hello")}, {Offset: 8, ID: sdk.MessageIDFromUint64(2), Payload: []byte{0xff}}}
		meta := sdk.MessagesMetadata{Partition: sdk.Partition{PartitionID: 3}, Schema: tc.schema}
		if err := s.Consume(context.Background(), sdk.TopicMetadata{Stream: "s", Topic: "t"}, meta, msgs); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("cfg %s schema %s:\n%q\nwant\n%q", tc.cfg, tc.schema, out.String(), tc.want)
		}
	}
	if err := New().Open(context.Background(), sdk.SinkEnv{Config: []byte(`{"print":1}`)}); err == nil {
		t.Fatal("unknown field accepted")
	}
}
