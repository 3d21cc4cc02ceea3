package wire

import (
	"errors"
	"fmt"
	"testing"
)

func TestServerErrorsTable(t *testing.T) {
	seen := map[uint32]bool{}
	for _, e := range ServerErrors {
		if seen[e.Code] {
			t.Errorf("duplicate code %d", e.Code)
		}
		seen[e.Code] = true
		if got := CodeError(e.Code); got != error(e) { //nolint:errorlint // identity of the table value is the point
			t.Errorf("CodeError(%d) = %v", e.Code, got)
		}
		if e.Error() != fmt.Sprintf("iggy: %s (%d)", e.Name, e.Code) {
			t.Errorf("Error() = %q", e.Error())
		}
	}
	if len(ServerErrors) != 44 {
		t.Errorf("%d codes", len(ServerErrors))
	}
	// 4006 was missing from the table, so a storage fault read "Unknown (4006)" (issue 22).
	if e := CodeError(4006); !errors.Is(e, ErrCannotSaveMessagesToSegment) || e.Error() != "iggy: CannotSaveMessagesToSegment (4006)" {
		t.Errorf("CodeError(4006) = %v", e)
	}
	if CodeError(0) != nil {
		t.Error("CodeError(0) != nil")
	}
	unknown := CodeError(777)
	var se *ServerError
	if !errors.As(unknown, &se) || se.Code != 777 || se.Name != "Unknown" {
		t.Errorf("unknown: %v", unknown)
	}
}

func TestErrorClasses(t *testing.T) {
	wrap := func(code uint32) error { return fmt.Errorf("create stream: %w", CodeError(code)) }
	for _, tc := range []struct {
		class *ErrorClass
		codes []uint32
	}{
		{ErrNotFound, []uint32{20, 1009, 2010, 3007, 3021, 5000, 5006}},
		{ErrAlreadyExists, []uint32{46, 51, 1012, 2013, 5004}},
		{ErrInvalidInput, []uint32{3, 4, 6, 43, 44, 56, 1019, 2015, 2019, 4027, 4038, 4039, 4041, 4042, 4100}},
		{ErrLimitReached, []uint32{52, 1020, 2021, 3013}},
	} {
		in := map[uint32]bool{}
		for _, c := range tc.codes {
			in[c] = true
		}
		for _, e := range ServerErrors {
			if got := errors.Is(wrap(e.Code), tc.class); got != in[e.Code] {
				t.Errorf("errors.Is(%s, %v) = %v", e.Name, tc.class, got)
			}
		}
	}
	err := wrap(1009)
	if !errors.Is(err, ErrStreamIDNotFound) || errors.Is(err, ErrTopicIDNotFound) {
		t.Error("Is by code")
	}
	// A ServerError built by hand matches the package value by code.
	if !errors.Is(&ServerError{Code: 40}, ErrUnauthenticated) || !errors.Is(&ServerError{Code: 3007}, ErrNotFound) {
		t.Error("hand-built")
	}
	if !Retriable(wrap(57)) || !Retriable(wrap(58)) || Retriable(wrap(59)) || Retriable(nil) {
		t.Error("Retriable")
	}
	for err, want := range map[error]uint32{
		nil: 0, wrap(1012): 1012, ErrTruncated: 3, fmt.Errorf("x: %w", ErrFrameTiling): 3,
		errors.New("other"): 1, ErrNoMessages: 3,
	} {
		if got := ErrorCode(err); got != want {
			t.Errorf("ErrorCode(%v) = %d, want %d", err, got, want)
		}
	}
}

func TestEvictionMapping(t *testing.T) {
	want := map[EvictionReason]*ServerError{
		0: ErrUnauthenticated, 1: ErrUnauthenticated, 2: ErrInvalidCommand, 3: ErrInvalidCommand,
		4: ErrInvalidCommand, 5: ErrInvalidCommand, 6: ErrInvalidCommand, 7: ErrUnauthenticated,
		8: ErrUnauthenticated, 9: ErrInvalidCredentials, 10: ErrInvalidPAT, 11: ErrUnauthenticated,
		12: ErrUnauthenticated, 13: ErrStaleClient, 14: ErrIncompatibleProtocolVersion, 15: ErrInvalidFormat,
		16: ErrUnauthenticated, 255: ErrUnauthenticated,
	}
	for r, e := range want {
		h := EvictionHeader{Client: Uint128{Lo: 1}, Reason: r, ServerMax: PackVersion(0, 11, 1), ServerMin: ProtocolVersion}
		err := error(NewEvictionError(h))
		if !errors.Is(err, e) {
			t.Errorf("reason %d (%s): %v, want %v", r, r, err, e)
		}
		var ee *EvictionError
		if !errors.As(err, &ee) || ee.Reason != r {
			t.Errorf("As: %v", err)
		}
	}
	// Reason 14 with a nonsensical window maps to 40.
	for _, h := range []EvictionHeader{
		{Reason: 14, ServerMax: ProtocolVersion, ServerMin: 0},
		{Reason: 14, ServerMax: 1, ServerMin: ProtocolVersion},
	} {
		if err := NewEvictionError(h); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%+v: %v", h, err)
		}
	}
	if s := NewEvictionError(EvictionHeader{Reason: 14, ServerMax: ProtocolVersion, ServerMin: ProtocolVersion}).Error(); s !=
		"iggy: evicted (IncompatibleProtocol, server accepts 0.11.0..0.11.0): iggy: IncompatibleProtocolVersion (14003)" {
		t.Errorf("message %q", s)
	}
}

