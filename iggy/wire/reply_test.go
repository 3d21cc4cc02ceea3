package wire

import (
	"errors"
	"testing"
)

// TestReplyHelpers checks the server's reply builders against the client's decoder.
func TestReplyHelpers(t *testing.T) {
	create := RequestHeader{Client: Uint128{Lo: 1}, Session: 1, Request: 5, Operation: OpCreateStream}
	read := RequestHeader{Client: Uint128{Lo: 1}, Request: 5, Operation: OpNonReplicated, Code: CodeGetStream}
	if create.CommandCode() != CodeCreateStream || read.CommandCode() != CodeGetStream ||
		(RequestHeader{Operation: OpRegister}).CommandCode() != 0 || (RequestHeader{Operation: OpLogout}).CommandCode() != CodeLogoutUser {
		t.Fatal("CommandCode")
	}
	split := func(f []byte) ([]byte, []byte) { return f[:HeaderSize], f[HeaderSize:] }

	payload := StreamResponse{ID: 1, Name: "orders"}.Append(nil)
	h, p, err := DecodeReplyFrame(split(AppendOKReply(nil, create, payload)))
	if err != nil || h.Request != 5 || h.Operation != OpCreateStream || string(p) != string(payload) {
		t.Fatalf("ok framed: %+v %x %v", h, p, err)
	}
	f := AppendOKReply(nil, create, nil)
	if len(f) != HeaderSize+4 {
		t.Fatalf("empty framed success is %d bytes", len(f))
	}
	_, p, err = DecodeReplyFrame(split(AppendOKReply(nil, read, payload)))
	if err != nil || string(p) != string(payload) {
		t.Fatalf("ok plain: %v", err)
	}
	if _, _, err := DecodeReplyFrame(split(AppendRejectReply(nil, create, 1012))); !errors.Is(err, ErrStreamNameAlreadyExists) {
		t.Fatalf("reject: %v", err)
	}
	if _, _, err := DecodeReplyFrame(split(AppendRejectReply(nil, read, 40))); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("reject on op 2: %v", err)
	}
	if _, _, err := DecodeReplyFrame(split(AppendStatusReply(nil, create, 41))); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("status: %v", err)
	}
	ev := AppendEvictionHeader(nil, EvictionHeader{Client: Uint128{Lo: 1}, Reason: EvictionStaleClient})
	var ee *EvictionError
	if _, _, err := DecodeReplyFrame(ev, nil); !errors.As(err, &ee) || !errors.Is(err, ErrStaleClient) {
		t.Fatalf("eviction: %v", err)
	}
	req := AppendRequest(nil, read, PingRequest{})
	if _, _, err := DecodeReplyFrame(req, nil); !errors.Is(err, ErrUnexpectedCommand) {
		t.Fatalf("request as reply: %v", err)
	}
	ok := AppendOKReply(nil, read, payload)
	if _, _, err := DecodeReplyFrame(ok[:HeaderSize], ok[HeaderSize:len(ok)-1]); !errors.Is(err, ErrFrameSize) {
		t.Fatalf("short body: %v", err)
	}
	// Login reply: result-framed on Register.
	reg := RequestHeader{Client: Uint128{Lo: 2}, Operation: OpRegister}
	lr := LoginReply{UserID: 0, Session: 9, ServerProtocolVersion: ProtocolVersion, ServerVersion: ServerVersion}
	_, p, err = DecodeReplyFrame(split(AppendOKReply(nil, reg, lr.Append(nil))))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeLoginReply(p); err != nil || got != lr {
		t.Fatalf("login reply %+v %v", got, err)
	}
}

