package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHashVectors checks XXH3 (zeebo/xxh3) and our XXH32 against the published test
// vectors of both hashes.
func TestHashVectors(t *testing.T) {
	if got := xxh3.Hash(nil); got != 0x2d06800538d394c2 {
		t.Errorf("XXH3(\"\") = %#x", got)
	}
	if got := xxh3.Hash([]byte("hello")); got != 0x9555e8555c62dcfd {
		t.Errorf("XXH3(hello) = %#x", got)
	}
	for _, tc := range []struct {
		in   string
		want uint32
	}{
		{"", 0x02cc5d05},
		{"hello", 0xfb0077f9},
		{"key-1", 0x39636a09},
		{"consumer-a", 0x62fb5e43},
		{"0123456789abcdef0123", 0x6350964e},
	} {
		if got := XXH32([]byte(tc.in), 0); got != tc.want {
			t.Errorf("XXH32(%q) = %#08x, want %#08x", tc.in, got, tc.want)
		}
	}
	if got := PartitionForKey([]byte("key-1"), 3); got != 1 {
		t.Errorf("PartitionForKey(key-1, 3) = %d, want 1", got)
	}
}

func TestProtocolVersion(t *testing.T) {
	if ProtocolVersion != 11264 || PackVersion(0, 11, 0) != 0x2C00 {
		t.Fatalf("ProtocolVersion = %d", ProtocolVersion)
	}
	if a, b, c := UnpackVersion(PackVersion(1, 2, 3)); a != 1 || b != 2 || c != 3 {
		t.Fatalf("unpack = %d.%d.%d", a, b, c)
	}
	max := PackVersion(0, 11, 4)
	for _, tc := range []struct {
		client uint32
		ok     bool
	}{
		{PackVersion(0, 11, 0), true},
		{PackVersion(0, 11, 4), true},
		{PackVersion(0, 11, 9), true}, // any patch
		{PackVersion(0, 10, 9), false},
		{PackVersion(0, 12, 0), false},
		{PackVersion(1, 11, 0), false},
	} {
		if got := VersionAccepted(tc.client, max); got != tc.ok {
			t.Errorf("VersionAccepted(%s, %s) = %v", FormatVersion(tc.client), FormatVersion(max), got)
		}
	}
	if MinAcceptedVersion(max) != ProtocolVersion {
		t.Errorf("MinAcceptedVersion = %d", MinAcceptedVersion(max))
	}
}

// TestLoginGolden is a 31-byte password login body captured from a real client.
func TestLoginGolden(t *testing.T) {
	want := unhex(t, "00 2c 00 00 06 67 6f 2d 73 64 6b 05 30 2e 31 2e 30 04 69 67 67 79 04 69 67 67 79 00 00 00 00")
	req := LoginPasswordRequest{
		Client:              ClientVersionInfo{ProtocolVersion: ProtocolVersion, SDKName: "go-sdk", SDKVersion: "0.1.0"},
		PasswordCredentials: PasswordCredentials{Username: "iggy", Password: "iggy"},
	}
	got := req.Append(nil)
	if !bytes.Equal(got, want) || len(got) != 31 {
		t.Fatalf("login body\n got %x\nwant %x", got, want)
	}
	a, err := DecodeLogin(want)
	if err != nil {
		t.Fatal(err)
	}
	if !a.HasPassword || a.Password != req.PasswordCredentials || a.Client != req.Client {
		t.Fatalf("DecodeLogin = %+v", a)
	}
	// The same bytes also decode as a PAT shape: token "iggy", context_len from
	// [04 'i' 'g' 'g'] which exceeds the remaining bytes, so the PAT shape fails here.
	if a.HasToken {
		t.Fatalf("PAT shape decoded: %+v", a.Token)
	}
	// An empty password decodes as both shapes: the server tries the password shape first.
	empty := LoginPasswordRequest{Client: req.Client, PasswordCredentials: PasswordCredentials{Username: "iggy"}}.Append(nil)
	a, err = DecodeLogin(empty)
	if err != nil || !a.HasPassword || !a.HasToken || a.Token.Token != "iggy" {
		t.Fatalf("empty password: %+v %v", a, err)
	}
	// A bad version prefix is the only error (→ Eviction 15).
	if _, err := DecodeLogin([]byte{0, 0x2c, 0, 0, 0}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad prefix: %v", err)
	}
	h := RequestHeader{Client: Uint128{Lo: 1}, Operation: OpRegister}
	if err := ValidateRequestHeader(h); err != nil {
		t.Fatal(err)
	}
	frame := AppendRequest(nil, h, req)
	if len(frame) != HeaderSize+31 || frame[176] != 1 || binary.LittleEndian.Uint32(frame[196:]) != 0 {
		t.Fatalf("login frame: len %d op %d code %d", len(frame), frame[176], binary.LittleEndian.Uint32(frame[196:]))
	}
}

