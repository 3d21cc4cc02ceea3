package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// Fuzz targets, one per decoder. Every target states its invariants; the common ones are
// checked by fuzzCodec:
//
//  1. No panic, whatever the input.
//  2. No read past the input: the input is passed with cap == len, so a read past it
//     would panic with an out-of-range index (and a sub-slice past it would too).
//  3. Canonical re-encoding: if decoding succeeds, encoding the value and decoding that
//     again succeeds and re-encodes to the same bytes (encode∘decode is idempotent). For
//     a strict decoder (one that rejects trailing bytes and has no lenient fields) the
//     re-encoding equals the input byte for byte.
//
// Seeds come from the round-trip fixtures (f.Add), plus truncated variants; inputs the
// fuzzer finds failing are kept under testdata/fuzz.

func fuzzCodec(f *testing.F, seeds [][]byte, strict bool, rt func([]byte) ([]byte, error)) {
	for _, s := range seeds {
		f.Add(s)
		if len(s) > 0 {
			f.Add(s[:len(s)-1])
			f.Add(s[:len(s)/2])
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)]
		out, err := rt(in)
		if err != nil {
			return
		}
		if strict && !bytes.Equal(out, in) {
			t.Fatalf("re-encoding differs from input\n in %x\nout %x", in, out)
		}
		again, err := rt(out)
		if err != nil {
			t.Fatalf("re-encoding does not decode: %v\nout %x", err, out)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("encode∘decode not idempotent\n 1 %x\n 2 %x", out, again)
		}
	})
}

func requestSeeds(code Code) [][]byte {
	var s [][]byte
	for _, r := range sampleRequests() {
		if r.Code() == code {
			s = append(s, r.Append(nil))
		}
	}
	return append(s, nil)
}

func replySeeds(name string) [][]byte {
	for _, rc := range sampleReplies() {
		if rc.name == name {
			return [][]byte{rc.enc, nil}
		}
	}
	panic(name)
}

func replyRT(name string) func([]byte) ([]byte, error) {
	for _, rc := range sampleReplies() {
		if rc.name == name {
			return rc.dec
		}
	}
	panic(name)
}

// fuzzRequest fuzzes the decoder of one request code through DecodeRequest.
func fuzzRequest(f *testing.F, code Code, strict bool) {
	fuzzCodec(f, requestSeeds(code), strict, func(b []byte) ([]byte, error) {
		r, err := DecodeRequest(code, b)
		if err != nil {
			return nil, err
		}
		return r.Append(nil), nil
	})
}

// Request decoders. Non-strict ones: empty-body requests (they ignore any body),
// FlushUnsavedBuffer (any non-zero fsync), logins and polls (trailing bytes ignored), and
// those carrying an optional partition (any flag ≠ 1 means absent).