// TestReplyForms pins the request → committed reply operation table (issue 11: a real
// server answers CreateTopic as CreateTopicWithAssignments) and what AnsweredBy allows.
func TestReplyForms(t *testing.T) {
	pairs := map[Operation]Operation{
		OpCreateTopic:      OpCreateTopicWithAssignments,      // 132 → 64
		OpCreatePartitions: OpCreatePartitionsWithAssignments, // 136 → 65
		OpDeleteSegments:   OpTruncatePartition,               // 138 → 68
	}
	if OpCreateTopicWithAssignments != 64 || OpCreatePartitionsWithAssignments != 65 || OpTruncatePartition != 68 {
		t.Fatal("internal operation values")
	}
	for o := range 256 {
		req := Operation(o)
		want, internal := pairs[req]
		if !internal {
			want = req
		}
		if got := req.CommittedForm(); got != want {
			t.Errorf("%s.CommittedForm() = %s, want %s", req, got, want)
		}
		for r := range 256 {
			rep := Operation(r)
			ok := rep == req || (internal && rep == want)
			if req.AnsweredBy(rep) != ok {
				t.Errorf("%s.AnsweredBy(%s) = %v", req, rep, !ok)
			}
		}
	}
	names := map[Operation]string{64: "CreateTopicWithAssignments", 65: "CreatePartitionsWithAssignments",
		66: "RemoveConsumerGroupMember", 67: "CompleteConsumerGroupRevocation", 68: "TruncatePartition", 69: "Operation(69)"}
	for o, n := range names {
		if o.String() != n {
			t.Errorf("Operation(%d).String() = %q, want %q", uint8(o), o.String(), n)
		}
	}

	// The server's builders: committed replies carry the internal form, denials echo.
	split := func(f []byte) ([]byte, []byte) { return f[:HeaderSize], f[HeaderSize:] }
	topic := RequestHeader{Client: Uint128{Lo: 1}, Session: 1, Request: 3, Operation: OpCreateTopic}
	details := TopicDetails{TopicHeader: TopicHeader{ID: 0, Name: "t", PartitionsCount: 0}}
	payload := details.Append(nil)
	f := AppendOKReply(nil, topic, payload)
	if f[208] != 64 || string(f[HeaderSize:HeaderSize+4]) != "\x00\x00\x00\x00" || string(f[HeaderSize+4:]) != string(payload) {
		t.Fatalf("CreateTopic success: op %d body %x", f[208], f[HeaderSize:])
	}
	h, p, err := DecodeReplyFrame(split(f))
	if err != nil || h.Operation != OpCreateTopicWithAssignments || string(p) != string(payload) {
		t.Fatalf("CreateTopic success decoded: %+v %x %v", h, p, err)
	}
	f = AppendRejectReply(nil, topic, ErrTopicNameAlreadyExists.Code)
	if f[208] != 64 || len(f) != HeaderSize+12 {
		t.Fatalf("CreateTopic rejection: op %d, %d bytes", f[208], len(f))
	}
	if _, _, err := DecodeReplyFrame(split(f)); !errors.Is(err, ErrTopicNameAlreadyExists) {
		t.Fatalf("CreateTopic rejection decoded: %v", err)
	}
	if f = AppendStatusReply(nil, topic, ErrInvalidCommand.Code); f[208] != 132 {
		t.Fatalf("CreateTopic denial: op %d", f[208])
	}
	parts := RequestHeader{Client: Uint128{Lo: 1}, Session: 1, Request: 4, Operation: OpCreatePartitions}
	if f = AppendOKReply(nil, parts, nil); f[208] != 65 || len(f) != HeaderSize+4 {
		t.Fatalf("CreatePartitions success: op %d, %d bytes", f[208], len(f))
	}
	// DeleteSegments' committed form is result-framed even though 138 itself is not.
	segs := RequestHeader{Client: Uint128{Lo: 1}, Session: 1, Request: 5, Operation: OpDeleteSegments}
	if f = AppendOKReply(nil, segs, nil); f[208] != 68 || len(f) != HeaderSize+4 {
		t.Fatalf("DeleteSegments success: op %d, %d bytes", f[208], len(f))
	}
	if f = AppendRejectReply(nil, segs, ErrPartitionNotFound.Code); f[208] != 68 || len(f) != HeaderSize+12 {
		t.Fatalf("DeleteSegments rejection: op %d, %d bytes", f[208], len(f))
	}
	if f = AppendStatusReply(nil, segs, ErrFeatureUnavailable.Code); f[208] != 138 || len(f) != HeaderSize {
		t.Fatalf("DeleteSegments denial: op %d, %d bytes", f[208], len(f))
	}
}
