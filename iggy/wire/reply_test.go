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
