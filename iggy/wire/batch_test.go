package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func mustBatch(t testing.TB, n, size int) []byte {
	t.Helper()
	b, err := AppendBatch(nil, sampleMessages(n, size), nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAppendBatchLayout(t *testing.T) {
	msgs := sampleMessages(4, 10)
	b := mustBatch(t, 4, 10)
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.MessageCount != 4 || h.Length != uint64(len(b)) || h.PartitionID != 0 || h.BaseOffset != 0 ||
		h.BaseTimestamp != 0 || h.OriginTimestamp != msgs[0].OriginTimestamp {
		t.Fatalf("%+v", h)
	}
	_, got, err := DecodePollReply(append(PollReply{MessagesCount: 4}.Append(nil), b...), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range got {
		if m.Offset != uint64(i) || m.ID != msgs[i].ID || m.OriginTimestamp != msgs[i].OriginTimestamp ||
			!bytes.Equal(m.Payload, msgs[i].Payload) || !bytes.Equal(m.RawHeaders, msgs[i].Headers) {
			t.Errorf("message %d: %+v", i, m)
		}
	}
	kvs, err := got[1].Headers(nil)
	if err != nil || len(kvs) != 2 || string(kvs[0].Value.Raw) != "abc" {
		t.Errorf("headers %v %v", kvs, err)
	}
}

func TestAppendBatchErrors(t *testing.T) {
	dst := []byte{1, 2, 3}
	cases := map[string]struct {
		msgs  []SendMessage
		newID func() Uint128
		want  error
	}{
		"none":         {nil, nil, ErrNoMessages},
		"empty":        {[]SendMessage{{ID: Uint128{Lo: 1}}}, nil, ErrPayloadSize},
		"headers":      {[]SendMessage{{ID: Uint128{Lo: 1}, Payload: []byte{1}, Headers: make([]byte, MaxUserHeadersBytes+1)}}, nil, ErrHeadersSize},
		"zero id":      {[]SendMessage{{Payload: []byte{1}}}, nil, ErrZeroMessageID},
		"zero from id": {[]SendMessage{{Payload: []byte{1}}}, func() Uint128 { return Uint128{} }, ErrZeroMessageID},
		"delta": {[]SendMessage{{ID: Uint128{Lo: 1}, Payload: []byte{1}, OriginTimestamp: 10},
			{ID: Uint128{Lo: 2}, Payload: []byte{1}, OriginTimestamp: 10 + 1<<32}}, nil, ErrInvalidMessageTimestampDelta},
	}
	for name, tc := range cases {
		out, err := AppendBatch(dst, tc.msgs, tc.newID)
		if !errors.Is(err, tc.want) || !bytes.Equal(out, dst) {
			t.Errorf("%s: %v (len %d)", name, err, len(out))
		}
	}
	// The generator is used only for zero ids, and its ids are written back.
	next := uint64(100)
	msgs := []SendMessage{{Payload: []byte{1}}, {ID: Uint128{Lo: 5}, Payload: []byte{2}}, {Payload: []byte{3}}}
	b, err := AppendBatch(nil, msgs, func() Uint128 { next++; return Uint128{Lo: next} })
	if err != nil || msgs[0].ID.Lo != 101 || msgs[1].ID.Lo != 5 || msgs[2].ID.Lo != 102 {
		t.Fatalf("%v %+v", err, msgs)
	}
	if _, err := ValidateBatch(b); err != nil {
		t.Fatal(err)
	}
	// A delta of exactly 2^32-1 is allowed; timestamps relative to the minimum.
	msgs = []SendMessage{{ID: Uint128{Lo: 1}, Payload: []byte{1}, OriginTimestamp: 1 << 32}, {ID: Uint128{Lo: 2}, Payload: []byte{1}, OriginTimestamp: 1}}
	b, err = AppendBatch(nil, msgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := DecodeBatchHeader(b); h.OriginTimestamp != 1 {
		t.Fatalf("origin %d", h.OriginTimestamp)
	}
	if f, _ := DecodeFrameHeader(b[BatchHeaderSize:]); f.TimestampDelta != 0xFFFFFFFF || f.OffsetDelta != 0 {
		t.Fatalf("%+v", f)
	}
}

// TestValidateBatchFaults breaks one thing at a time and checks the distinct error.
func TestValidateBatchFaults(t *testing.T) {
	le := binary.LittleEndian
	good := mustBatch(t, 3, 10)
	frame1 := BatchHeaderSize + FrameHeaderSize + 10 // second frame (first has no headers)
	for _, tc := range []struct {
		name   string
		mutate func(b []byte) []byte
		want   error
		text   string
	}{
		{"short", func(b []byte) []byte { return b[:100] }, ErrBatchLength, "100 bytes"},
		{"length field", func(b []byte) []byte { le.PutUint64(b[bhLength:], 1); return b }, ErrBatchLength, "batch_length 1"},
		{"extra byte", func(b []byte) []byte { return append(b, 0) }, ErrBatchLength, ""},
		{"count 0", func(b []byte) []byte { le.PutUint32(b[bhCount:], 0); return b }, ErrBatchCount, "message_count 0"},
		{"count 4", func(b []byte) []byte { le.PutUint32(b[bhCount:], 4); return b }, ErrBatchCount, "3 frames"},
		{"reserved", func(b []byte) []byte { b[200] = 1; return b }, ErrBatchReserved, "byte 200"},
		{"frame reserved", func(b []byte) []byte { b[frame1+45] = 1; return b }, ErrFrameReserved, "frame 1 at byte 314"},
		{"tiling", func(b []byte) []byte { le.PutUint32(b[frame1+fhPayLen:], 1000); return b }, ErrFrameTiling, "frame 1"},
		{"frame checksum", func(b []byte) []byte { b[frame1+FrameHeaderSize]++; return b }, ErrInvalidMessageChecksum, "frame 1 at byte 314"},
		{"batch checksum", func(b []byte) []byte { b[bhOrigin]++; return b }, ErrInvalidBatchChecksum, ""},
		{"batch checksum field", func(b []byte) []byte { b[bhChecksum]++; return b }, ErrInvalidBatchChecksum, ""},
	} {
		b := tc.mutate(bytes.Clone(good))
		_, err := ValidateBatch(b)
		if !errors.Is(err, tc.want) || !bytes.Contains([]byte(err.Error()), []byte(tc.text)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestStampAndSlice(t *testing.T) {
	b := mustBatch(t, 5, 20)
	if err := StampBatch(b, 3, 1000, 1_800_000_000_000_000); err != nil {
		t.Fatal(err)
	}
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.PartitionID != 3 || h.BaseOffset != 1000 || h.BaseTimestamp != 1_800_000_000_000_000 {
		t.Fatalf("%+v", h)
	}
	if err := StampBatch(b[:300], 0, 0, 0); !errors.Is(err, ErrBatchLength) {
		t.Fatalf("stamp bad: %v", err)
	}
	prefix := []byte("xx")
	out, err := SliceBatch(prefix, b, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[:2], prefix) {
		t.Fatal("prefix lost")
	}
	sub := out[2:]
	sh, err := ValidateBatch(sub)
	if err != nil {
		t.Fatal(err)
	}
	if sh.MessageCount != 2 || sh.BaseOffset != 1000 || sh.BaseTimestamp != h.BaseTimestamp || sh.OriginTimestamp != h.OriginTimestamp {
		t.Fatalf("%+v", sh)
	}
	_, msgs, err := DecodePollReply(append(PollReply{MessagesCount: 2}.Append(nil), sub...), nil)
	if err != nil || len(msgs) != 2 || msgs[0].Offset != 1001 || msgs[1].Offset != 1002 {
		t.Fatalf("%v %+v", err, msgs)
	}
	if full, _ := SliceBatch(nil, b, 0, 5); !bytes.Equal(full, b) {
		t.Fatal("full slice differs")
	}
	for _, r := range [][2]int{{-1, 2}, {0, 6}, {2, 2}, {3, 1}} {
		if _, err := SliceBatch(nil, b, r[0], r[1]); !errors.Is(err, ErrSliceRange) {
			t.Errorf("%v: %v", r, err)
		}
	}
	out, n, err := SliceBatchFrom(nil, b, 1003, 0)
	if err != nil || n != 2 {
		t.Fatalf("%d %v", n, err)
	}
	if sh, _ := ValidateBatch(out); sh.MessageCount != 2 {
		t.Fatal(sh)
	}
	out, n, err = SliceBatchFrom(nil, b, 999, 1)
	if err != nil || n != 1 {
		t.Fatalf("%d %v", n, err)
	}
	_, msgs, _ = DecodePollReply(append(PollReply{MessagesCount: 1}.Append(nil), out...), nil)
	if msgs[0].Offset != 1000 {
		t.Fatal(msgs[0].Offset)
	}
	if out, n, err := SliceBatchFrom(nil, b, 1005, 0); n != 0 || err != nil || out != nil {
		t.Fatalf("beyond end: %d %v", n, err)
	}
}

func TestDecodePollReply(t *testing.T) {
	b1, b2 := mustBatch(t, 2, 8), mustBatch(t, 3, 8)
	_ = StampBatch(b1, 0, 0, 10)
	_ = StampBatch(b2, 0, 2, 20)
	body := PollReply{PartitionID: 0, CurrentOffset: 4, MessagesCount: 5}.Append(nil)
	body = append(append(body, b1...), b2...)
	pr, msgs, err := DecodePollReply(body, nil)
	if err != nil || pr.CurrentOffset != 4 || len(msgs) != 5 {
		t.Fatalf("%+v %d %v", pr, len(msgs), err)
	}
	for i, m := range msgs {
		if m.Offset != uint64(i) || (i < 2) != (m.Timestamp == 10) {
			t.Errorf("msg %d: %+v", i, m)
		}
	}
	if err := VerifyPollChecksums(body); err != nil {
		t.Fatal(err)
	}
	// Empty poll and the resync sentinel.
	pr, msgs, err = DecodePollReply(PollReply{PartitionID: ResyncPartition}.Append(nil), msgs)
	if err != nil || pr.PartitionID != ResyncPartition || len(msgs) != 0 {
		t.Fatalf("%+v %v", pr, err)
	}
	// Count mismatch, short head, truncated batch.
	bad := bytes.Clone(body)
	bad[12] = 6
	if _, _, err := DecodePollReply(bad, nil); !errors.Is(err, ErrBatchCount) {
		t.Errorf("count: %v", err)
	}
	if _, _, err := DecodePollReply(body[:15], nil); !errors.Is(err, ErrTruncated) {
		t.Errorf("head: %v", err)
	}
	if _, _, err := DecodePollReply(body[:len(body)-1], nil); !errors.Is(err, ErrBatchLength) {
		t.Errorf("truncated: %v", err)
	}
	bad = bytes.Clone(body)
	bad[len(bad)-1]++
	if _, _, err := DecodePollReply(bad, nil); err != nil {
		t.Errorf("layout-only decode rejected a checksum fault: %v", err)
	}
	if err := VerifyPollChecksums(bad); !errors.Is(err, ErrInvalidMessageChecksum) {
		t.Errorf("verify: %v", err)
	}
}

// TestZeroAllocHotPaths pins the 0-allocation promise of the message hot paths.
func TestZeroAllocHotPaths(t *testing.T) {
	if raceEnabled {
		t.Skip("-race instrumentation allocates")
	}
	msgs := sampleMessages(100, 100)
	dst, _ := AppendBatch(nil, msgs, nil)
	if a := testing.AllocsPerRun(50, func() { dst, _ = AppendBatch(dst[:0], msgs, nil) }); a != 0 {
		t.Errorf("AppendBatch: %v allocs", a)
	}
	body := append(PollReply{MessagesCount: 100}.Append(nil), dst...)
	out := make([]Message, 0, 100)
	if a := testing.AllocsPerRun(50, func() { _, out, _ = DecodePollReply(body, out) }); a != 0 {
		t.Errorf("DecodePollReply: %v allocs", a)
	}
	if a := testing.AllocsPerRun(50, func() { _, _ = ValidateBatch(dst) }); a != 0 {
		t.Errorf("ValidateBatch: %v allocs", a)
	}
	if a := testing.AllocsPerRun(50, func() { _ = StampBatch(dst, 1, 2, 3) }); a != 0 {
		t.Errorf("StampBatch: %v allocs", a)
	}
	sl := make([]byte, 0, len(dst))
	if a := testing.AllocsPerRun(50, func() { sl, _ = SliceBatch(sl[:0], dst, 10, 20) }); a != 0 {
		t.Errorf("SliceBatch: %v allocs", a)
	}
	kvs := make([]KV, 0, 4)
	if a := testing.AllocsPerRun(50, func() { kvs, _ = out[1].Headers(kvs[:0]) }); a != 0 {
		t.Errorf("Headers: %v allocs", a)
	}
}
