package iggy_test

import (
	"errors"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// replyAs answers h with a committed success reply (result section, then payload) whose
// operation is op, whatever h's was.
func replyAs(nc net.Conn, h wire.RequestHeader, op wire.Operation, payload []byte) {
	rh := wire.ReplyTo(h, 0)
	rh.Operation = op
	_, _ = nc.Write(wire.AppendReply(nil, rh, append(wire.AppendResultOK(nil), payload...)))
}

// TestInternalReplyOperations: a real Iggy server answers CreateTopic with operation 64
// (CreateTopicWithAssignments) and CreatePartitions with 65; issue 11 saw Ferry's client
// call that a protocol violation although the topic was created. The client takes
// exactly these internal forms for their requests (decoding the payload as usual) and
// still rejects any other operation.
func TestInternalReplyOperations(t *testing.T) {
	topic := wire.TopicDetails{
		TopicHeader: wire.TopicHeader{ID: 3, CreatedAt: 1700000000000000, Name: "t",
			MessageExpiry: wire.ExpiryNever, MaxTopicSize: wire.SizeUnlimited, Compression: wire.CompressionNone},
		Partitions: []wire.PartitionResponse{{ID: 0, CreatedAt: 1700000000000000}, {ID: 1, CreatedAt: 1700000000000000}},
	}
	topic.PartitionsCount = 2
	// answer maps each request operation to the operation the peer replies with.
	dial := func(t *testing.T, answer map[wire.Operation]wire.Operation) *iggy.Client {
		t.Helper()
		addr := fakeServer(t, func(nc net.Conn, h wire.RequestHeader) {
			op, ok := answer[h.Operation]
			if !ok {
				op = h.Operation
			}
			var payload []byte
			if h.Operation == wire.OpCreateTopic {
				payload = topic.Append(nil)
			}
			replyAs(nc, h, op, payload)
		})
		c, err := iggy.Dial(testCtx(t), addr, iggy.WithPoolSize(1), iggy.WithLogger(quietLogger()),
			iggy.WithRequestTimeout(time.Second), iggy.WithReconnect(time.Millisecond, time.Millisecond, 1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	t.Run("accepted", func(t *testing.T) {
		c := dial(t, map[wire.Operation]wire.Operation{
			wire.OpCreateTopic:      wire.OpCreateTopicWithAssignments,
			wire.OpCreatePartitions: wire.OpCreatePartitionsWithAssignments,
		})
		got, err := c.CreateTopic(testCtx(t), iggy.Name("s"), "t", 2)
		if err != nil {
			t.Fatalf("create topic answered with 64: %v", err)
		}
		if !reflect.DeepEqual(got, topic) {
			t.Fatalf("create topic = %+v, want %+v", got, topic)
		}
		if err := c.CreatePartitions(testCtx(t), iggy.Name("s"), iggy.Name("t"), 4); err != nil {
			t.Fatalf("create partitions answered with 65: %v", err)
		}
		// The connection is still in step: an ordinary request works on it.
		if err := c.DeleteTopic(testCtx(t), iggy.Name("s"), iggy.Name("t")); err != nil {
			t.Fatalf("delete topic after: %v", err)
		}
	})

	cases := []struct {
		name   string
		answer map[wire.Operation]wire.Operation
		call   func(*iggy.Client) error
		want   string
	}{
		{"create topic as another internal op", map[wire.Operation]wire.Operation{wire.OpCreateTopic: wire.OpCreatePartitionsWithAssignments},
			func(c *iggy.Client) error { _, err := c.CreateTopic(testCtx(t), iggy.Name("s"), "t", 2); return err },
			`iggy: create topic stream "s" topic "t": outcome unknown: protocol violation: reply answers request 1 (CreatePartitionsWithAssignments), sent 1 (CreateTopic)`},
		{"create topic as delete topic", map[wire.Operation]wire.Operation{wire.OpCreateTopic: wire.OpDeleteTopic},
			func(c *iggy.Client) error { _, err := c.CreateTopic(testCtx(t), iggy.Name("s"), "t", 2); return err },
			`iggy: create topic stream "s" topic "t": outcome unknown: protocol violation: reply answers request 1 (DeleteTopic), sent 1 (CreateTopic)`},
		{"create partitions as create topic's form", map[wire.Operation]wire.Operation{wire.OpCreatePartitions: wire.OpCreateTopicWithAssignments},
			func(c *iggy.Client) error { return c.CreatePartitions(testCtx(t), iggy.Name("s"), iggy.Name("t"), 1) },
			`iggy: create partitions stream "s" topic "t": outcome unknown: protocol violation: reply answers request 1 (CreateTopicWithAssignments), sent 1 (CreatePartitions)`},
		{"create stream as an internal op", map[wire.Operation]wire.Operation{wire.OpCreateStream: wire.OpCreateTopicWithAssignments},
			func(c *iggy.Client) error { _, err := c.CreateStream(testCtx(t), "s"); return err },
			`iggy: create stream stream "s": outcome unknown: protocol violation: reply answers request 1 (CreateTopicWithAssignments), sent 1 (CreateStream)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, tc.answer)
			err := tc.call(c)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
			if !errors.Is(err, iggy.ErrProtocol) || !errors.Is(err, iggy.ErrOutcomeUnknown) {
				t.Fatalf("%v: not ErrProtocol and ErrOutcomeUnknown", err)
			}
		})
	}
}
