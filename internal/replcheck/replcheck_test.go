package replcheck

import (
	"strings"
	"testing"

	"github.com/ferryio/ferry/iggy/wire"
)

// TestComparePartition: a replica equal to the remote passes; each kind of difference is
// named with the offset it is at.
func TestComparePartition(t *testing.T) {
	remote := []Message{
		{Offset: 0, ID: wire.Uint128{Lo: 1}, OriginTimestamp: 5, Payload: "a", Headers: []string{"seq=0", "iggy_origin_offset=stale"}},
		{Offset: 1, ID: wire.Uint128{Lo: 2}, OriginTimestamp: 6, Payload: "b", Headers: []string{"seq=1"}},
	}
	replica := func(i int) Message {
		r := remote[i]
		hs := []string{"seq=" + string(rune('0'+i))}
		hs = append(hs, "iggy_origin_stream=s", "iggy_origin_topic=t", "iggy_origin_partition=2", "iggy_origin_topic_created_at=9",
			"iggy_origin_offset="+string(rune('0'+i)))
		return Message{Offset: uint64(10 + i), ID: r.ID, OriginTimestamp: r.OriginTimestamp, Payload: r.Payload, Headers: hs}
	}
	good := []Message{replica(0), replica(1)}
	if err := comparePartition(remote, good, "s", "t", 2, 9); err != nil {
		t.Fatalf("an exact replica: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(ms []Message) []Message
		want   string
	}{
		{"missing", func(ms []Message) []Message { return ms[:1] }, "the remote holds 2 messages, the local 1"},
		{"duplicate", func(ms []Message) []Message { return []Message{ms[0], ms[0], ms[1]} }, "local offset 10 has id"},
		{"payload", func(ms []Message) []Message { ms[1].Payload = "x"; return ms }, `local offset 11 payload "x"`},
		{"timestamp", func(ms []Message) []Message { ms[0].OriginTimestamp = 1; return ms }, "local offset 10 origin timestamp 1"},
		{"headers", func(ms []Message) []Message { ms[1].Headers = ms[1].Headers[1:]; return ms }, "local offset 11 headers"},
	} {
		ms := c.change([]Message{replica(0), replica(1)})
		err := comparePartition(remote, ms, "s", "t", 2, 9)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