func TestFrameInfoAndValidation(t *testing.T) {
	h := RequestHeader{Client: Uint128{Hi: 1}, Operation: OpNonReplicated, Code: CodePing}
	frame := AppendRequest(nil, h, PingRequest{})
	if fi, err := ReadFrameInfo(frame, 0); err != nil || fi.Size != 256 || fi.Command != CommandRequest {
		t.Fatalf("%+v %v", fi, err)
	}
	if _, err := ReadFrameInfo(frame[:255], 0); !errors.Is(err, ErrTruncated) {
		t.Errorf("short: %v", err)
	}
	big := append([]byte(nil), frame...)
	setSizeField(big, MaxFrameSize+1)
	if _, err := ReadFrameInfo(big, 0); !errors.Is(err, ErrFrameSize) {
		t.Errorf("big: %v", err)
	}
	if _, err := ReadFrameInfo(big, MaxFrameSize+1); err != nil {
		t.Errorf("configured max: %v", err)
	}
	setSizeField(big, 255)
	if _, err := ReadFrameInfo(big, 0); !errors.Is(err, ErrFrameSize) {
		t.Errorf("small: %v", err)
	}
	bad := append([]byte(nil), frame...)
	bad[60] = 30
	if _, err := ReadFrameInfo(bad, 0); !errors.Is(err, ErrUnknownCommand) {
		t.Errorf("command 30: %v", err)
	}
	if _, err := DecodeReplyHeader(frame); !errors.Is(err, ErrUnexpectedCommand) {
		t.Errorf("reply from request: %v", err)
	}
	if _, err := DecodeEvictionHeader(frame); !errors.Is(err, ErrUnexpectedCommand) {
		t.Errorf("eviction from request: %v", err)
	}
	for _, tc := range []struct {
		h  RequestHeader
		ok bool
	}{
		{RequestHeader{Client: Uint128{Lo: 1}, Operation: OpNonReplicated}, true},
		{RequestHeader{Operation: OpNonReplicated}, false}, // client 0, even for Ping
		{RequestHeader{Client: Uint128{Lo: 1}}, false},     // op 0
		{RequestHeader{Client: Uint128{Lo: 1}, Operation: 100}, false},
		{RequestHeader{Client: Uint128{Lo: 1}, Operation: OpRegister}, true},
		{RequestHeader{Client: Uint128{Lo: 1}, Operation: OpRegister, Request: 1}, false},
		{RequestHeader{Client: Uint128{Lo: 1}, Operation: OpRegister, Session: 1}, false},
		{RequestHeader{Client: Uint128{Lo: 1}, Operation: OpLogout, Session: 1, Request: 1}, true},
		{RequestHeader{Client: Uint128{Lo: 1}, Operation: OpLogout, Session: 1}, false},
		{RequestHeader{Client: Uint128{Lo: 1}, Operation: OpCreateStream, Request: 1}, false},
		{RequestHeader{Client: Uint128{Lo: 1}, Operation: OpSendMessages, Session: 2, Request: 1}, true},
		{RequestHeader{Client: Uint128{Lo: 1}, Operation: 64, Session: 2, Request: 1}, true},
	} {
		err := ValidateRequestHeader(tc.h)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidRequestHeader)) {
			t.Errorf("%+v: %v", tc.h, err)
		}
	}
	// Request checksum: 0 passes, the right stamp passes, a wrong one is status 4.
	body := GetStreamRequest{sOrders}.Append(nil)
	f := AppendRequest(nil, RequestHeader{Client: Uint128{Lo: 1}, Operation: OpNonReplicated}, GetStreamRequest{sOrders})
	StampRequestChecksum(f)
	rh, _ := DecodeRequestHeader(f)
	if rh.Code != CodeGetStream || rh.RequestChecksum != RequestChecksum(body) {
		t.Fatalf("%+v", rh)
	}
	if err := VerifyRequestChecksum(rh, body); err != nil {
		t.Error(err)
	}
	if err := VerifyRequestChecksum(RequestHeader{}, body); err != nil {
		t.Error(err)
	}
	rh.RequestChecksum.Lo++
	if err := VerifyRequestChecksum(rh, body); !errors.Is(err, ErrInvalidFormat) || ErrorCode(err) != 4 {
		t.Errorf("mismatch: %v", err)
	}
	rep := ReplyTo(rh, 0)
	if rep.Request != rh.Request || rep.Operation != rh.Operation || rep.Client != rh.Client {
		t.Errorf("ReplyTo %+v", rep)
	}
	out := AppendReply(nil, rep, []byte{1, 2, 3})
	if fi, err := ReadFrameInfo(out, 0); err != nil || fi.BodyLen() != 3 || fi.Command != CommandReply {
		t.Errorf("%+v %v", fi, err)
	}
}

// setSizeField is a test helper writing an arbitrary size.
func setSizeField(frame []byte, size uint32) {
	frame[48], frame[49], frame[50], frame[51] = byte(size), byte(size>>8), byte(size>>16), byte(size>>24)
}
