package wire

import (
	"fmt"
	"testing"
)

// The message hot paths: a 1000-message send batch and a 1000-message poll reply, with
// 100-byte and 1 KiB payloads. Each reports MB/s over the encoded bytes and must show 0
// allocs/op (a reused dst for AppendBatch, a reused slice for DecodePollReply).

var benchSizes = []int{100, 1024}

func benchMessages(size int) []SendMessage {
	msgs := make([]SendMessage, 1000)
	p := make([]byte, size)
	for i := range msgs {
		msgs[i] = SendMessage{ID: Uint128{Lo: uint64(i + 1)}, OriginTimestamp: 1_700_000_000_000_000 + uint64(i), Payload: p}
	}
	return msgs
}

func BenchmarkAppendBatch(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("1000x%dB", size), func(b *testing.B) {
			msgs := benchMessages(size)
			dst, err := AppendSendMessages(nil, NumericID(0), NumericID(0), ToPartition(0), msgs, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(dst)))
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = AppendSendMessages(dst[:0], NumericID(0), NumericID(0), ToPartition(0), msgs, nil)
			}
		})
	}
}

func BenchmarkDecodePollReply(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("1000x%dB", size), func(b *testing.B) {
			batch, err := AppendBatch(nil, benchMessages(size), nil)
			if err != nil {
				b.Fatal(err)
			}
			_ = StampBatch(batch, 0, 0, 1_700_000_000_000_000)
			body := append(PollReply{CurrentOffset: 999, MessagesCount: 1000}.Append(nil), batch...)
			msgs := make([]Message, 0, 1000)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				_, msgs, err = DecodePollReply(body, msgs)
			}
			if err != nil || len(msgs) != 1000 {
				b.Fatal(err, len(msgs))
			}
		})
	}
}

// BenchmarkValidateBatch is the server's admission cost (all checksums).
func BenchmarkValidateBatch(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("1000x%dB", size), func(b *testing.B) {
			batch, _ := AppendBatch(nil, benchMessages(size), nil)
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ValidateBatch(batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