func FuzzPingRequest(f *testing.F)               { fuzzRequest(f, CodePing, false) }
func FuzzGetMeRequest(f *testing.F)              { fuzzRequest(f, CodeGetMe, false) }
func FuzzGetStatsRequest(f *testing.F)           { fuzzRequest(f, CodeGetStats, false) }
func FuzzGetClusterMetadataRequest(f *testing.F) { fuzzRequest(f, CodeGetClusterMetadata, false) }
func FuzzFlushUnsavedBufferRequest(f *testing.F) { fuzzRequest(f, CodeFlushUnsavedBuffer, false) }
func FuzzLoginPasswordRequest(f *testing.F)      { fuzzRequest(f, CodeLoginRegister, false) }
func FuzzLoginPATRequest(f *testing.F)           { fuzzRequest(f, CodeLoginRegisterWithPAT, false) }
func FuzzLogoutRequest(f *testing.F)             { fuzzRequest(f, CodeLogoutUser, false) }
func FuzzGetStreamRequest(f *testing.F)          { fuzzRequest(f, CodeGetStream, true) }
func FuzzGetStreamsRequest(f *testing.F)         { fuzzRequest(f, CodeGetStreams, false) }
func FuzzCreateStreamRequest(f *testing.F)       { fuzzRequest(f, CodeCreateStream, true) }
func FuzzDeleteStreamRequest(f *testing.F)       { fuzzRequest(f, CodeDeleteStream, true) }
func FuzzUpdateStreamRequest(f *testing.F)       { fuzzRequest(f, CodeUpdateStream, true) }
func FuzzPurgeStreamRequest(f *testing.F)        { fuzzRequest(f, CodePurgeStream, true) }
func FuzzGetTopicRequest(f *testing.F)           { fuzzRequest(f, CodeGetTopic, true) }
func FuzzGetTopicsRequest(f *testing.F)          { fuzzRequest(f, CodeGetTopics, true) }
func FuzzCreateTopicRequest(f *testing.F)        { fuzzRequest(f, CodeCreateTopic, true) }
func FuzzDeleteTopicRequest(f *testing.F)        { fuzzRequest(f, CodeDeleteTopic, true) }
func FuzzUpdateTopicRequest(f *testing.F)        { fuzzRequest(f, CodeUpdateTopic, true) }
func FuzzPurgeTopicRequest(f *testing.F)         { fuzzRequest(f, CodePurgeTopic, true) }
func FuzzCreatePartitionsRequest(f *testing.F)   { fuzzRequest(f, CodeCreatePartitions, true) }
func FuzzDeletePartitionsRequest(f *testing.F)   { fuzzRequest(f, CodeDeletePartitions, true) }
func FuzzPollMessagesRequest(f *testing.F)       { fuzzRequest(f, CodePollMessages, false) }
func FuzzGetConsumerOffsetRequest(f *testing.F)  { fuzzRequest(f, CodeGetConsumerOffset, false) }
func FuzzStoreConsumerOffsetRequest(f *testing.F) {
	fuzzRequest(f, CodeStoreConsumerOffset, false)
}
func FuzzDeleteConsumerOffsetRequest(f *testing.F) {
	fuzzRequest(f, CodeDeleteConsumerOffset, false)
}
func FuzzGetConsumerGroupRequest(f *testing.F)    { fuzzRequest(f, CodeGetConsumerGroup, true) }
func FuzzGetConsumerGroupsRequest(f *testing.F)   { fuzzRequest(f, CodeGetConsumerGroups, true) }
func FuzzCreateConsumerGroupRequest(f *testing.F) { fuzzRequest(f, CodeCreateConsumerGroup, true) }
func FuzzDeleteConsumerGroupRequest(f *testing.F) { fuzzRequest(f, CodeDeleteConsumerGroup, true) }
func FuzzJoinConsumerGroupRequest(f *testing.F)   { fuzzRequest(f, CodeJoinConsumerGroup, true) }
func FuzzLeaveConsumerGroupRequest(f *testing.F)  { fuzzRequest(f, CodeLeaveConsumerGroup, true) }
func FuzzSyncConsumerGroupRequest(f *testing.F)   { fuzzRequest(f, CodeSyncConsumerGroup, true) }
func FuzzGetPATsRequest(f *testing.F)             { fuzzRequest(f, CodeGetPATs, false) }
func FuzzCreatePATRequest(f *testing.F)           { fuzzRequest(f, CodeCreatePAT, true) }
func FuzzDeletePATRequest(f *testing.F)           { fuzzRequest(f, CodeDeletePAT, true) }

// FuzzSendMessagesRequest: common invariants (strict: metadata must fill metadata_length
// exactly and the batch is carried verbatim), plus Validate never panics, and a batch it
// accepts has as many frames as the metadata says.
func FuzzSendMessagesRequest(f *testing.F) {
	fuzzCodec(f, requestSeeds(CodeSendMessages), true, func(b []byte) ([]byte, error) {
		q, err := DecodeSendMessagesRequest(b)
		if err != nil {
			return nil, err
		}
		if h, err := q.Validate(); err == nil && h.MessageCount != q.MessagesCount {
			panic("Validate accepted a count mismatch")
		}
		return q.Append(nil), nil
	})
}

// Reply decoders: all strict except SendMessagesReply (an empty payload is accepted as
// "no confirmations" and re-encodes as count 0).

func fuzzReply(f *testing.F, name string, strict bool) {
	fuzzCodec(f, replySeeds(name), strict, replyRT(name))
}