// TestSendGolden is a SendMessages body worked out byte by byte.
func TestSendGolden(t *testing.T) {
	wantFrame := unhex(t, `8e5ca59edbbdbfb9 01000000000000000000000000000000 00000000 00000000 00000000 05000000
		0000000000000000 68656c6c6f`)
	msgs := []SendMessage{{ID: Uint128{Lo: 1}, OriginTimestamp: 1_700_000_000_000_000, Payload: []byte("hello")}}
	batch, err := AppendBatch(nil, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != 309 {
		t.Fatalf("batch_length %d, want 309", len(batch))
	}
	if got := batch[BatchHeaderSize:]; !bytes.Equal(got, wantFrame) {
		t.Fatalf("frame\n got %x\nwant %x", got, wantFrame)
	}
	h, err := ValidateBatch(batch)
	if err != nil {
		t.Fatal(err)
	}
	if h.Checksum != 0x8937c33d7c940fc3 || h.Length != 309 || h.MessageCount != 1 || h.OriginTimestamp != 1_700_000_000_000_000 {
		t.Fatalf("batch header %+v (checksum %#x)", h, h.Checksum)
	}
	if f, _ := DecodeFrameHeader(batch[BatchHeaderSize:]); f.Checksum != 0xb9bfbddb9ea55c8e {
		t.Fatalf("frame checksum %#x", f.Checksum)
	}
	body, err := AppendSendMessages(nil, NumericID(0), NumericID(0), ToPartition(0), msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := unhex(t, "16000000 | 01 04 00000000 | 01 04 00000000 | 02 04 00000000 | 01000000")
	if len(body) != 335 || !bytes.Equal(body[:26], wantMeta) || !bytes.Equal(body[26:], batch) {
		t.Fatalf("body len %d, metadata %x", len(body), body[:26])
	}
	frame := AppendRequestHeader(nil, RequestHeader{Client: Uint128{Lo: 7}, Operation: OpSendMessages, Session: 1, Request: 1}, 0)
	frame = append(frame, body...)
	SetFrameSize(frame)
	fi, err := ReadFrameInfo(frame, 0)
	if err != nil || fi.Size != 591 || fi.BodyLen() != 335 || fi.Command != CommandRequest {
		t.Fatalf("frame info %+v %v", fi, err)
	}
	q, err := DecodeSendMessagesRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	if q.Stream != NumericID(0) || q.Partitioning.Kind != PartitioningPartitionID || q.MessagesCount != 1 {
		t.Fatalf("decoded %+v", q)
	}
}

// TestResultSectionGolden is the reply to creating a stream that already exists.
func TestResultSectionGolden(t *testing.T) {
	want := unhex(t, "01 00 00 00 | 00 00 00 00 | F4 03 00 00")
	if got := AppendResultError(nil, 1012); !bytes.Equal(got, want) {
		t.Fatalf("got %x", got)
	}
	_, err := ReplyPayload(ReplyHeader{Operation: OpCreateStream}, want)
	if !errors.Is(err, ErrStreamNameAlreadyExists) || !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("err = %v", err)
	}
	p, err := ReplyPayload(ReplyHeader{Operation: OpCreateStream}, []byte{0, 0, 0, 0, 9})
	if err != nil || !bytes.Equal(p, []byte{9}) {
		t.Fatalf("ok payload %x %v", p, err)
	}
	// A declared section longer than the body is corruption, never success.
	if _, err := ReplyPayload(ReplyHeader{Operation: OpCreateStream}, want[:8]); !errors.Is(err, ErrTruncated) {
		t.Fatalf("short section: %v", err)
	}
	// Not result-framed: the body is the payload.
	if p, err := ReplyPayload(ReplyHeader{Operation: OpNonReplicated}, want); err != nil || !bytes.Equal(p, want) {
		t.Fatalf("op 2: %x %v", p, err)
	}
	// Register: framed only when non-empty.
	if p, err := ReplyPayload(ReplyHeader{Operation: OpRegister}, nil); err != nil || len(p) != 0 {
		t.Fatalf("empty register: %v", err)
	}
	if _, err := ReplyPayload(ReplyHeader{Operation: OpRegister}, AppendResultError(nil, 57)); !Retriable(err) {
		t.Fatalf("register transient: %v", err)
	}
	// Status wins and the body is ignored.
	if _, err := ReplyPayload(ReplyHeader{Operation: OpNonReplicated, Status: 40}, nil); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("status: %v", err)
	}
}

