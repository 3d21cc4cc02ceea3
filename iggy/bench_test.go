package iggy_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// Throughput of the client against the embedded server on loopback: batches of 1000
// messages of 100 B and 1 KiB, with the server syncing every write (always) or on an
// interval. MB/s counts payload bytes.

const benchBatch = 1000

func benchCases(b *testing.B, run func(b *testing.B, c *iggy.Client, size int)) {
	for _, fsync := range []string{server.FsyncAlways, server.FsyncInterval} {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("fsync=%s/size=%d", fsync, size), func(b *testing.B) {
				s := servertest.Start(b, servertest.WithFsync(fsync))
				c := dial(b, s)
				setup(b, c, 1)
				b.SetBytes(int64(benchBatch * size))
				b.ReportAllocs()
				run(b, c, size)
			})
		}
	}
}

func benchMessages(size int) []iggy.Message {
	msgs := make([]iggy.Message, benchBatch)
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	for i := range msgs {
		msgs[i].Payload = payload
	}
	return msgs
}

func BenchmarkSend(b *testing.B) {
	benchCases(b, func(b *testing.B, c *iggy.Client, size int) {
		ctx := context.Background()
		msgs := benchMessages(size)
		n := 0
		for b.Loop() {
			if _, err := c.SendMessages(ctx, sID, tID, wire.ToPartition(0), msgs); err != nil {
				b.Fatal(err)
			}
			n += len(msgs)
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	})
}

func BenchmarkPoll(b *testing.B) {
	benchCases(b, func(b *testing.B, c *iggy.Client, size int) {
		ctx := context.Background()
		msgs := benchMessages(size)
		const batches = 50
		for range batches {
			if _, err := c.SendMessages(ctx, sID, tID, wire.ToPartition(0), msgs); err != nil {
				b.Fatal(err)
			}
		}
		req := iggy.PollRequest{Consumer: single("bench"), Stream: sID, Topic: tID, Partition: u32(0), Count: benchBatch}
		n, i := 0, 0
		for b.Loop() {
			req.Strategy = wire.PollOffset(uint64(i%batches) * benchBatch)
			r, err := c.PollMessages(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if len(r.Messages) != benchBatch {
				b.Fatalf("polled %d", len(r.Messages))
			}
			n += len(r.Messages)
			r.Release()
			i++
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// BenchmarkIdlePoll is the poll a caught-up member repeats every poll interval on a
// partition with nothing new, whose last batch holds 1000 messages of size bytes: from
// the next offset (an empty reply; what a member did before it polled one message of
// overlap) and from the last delivered offset (one message back: what it does now, to
// notice a purge, rewind.go). The difference is the cost of the overlap per idle poll.
func BenchmarkIdlePoll(b *testing.B) {
	for _, size := range []int{100, 1024} {
		for _, back := range []uint64{0, 1} {
			name := map[uint64]string{0: "empty", 1: "overlap"}[back]
			b.Run(fmt.Sprintf("size=%d/%s", size, name), func(b *testing.B) {
				s := servertest.Start(b, servertest.WithFsync(server.FsyncInterval))
				c := dial(b, s)
				setup(b, c, 1)
				ctx := context.Background()
				if _, err := c.SendMessages(ctx, sID, tID, wire.ToPartition(0), benchMessages(size)); err != nil {
					b.Fatal(err)
				}
				req := iggy.PollRequest{Consumer: single("bench"), Stream: sID, Topic: tID, Partition: u32(0),
					Count: benchBatch + uint32(back), Strategy: wire.PollOffset(benchBatch - back)}
				b.ReportAllocs()
				for b.Loop() {
					r, err := c.PollMessages(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					if uint64(len(r.Messages)) != back {
						b.Fatalf("polled %d", len(r.Messages))
					}
					r.Release()
				}
			})
		}
	}
}