func FuzzClientDetails(f *testing.F)      { fuzzReply(f, "ClientDetails", true) }
func FuzzStats(f *testing.F)              { fuzzReply(f, "Stats", true) }
func FuzzLoginReply(f *testing.F)         { fuzzReply(f, "LoginReply", true) }
func FuzzStreamResponse(f *testing.F)     { fuzzReply(f, "StreamResponse", true) }
func FuzzStreams(f *testing.F)            { fuzzReply(f, "Streams", true) }
func FuzzStreamDetails(f *testing.F)      { fuzzReply(f, "StreamDetails", true) }
func FuzzTopicDetails(f *testing.F)       { fuzzReply(f, "TopicDetails", true) }
func FuzzTopics(f *testing.F)             { fuzzReply(f, "Topics", true) }
func FuzzConsumerOffsetInfo(f *testing.F) { fuzzReply(f, "ConsumerOffsetInfo", true) }
func FuzzGroupDetails(f *testing.F)       { fuzzReply(f, "GroupDetails", true) }
func FuzzGroups(f *testing.F)             { fuzzReply(f, "Groups", true) }
func FuzzSyncAssignment(f *testing.F)     { fuzzReply(f, "SyncAssignment", true) }
func FuzzRawToken(f *testing.F)           { fuzzReply(f, "RawToken", true) }
func FuzzPATs(f *testing.F)               { fuzzReply(f, "PATs", true) }
func FuzzSendMessagesReply(f *testing.F)  { fuzzReply(f, "SendMessagesReply", false) }

func headerSeeds() [][]byte {
	req := AppendRequest(nil, RequestHeader{Client: Uint128{Lo: 1}, Request: 1, Session: 2, Operation: OpNonReplicated}, GetStreamRequest{sOrders})
	rep := AppendReply(nil, ReplyHeader{Request: 3, Operation: OpCreateStream, Status: 1012}, nil)
	ev := AppendEvictionHeader(nil, EvictionHeader{Client: Uint128{Lo: 1}, Reason: EvictionIncompatibleProtocol, ServerMax: ProtocolVersion, ServerMin: ProtocolVersion})
	return [][]byte{req[:HeaderSize], rep, ev}
}

// FuzzFrameHeaders: ReadFrameInfo and the three header decoders never panic on any input;
// a frame info it accepts has 256 ≤ size ≤ MaxFrameSize and command ≤ 29; a decoded header
// re-encodes (with the same size) to a header that decodes to the same value, and whose
// first 256 bytes differ from the input only in fields the codec does not carry
// (checksums, cluster, view, release, replica, reserved, ignored reply fields).
func FuzzFrameHeaders(f *testing.F) {
	for _, s := range headerSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)]
		fi, err := ReadFrameInfo(in, 0)
		if err == nil && (fi.Size < HeaderSize || fi.Size > MaxFrameSize || fi.Command > 29) {
			t.Fatalf("accepted %+v", fi)
		}
		if h, err := DecodeRequestHeader(in); err == nil {
			_ = ValidateRequestHeader(h)
			if back, err := DecodeRequestHeader(AppendRequestHeader(nil, h, 0)); err != nil || back != h {
				t.Fatalf("request header %+v → %+v %v", h, back, err)
			}
		}
		if h, err := DecodeReplyHeader(in); err == nil {
			if back, err := DecodeReplyHeader(AppendReplyHeader(nil, h, 0)); err != nil || back != h {
				t.Fatalf("reply header %+v → %+v %v", h, back, err)
			}
			_, _ = ReplyPayload(h, in[HeaderSize:])
		}
		if h, err := DecodeEvictionHeader(in); err == nil {
			e := NewEvictionError(h)
			if e.Err == nil || e.Error() == "" {
				t.Fatal("eviction error without mapping")
			}
			back, err := DecodeEvictionHeader(AppendEvictionHeader(nil, h))
			if err != nil || back.Reason != h.Reason || back.Client != h.Client {
				t.Fatalf("eviction header %+v → %+v %v", h, back, err)
			}
		}
	})
}

// FuzzResultSection: no panic; on success the payload is a suffix of the input and the
// section (4 + 8·count bytes) plus payload is exactly the input.
func FuzzResultSection(f *testing.F) {
	f.Add(AppendResultError(nil, 1012))
	f.Add(AppendResultOK([]byte{}))
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 5, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)]
		code, payload, err := DecodeResultSection(in)
		if err != nil {
			return
		}
		if !bytes.HasSuffix(in, payload) || (len(in) < 12 && code != 0) {
			t.Fatalf("code %d payload %x of %x", code, payload, in)
		}
	})
}

