package server_test

import (
	"encoding/binary"
	"testing"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server/servertest"
)

// TestReplyOperations checks, byte by byte on the wire, the operation the server's
// replies carry (issue 11): like a real Iggy server, a committed reply to CreateTopic is
// CreateTopicWithAssignments (64) and to CreatePartitions CreatePartitionsWithAssignments
// (65), success and result-section rejection alike; a denial before execution (header
// status) echoes the request's operation; every other operation is echoed.
func TestReplyOperations(t *testing.T) {
	s := servertest.Start(t)
	c := login(t, s)
	c.must(wire.CreateStreamRequest{Name: "s"})

	type reply struct {
		op     uint8
		status uint32
		body   []byte
	}
	send := func(code wire.Code, body []byte) reply {
		t.Helper()
		h := c.header(code)
		hdr, rbody, err := c.rawRoundTrip(append(wire.AppendRequestHeader(nil, h, len(body)), body...))
		if err != nil {
			t.Fatalf("%s: %v", code, err)
		}
		if hdr[60] != byte(wire.CommandReply) || binary.LittleEndian.Uint64(hdr[200:]) != h.Request {
			t.Fatalf("%s: command %d, request %d (sent %d)", code, hdr[60], binary.LittleEndian.Uint64(hdr[200:]), h.Request)
		}
		return reply{op: hdr[208], status: binary.LittleEndian.Uint32(hdr[216:]), body: rbody}
	}
	le := func(vs ...uint32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}

	// CreateTopic: success under 64, result-framed, then the topic with 2 partitions.
	r := send(wire.CodeCreateTopic, wire.CreateTopicRequest{Stream: wire.NamedID("s"), PartitionsCount: 2, Name: "t"}.Append(nil))
	if r.op != 64 || r.status != 0 || string(r.body[:4]) != "\x00\x00\x00\x00" {
		t.Fatalf("create topic: op %d status %d body %x", r.op, r.status, r.body)
	}
	td, found, err := wire.DecodeTopicDetails(r.body[4:])
	if err != nil || !found || td.ID != 0 || td.Name != "t" || len(td.Partitions) != 2 {
		t.Fatalf("create topic payload: %+v %v %v", td, found, err)
	}
	// Duplicate name: a committed rejection, also under 64: [1][0][2013].
	r = send(wire.CodeCreateTopic, wire.CreateTopicRequest{Stream: wire.NamedID("s"), PartitionsCount: 1, Name: "t"}.Append(nil))
	if r.op != 64 || r.status != 0 || string(r.body) != string(le(1, 0, wire.ErrTopicNameAlreadyExists.Code)) {
		t.Fatalf("duplicate topic: op %d status %d body %x", r.op, r.status, r.body)
	}
	// Undecodable body: denied before execution, the request's own 132 and S:3.
	r = send(wire.CodeCreateTopic, []byte{1})
	if r.op != 132 || r.status != wire.ErrInvalidCommand.Code || len(r.body) != 0 {
		t.Fatalf("bad create topic: op %d status %d body %x", r.op, r.status, r.body)
	}

	// CreatePartitions: success under 65 with an empty payload; unknown topic R:2010 under 65.
	r = send(wire.CodeCreatePartitions, wire.CreatePartitionsRequest{Stream: wire.NamedID("s"), Topic: wire.NamedID("t"), PartitionsCount: 3}.Append(nil))
	if r.op != 65 || r.status != 0 || string(r.body) != "\x00\x00\x00\x00" {
		t.Fatalf("create partitions: op %d status %d body %x", r.op, r.status, r.body)
	}
	r = send(wire.CodeCreatePartitions, wire.CreatePartitionsRequest{Stream: wire.NamedID("s"), Topic: wire.NamedID("nope"), PartitionsCount: 1}.Append(nil))
	if r.op != 65 || r.status != 0 || string(r.body) != string(le(1, 0, wire.ErrTopicIDNotFound.Code)) {
		t.Fatalf("create partitions, no topic: op %d status %d body %x", r.op, r.status, r.body)
	}
	got, _, err := wire.DecodeTopicDetails(c.must(wire.GetTopicRequest{Stream: wire.NamedID("s"), Topic: wire.NamedID("t")}))
	if err != nil || len(got.Partitions) != 5 {
		t.Fatalf("topic after create partitions: %d partitions, %v", len(got.Partitions), err)
	}

	// DeleteSegments is not served: S:5 under its own 138 (nothing committed).
	// Body: [stream Id][topic Id][partition_id u32][segments_count u32] (wire has no
	// DeleteSegments request type: nothing in Ferry sends it).
	segs := wire.AppendIdentifier(wire.AppendIdentifier(nil, wire.NamedID("s")), wire.NamedID("t"))
	r = send(wire.CodeDeleteSegments, append(segs, le(0, 1)...))
	if r.op != 138 || r.status != wire.ErrFeatureUnavailable.Code || len(r.body) != 0 {
		t.Fatalf("delete segments: op %d status %d body %x", r.op, r.status, r.body)
	}

	// Operations without an internal form are echoed: DeletePartitions 137, CreateStream 128.
	r = send(wire.CodeDeletePartitions, wire.DeletePartitionsRequest{Stream: wire.NamedID("s"), Topic: wire.NamedID("t"), PartitionsCount: 1}.Append(nil))
	if r.op != 137 || r.status != 0 || string(r.body) != "\x00\x00\x00\x00" {
		t.Fatalf("delete partitions: op %d status %d body %x", r.op, r.status, r.body)
	}
	r = send(wire.CodeCreateStream, wire.CreateStreamRequest{Name: "s2"}.Append(nil))
	if r.op != 128 || r.status != 0 {
		t.Fatalf("create stream: op %d status %d", r.op, r.status)
	}
}
