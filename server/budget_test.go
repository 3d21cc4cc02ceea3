package server_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// fillBatches sends batches of 32 messages of 1,000 bytes each (about 34 KB a batch)
// to partition 0 of s/t.
func fillBatches(t *testing.T, c *tclient, st, tp wire.Identifier, batches int) {
	t.Helper()
	payloads := make([]string, 32)
	for i := range payloads {
		payloads[i] = strings.Repeat("x", 1000)
	}
	for range batches {
		c.send(st, tp, wire.ToPartition(0), payloads...)
	}
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

// TestPollWaitsForReplyBudget is issue 22's memory defect: concurrent maximum polls
// had no bound across connections. With MaxPollBytes 64 KiB each poll reserves
// 128 KiB before it reads and then holds its ~69 KB reply until written; with a
// 240,000-byte budget two replies held unwritten leave no room for a third poll,
// which waits until one of them is written and then gets its messages.
func TestPollWaitsForReplyBudget(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.MaxPollBytes = 64 << 10
		c.MaxReplyBytes = 240_000
	}))
	admin := login(t, s)
	st, tp := setup(t, admin, 1)
	fillBatches(t, admin, st, tp, 4)

	entered, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	server.SetBeforeReply(s, func(code wire.Code) {
		if code != wire.CodePollMessages {
			return
		}
		select {
		case entered <- struct{}{}:
		case <-done:
			return
		}
		select {
		case <-release:
		case <-done:
		}
	})
	t.Cleanup(func() { close(done) }) // runs before the server's Close: no reply stays held
	type result struct {
		offsets []uint64
		err     error
	}
	results := make(chan result, 3)
	poll := func(c *tclient) {
		p, err := c.call(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollFirst(), Count: 1000})
		var r result
		if r.err = err; err == nil {
			var msgs []wire.Message
			_, msgs, r.err = wire.DecodePollReply(p, nil)
			for _, m := range msgs {
				r.offsets = append(r.offsets, m.Offset)
			}
		}
		results <- r
	}
	a, b, c := login(t, s), login(t, s), login(t, s)
	go poll(a)
	go poll(b)
	<-entered
	<-entered // two replies built and held unwritten
	go poll(c)
	testkit.WaitFor(t, "the third poll to wait for the reply budget", func() bool {
		_, _, waiting := server.ReplyBudget(s)
		return waiting == 1
	})
	select {
	case r := <-results:
		t.Fatalf("a poll finished while every reply was held: %v", r)
	default:
	}
	release <- struct{}{} // one held reply is written and releases its bytes
	<-entered             // the third poll got the budget and built its reply
	if _, _, waiting := server.ReplyBudget(s); waiting != 0 {
		t.Fatalf("%d polls still waiting after a reply was released", waiting)
	}
	release <- struct{}{}
	release <- struct{}{}
	want := seq(0, 63) // two stored batches reach the 64 KiB byte cap
	for range 3 {
		r := <-results
		if r.err != nil || !slices.Equal(r.offsets, want) {
			t.Fatalf("poll: offsets %v, err %v; want %v", r.offsets, r.err, want)
		}
	}
	testkit.WaitFor(t, "every reply's bytes released", func() bool {
		used, _, _ := server.ReplyBudget(s)
		return used == 0
	})
	if _, peak, _ := server.ReplyBudget(s); peak > 240_000 {
		t.Fatalf("peak reserved %d, above the 240,000-byte budget", peak)
	}
}

// TestReplyBudgetShrinksPolls: a budget smaller than two polls' worth caps what one
// poll loads at half of it, so a poll gets fewer messages instead of waiting forever:
// 30,000 bytes stop the read after the first stored batch (32 messages).
func TestReplyBudgetShrinksPolls(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.MaxReplyBytes = 60_000
	}))
	c := login(t, s)
	st, tp := setup(t, c, 1)
	fillBatches(t, c, st, tp, 3)
	got := c.poll(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollFirst(), Count: 1000})
	if !slices.Equal(got.offsets, seq(0, 31)) || got.head.CurrentOffset != 95 {
		t.Fatalf("poll: offsets %v current %d; want 0..31, current 95", got.offsets, got.head.CurrentOffset)
	}
	got = c.poll(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollOffset(32), Count: 1000})
	if !slices.Equal(got.offsets, seq(32, 63)) {
		t.Fatalf("second poll: offsets %v; want 32..63", got.offsets)
	}
}

// TestPartitionCaps is issue 22's 200,000 partitions: creating partitions past
// MaxPartitionsPerTopic or MaxPartitions is refused with 2015 TooManyPartitions, and
// nothing is created by a refused request.
func TestPartitionCaps(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) {
		c.MaxPartitionsPerTopic = 5
		c.MaxPartitions = 8
	}))
	c := login(t, s)
	c.must(wire.CreateStreamRequest{Name: "s"})
	st := wire.NamedID("s")
	c.wantErr(wire.CreateTopicRequest{Stream: st, PartitionsCount: 6, Name: "big"}, wire.ErrTooManyPartitions)
	c.must(wire.CreateTopicRequest{Stream: st, PartitionsCount: 4, Name: "t1"})
	c.must(wire.CreatePartitionsRequest{Stream: st, Topic: wire.NamedID("t1"), PartitionsCount: 1})
	c.wantErr(wire.CreatePartitionsRequest{Stream: st, Topic: wire.NamedID("t1"), PartitionsCount: 1}, wire.ErrTooManyPartitions)
	c.must(wire.CreateTopicRequest{Stream: st, PartitionsCount: 3, Name: "t2"}) // 8 in all
	c.wantErr(wire.CreateTopicRequest{Stream: st, PartitionsCount: 1, Name: "t3"}, wire.ErrTooManyPartitions)
	c.wantErr(wire.CreatePartitionsRequest{Stream: st, Topic: wire.NamedID("t2"), PartitionsCount: 1}, wire.ErrTooManyPartitions)
	c.must(wire.CreateTopicRequest{Stream: st, PartitionsCount: 0, Name: "t4"}) // no partitions: allowed
	for name, want := range map[string]uint32{"t1": 5, "t2": 3, "t4": 0} {
		d, found, err := wire.DecodeTopicDetails(c.must(wire.GetTopicRequest{Stream: st, Topic: wire.NamedID(name)}))
		if err != nil || !found || d.PartitionsCount != want {
			t.Fatalf("topic %s: %d partitions (found %v, %v), want %d", name, d.PartitionsCount, found, err, want)
		}
	}
	for _, name := range []string{"big", "t3"} {
		if _, found, err := wire.DecodeTopicDetails(c.must(wire.GetTopicRequest{Stream: st, Topic: wire.NamedID(name)})); found || err != nil {
			t.Fatalf("refused topic %s: found %v, %v", name, found, err)
		}
	}
	c.must(wire.DeletePartitionsRequest{Stream: st, Topic: wire.NamedID("t1"), PartitionsCount: 2})
	c.must(wire.CreatePartitionsRequest{Stream: st, Topic: wire.NamedID("t2"), PartitionsCount: 2}) // room again: 3+5 = 8
}