// FuzzLogin: DecodeLogin never panics; when a shape decodes, the request rebuilt from it
// encodes to a body that DecodeLogin reads back to the same credentials (the server's
// two-step decode is stable), and the input's prefix re-encodes byte for byte.
func FuzzLogin(f *testing.F) {
	for _, r := range sampleRequests() {
		if r.Code() == CodeLoginRegister || r.Code() == CodeLoginRegisterWithPAT {
			f.Add(r.Append(nil))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)]
		a, err := DecodeLogin(in)
		if err != nil {
			return
		}
		if p := appendVersionInfo(nil, a.Client); !bytes.HasPrefix(in, p) {
			t.Fatalf("prefix %x not a prefix of %x", p, in)
		}
		if a.HasPassword {
			b, err := DecodeLogin(LoginPasswordRequest{a.Client, a.Password}.Append(nil))
			if err != nil || !b.HasPassword || b.Password != a.Password || b.Client != a.Client {
				t.Fatalf("password shape unstable: %+v %v", b, err)
			}
		}
		if a.HasToken {
			b, err := DecodeLogin(LoginPATRequest{a.Client, a.Token}.Append(nil))
			if err != nil || !b.HasToken || b.Token != a.Token {
				t.Fatalf("token shape unstable: %+v %v", b, err)
			}
		}
	})
}

// FuzzKVs: the typed user-header decoder never panics, and a block it accepts re-encodes
// byte for byte (the TLV encoding is canonical); DecodeOptions accepts a subset of what
// the wire rules accept and re-encodes byte for byte as well.
func FuzzKVs(f *testing.F) {
	f.Add(AppendKVs(nil, opts))
	f.Add(AppendKVs(nil, []KV{StringKV("b", BoolValue(true)), {Key: RawValue([]byte{1}), Value: Float64Value(1)}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)]
		if kvs, err := DecodeKVs(in, nil); err == nil {
			if out := AppendKVs(nil, kvs); !bytes.Equal(out, in) {
				t.Fatalf("typed: %x → %x", in, out)
			}
			for _, kv := range kvs {
				_, _ = kv.Value.AsString()
				_, _ = kv.Value.AsUint64()
				_, _ = kv.Value.AsInt64()
				_, _ = kv.Value.AsFloat64()
				_, _ = kv.Value.AsBool()
			}
		}
		if kvs, err := DecodeOptions(in); err == nil {
			if out := AppendKVs(nil, kvs); !bytes.Equal(out, in) {
				t.Fatalf("options: %x → %x", in, out)
			}
			if len(kvs) > MaxOptionPairs {
				t.Fatalf("%d options", len(kvs))
			}
		}
	})
}

// FuzzValidateBatch: ValidateBatch, CheckBatchLayout, StampBatch, SliceBatch and
// SliceBatchFrom never panic. A batch ValidateBatch accepts also passes CheckBatchLayout;
// after StampBatch it still passes ValidateBatch with the stamped fields; every
// SliceBatch of it passes ValidateBatch with the requested count; the full slice is the
// batch itself.
func FuzzValidateBatch(f *testing.F) {
	f.Add(mustBatch(f, 1, 5))
	f.Add(mustBatch(f, 3, 10))
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)]
		_, _, _ = SliceBatchFrom(nil, in, 2, 1)
		_, _ = SliceBatch(nil, in, 1, 2)
		h, err := ValidateBatch(in)
		if err != nil {
			return
		}
		if _, err := CheckBatchLayout(in); err != nil {
			t.Fatalf("layout rejects a valid batch: %v", err)
		}
		b := bytes.Clone(in)
		if err := StampBatch(b, 7, 100, 200); err != nil {
			t.Fatal(err)
		}
		if sh, err := ValidateBatch(b); err != nil || sh.PartitionID != 7 || sh.BaseOffset != 100 || sh.BaseTimestamp != 200 {
			t.Fatalf("stamped: %+v %v", sh, err)
		}
		n := int(h.MessageCount)
		if full, err := SliceBatch(nil, b, 0, n); err != nil || !bytes.Equal(full, b) {
			t.Fatalf("full slice: %v", err)
		}
		for from := 0; from < n && from < 4; from++ {
			s, err := SliceBatch(nil, b, from, n)
			if err != nil {
				t.Fatal(err)
			}
			if sh, err := ValidateBatch(s); err != nil || int(sh.MessageCount) != n-from {
				t.Fatalf("slice [%d,%d): %+v %v", from, n, sh, err)
			}
		}
	})
}