func TestIdentifierGolden(t *testing.T) {
	for _, tc := range []struct {
		id   Identifier
		want string
	}{
		{NumericID(7), "01 04 07 00 00 00"},
		{NamedID("orders"), "02 06 6f 72 64 65 72 73"},
	} {
		got := AppendIdentifier(nil, tc.id)
		if !bytes.Equal(got, unhex(t, tc.want)) {
			t.Errorf("%v: got %x", tc.id, got)
		}
		r := NewReader(got)
		if back := r.Identifier(); back != tc.id || r.Complete() != nil {
			t.Errorf("%v: decoded %v %v", tc.id, back, r.Complete())
		}
	}
	for _, bad := range []string{"", "03 04 00000000", "01 03 000000", "01 05 0000000000", "02 00", "02 02 ff fe", "02 05 616263"} {
		r := NewReader(unhex(t, bad))
		r.Identifier()
		if err := r.Err(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

// TestHeaderOffsets pins every field of the three header shapes to its offset.
func TestHeaderOffsets(t *testing.T) {
	le := binary.LittleEndian
	req := RequestHeader{Client: Uint128{Lo: 0x1111, Hi: 0x2222}, RequestChecksum: Uint128{Lo: 0x33}, Timestamp: 0x44,
		Request: 0x55, Operation: OpNonReplicated, Session: 0x66, Code: CodeGetStreams}
	b := AppendRequestHeader(nil, req, 10)
	if len(b) != HeaderSize || le.Uint32(b[48:]) != 266 || b[60] != 5 || le.Uint64(b[128:]) != 0x1111 ||
		le.Uint64(b[136:]) != 0x2222 || le.Uint64(b[144:]) != 0x33 || le.Uint64(b[160:]) != 0x44 ||
		le.Uint64(b[168:]) != 0x55 || b[176] != 2 || le.Uint64(b[184:]) != 0x66 || le.Uint32(b[196:]) != 201 {
		t.Fatalf("request header %x", b)
	}
	if back, err := DecodeRequestHeader(b); err != nil || back != req {
		t.Fatalf("decoded %+v %v", back, err)
	}
	// The code is written only for op 2.
	req.Operation = OpCreateStream
	if b := AppendRequestHeader(nil, req, 0); le.Uint32(b[196:]) != 0 {
		t.Fatal("code written for a replicated op")
	}
	rep := ReplyHeader{RequestChecksum: Uint128{Lo: 1}, Client: Uint128{Lo: 2}, Timestamp: 3, Request: 4, Operation: OpCreateTopic, Status: 1009}
	b = AppendReplyHeader(nil, rep, 0)
	if b[60] != 8 || le.Uint64(b[128:]) != 1 || le.Uint64(b[160:]) != 2 || le.Uint64(b[192:]) != 3 ||
		le.Uint64(b[200:]) != 4 || b[208] != 132 || le.Uint32(b[216:]) != 1009 {
		t.Fatalf("reply header %x", b)
	}
	if back, err := DecodeReplyHeader(b); err != nil || back != rep {
		t.Fatalf("decoded %+v %v", back, err)
	}
	ev := EvictionHeader{Client: Uint128{Lo: 9}, ServerMax: PackVersion(0, 11, 2), ServerMin: ProtocolVersion, Reason: EvictionIncompatibleProtocol}
	b = AppendEvictionHeader(nil, ev)
	if b[60] != 13 || le.Uint32(b[48:]) != 256 || le.Uint64(b[128:]) != 9 || le.Uint32(b[144:]) != ev.ServerMax ||
		le.Uint32(b[148:]) != ev.ServerMin || b[255] != 14 {
		t.Fatalf("eviction header %x", b)
	}
	if back, err := DecodeEvictionHeader(b); err != nil || back != ev {
		t.Fatalf("decoded %+v %v", back, err)
	}
	// The window is dropped for other reasons.
	ev.Reason = EvictionStaleClient
	if b := AppendEvictionHeader(nil, ev); le.Uint32(b[144:]) != 0 || le.Uint32(b[148:]) != 0 {
		t.Fatal("window written for reason 13")
	}
}
