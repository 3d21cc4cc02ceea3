package mongodb

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

// TestDocumentID: upstream's "stream:topic:partition:message_id" with the id's full
// 128-bit decimal value; a zero id falls back to the offset.
func TestDocumentID(t *testing.T) {
	topic := sdk.TopicMetadata{Stream: "s", Topic: "t"}
	var max sdk.MessageID
	for i := range max {
		max[i] = 0xff
	}
	var hi sdk.MessageID
	binary.LittleEndian.PutUint64(hi[8:], 1) // 2^64
	cases := []struct {
		id   sdk.MessageID
		want string
	}{
		{sdk.MessageIDFromUint64(42), "s:t:3:42"},
		{hi, "s:t:3:18446744073709551616"},
		{max, "s:t:3:340282366920938463463374607431768211455"},
		{sdk.MessageID{}, "s:t:3:offset-17"},
	}
	for _, c := range cases {
		m := sdk.ConsumedMessage{ID: c.id, Offset: 17}
		if got := documentID(topic, 3, &m); got != c.want {
			t.Errorf("id %s: %q, want %q", c.id, got, c.want)
		}
	}
}

// TestJSONToBSONRefusals: what the json payload format cannot store is refused with the
// reason, for that message alone.
func TestJSONToBSONRefusals(t *testing.T) {
	cases := map[string]string{
		`{"a":1} {"b":2}`:            "more than one JSON value",
		`{"a":18446744073709551616}`: "does not fit in 64 bits",
		`{"a":`:                      "EOF",
		strings.Repeat("[", 101) + strings.Repeat("]", 101): "nested deeper than 100 levels",
	}
	for in, want := range cases {
		if _, err := jsonToBSON([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40s: %v, want %q", in, err, want)
		}
	}
	if v, err := jsonToBSON([]byte(` [1, 2.5, "x"] `)); err != nil || v == nil {
		t.Fatalf("an array: %v %v", v, err)
	}
}