// FuzzDecodePollReply: never panics; on success it returns exactly messages_count
// messages whose Payload and RawHeaders lie inside the input (no copies, no overrun), and
// VerifyPollChecksums does not panic either.
func FuzzDecodePollReply(f *testing.F) {
	b1, b2 := mustBatch(f, 2, 8), mustBatch(f, 1, 3)
	f.Add(append(append(PollReply{MessagesCount: 3}.Append(nil), b1...), b2...))
	f.Add(PollReply{PartitionID: ResyncPartition}.Append(nil))
	f.Fuzz(func(t *testing.T, in []byte) {
		in = in[:len(in):len(in)]
		_ = VerifyPollChecksums(in)
		pr, msgs, err := DecodePollReply(in, nil)
		if err != nil {
			return
		}
		if len(msgs) != int(pr.MessagesCount) {
			t.Fatalf("%d messages, count %d", len(msgs), pr.MessagesCount)
		}
		for _, m := range msgs {
			for _, s := range [][]byte{m.Payload, m.RawHeaders} {
				if len(s) > 0 && !within(in, s) {
					t.Fatal("message slice outside the body")
				}
			}
			_, _ = m.Headers(nil)
		}
	})
}

// within reports whether s lies inside buf (same backing array).
func within(buf, s []byte) bool {
	for i := 0; i+len(s) <= len(buf); i++ {
		if &buf[i] == &s[0] {
			return true
		}
	}
	return false
}

// FuzzReplyFrame: the client's whole-reply decoding (DecodeReplyFrame) under any
// operation byte, the internal 64–68 included (a real server answers CreateTopic as 64).
// Invariants: no panic; a success's payload is a suffix of the body; for a result-framed
// operation the bytes before it are exactly a result section whose first result is 0, and
// with no results rebuilding the reply from the payload gives the same frame; a body one
// byte short never decodes.
func FuzzReplyFrame(f *testing.F) {
	f.Add(uint8(OpCreateTopicWithAssignments), uint32(0), AppendResultOK(TopicDetails{}.Append(nil)))
	f.Add(uint8(OpCreatePartitionsWithAssignments), uint32(0), AppendResultOK(nil))
	f.Add(uint8(OpTruncatePartition), uint32(0), AppendResultError(nil, 3007))
	f.Add(uint8(OpCreateTopic), uint32(3), []byte{})
	f.Add(uint8(OpDeleteSegments), uint32(0), []byte{})
	f.Add(uint8(OpRegister), uint32(0), []byte{})
	f.Add(uint8(OpNonReplicated), uint32(0), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, op uint8, status uint32, body []byte) {
		body = body[:len(body):len(body)]
		h := ReplyHeader{Request: 1, Operation: Operation(op), Status: status}
		frame := AppendReply(nil, h, body)
		got, payload, err := DecodeReplyFrame(frame[:HeaderSize], frame[HeaderSize:])
		if len(body) > 0 {
			if _, _, err := DecodeReplyFrame(frame[:HeaderSize], frame[HeaderSize:len(frame)-1]); !errors.Is(err, ErrFrameSize) {
				t.Fatalf("short body: %v", err)
			}
		}
		if err != nil {
			return
		}
		if status != 0 || got.Operation != Operation(op) || !bytes.HasSuffix(body, payload) {
			t.Fatalf("op %d status %d: %+v payload %x of %x", op, status, got, payload, body)
		}
		if IsResultFramed(Operation(op)) && (Operation(op) != OpRegister || len(body) > 0) {
			n := int(binary.LittleEndian.Uint32(body))
			if len(body)-len(payload) != 4+8*n || (n > 0 && binary.LittleEndian.Uint32(body[8:]) != 0) {
				t.Fatalf("op %d: payload %x after a section of %d results in %x", op, payload, n, body)
			}
			if n == 0 {
				if back := AppendReply(nil, h, append(AppendResultOK(nil), payload...)); !bytes.Equal(back, frame) {
					t.Fatalf("op %d: rebuilt %x, want %x", op, back, frame)
				}
			}
		} else if !bytes.Equal(payload, body) {
			t.Fatalf("op %d not framed: payload %x of %x", op, payload, body)
		}
	})
}
