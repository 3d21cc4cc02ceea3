package server_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

func single(id uint32) wire.Consumer {
	return wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(id)}
}

func TestSendAndPollStrategies(t *testing.T) {
	s := servertest.Start(t)
	c := login(t, s)
	st, tp := setup(t, c, 3)
	if off := c.send(st, tp, wire.ToPartition(1), "m0", "m1", "m2"); off != 0 {
		t.Fatalf("first base offset %d", off)
	}
	// mid is a timestamp strictly between the two sends' (the server stamps in microseconds).
	now := func() uint64 { return uint64(time.Now().UnixMicro()) }
	sent := now()
	testkit.WaitFor(t, "the clock to pass the first send", func() bool { return now() > sent })
	mid := now()
	testkit.WaitFor(t, "the clock to pass mid", func() bool { return now() > mid })
	if off := c.send(st, tp, wire.ToPartition(1), "m3", "m4"); off != 3 {
		t.Fatalf("second base offset %d", off)
	}
	c.send(st, tp, wire.ToPartition(1), "m5")
	q := func(strategy wire.PollingStrategy, count uint32) polled {
		return c.poll(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Partition: wire.PartitionID(1), Strategy: strategy, Count: count})
	}
	cases := []struct {
		name     string
		strategy wire.PollingStrategy
		count    uint32
		want     []uint64
	}{
		{"first", wire.PollFirst(), 2, []uint64{0, 1}},
		{"offset inside batch", wire.PollOffset(1), 3, []uint64{1, 2, 3}}, // two partial batches
		{"offset to end", wire.PollOffset(4), 100, []uint64{4, 5}},
		{"last", wire.PollLast(), 2, []uint64{4, 5}},
		{"last more than all", wire.PollLast(), 100, []uint64{0, 1, 2, 3, 4, 5}},
		{"next without stored", wire.PollNext(), 2, []uint64{0, 1}},
		{"timestamp", wire.PollTimestamp(mid), 10, []uint64{3, 4, 5}},
		{"timestamp future", wire.PollTimestamp(uint64(time.Now().Add(time.Hour).UnixMicro())), 10, nil},
		{"past end", wire.PollOffset(6), 10, nil},
		{"count 0", wire.PollFirst(), 0, nil},
	}
	for _, tc := range cases {
		got := q(tc.strategy, tc.count)
		if !reflect.DeepEqual(got.offsets, tc.want) {
			t.Errorf("%s: offsets %v, want %v", tc.name, got.offsets, tc.want)
		}
		if got.head.PartitionID != 1 || got.head.CurrentOffset != 5 || got.head.MessagesCount != uint32(len(tc.want)) {
			t.Errorf("%s: head %+v", tc.name, got.head)
		}
	}
	if got := q(wire.PollOffset(1), 3); strings.Join(got.payloads, ",") != "m1,m2,m3" {
		t.Errorf("payloads %v", got.payloads)
	}
	// Empty partition: empty poll with current offset 0.
	empty := c.poll(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Partition: wire.PartitionID(2), Strategy: wire.PollFirst(), Count: 5})
	if empty.head.PartitionID != 2 || empty.head.CurrentOffset != 0 || len(empty.offsets) != 0 {
		t.Errorf("empty partition %+v", empty)
	}
	// Kind-1 poll errors.
	c.wantErr(wire.PollMessagesRequest{Consumer: single(1), Stream: wire.NamedID("x"), Topic: tp, Count: 1, Strategy: wire.PollFirst()}, wire.ErrStreamIDNotFound)
	c.wantErr(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: wire.NamedID("x"), Count: 1, Strategy: wire.PollFirst()}, wire.ErrTopicIDNotFound)
	c.wantErr(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Partition: wire.PartitionID(9), Count: 1, Strategy: wire.PollFirst()}, wire.ErrPartitionNotFound)
	// An undecodable poll is an empty poll for partition 0.
	h := c.header(wire.CodePollMessages)
	_, p, err := c.roundTrip(h, []byte{1, 2, 3})
	if err != nil || len(p) != wire.PollReplyHeaderSize {
		t.Errorf("undecodable poll: %x %v", p, err)
	}

	// Partitioning: by key = XXH32 % n, balanced = round-robin.
	keyed := c.send(st, tp, wire.ByKey([]byte("key-1")), "k")
	if keyed != 0 { // partition 1 of 3 per the reference vector holds 6 messages; 0 and 2 are empty
		got := c.poll(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Partition: wire.PartitionID(1), Strategy: wire.PollLast(), Count: 1})
		if got.payloads[0] != "k" {
			t.Fatalf("key-1 did not land on partition 1: base %d", keyed)
		}
	}
	seen := map[uint32]bool{}
	for range 3 {
		body, _ := wire.AppendSendMessages(nil, st, tp, wire.Balanced(), []wire.SendMessage{{Payload: []byte("b")}}, newClientID)
		_, pl, err := c.roundTrip(c.header(wire.CodeSendMessages), body)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := wire.DecodeSendMessagesReply(pl)
		seen[r.Confirmations[0].PartitionID] = true
	}
	if len(seen) != 3 {
		t.Errorf("balanced hit partitions %v", seen)
	}
}

func TestSendAdmission(t *testing.T) {
	s := servertest.Start(t)
	c := login(t, s)
	st, tp := setup(t, c, 1)
	good, err := wire.AppendSendMessages(nil, st, tp, wire.ToPartition(0), []wire.SendMessage{{Payload: []byte("hello")}}, newClientID)
	if err != nil {
		t.Fatal(err)
	}
	send := func(body []byte) error {
		_, _, err := c.roundTrip(c.header(wire.CodeSendMessages), body)
		return err
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 1 // payload byte: frame checksum mismatch
	if err := send(bad); !errors.Is(err, wire.ErrInvalidMessageChecksum) {
		t.Errorf("corrupt payload: %v", err)
	}
	if err := send(good[:len(good)-1]); err == nil {
		t.Error("truncated batch accepted")
	}
	missing, _ := wire.AppendSendMessages(nil, st, tp, wire.ToPartition(5), []wire.SendMessage{{Payload: []byte("x")}}, newClientID)
	if err := send(missing); !errors.Is(err, wire.ErrResourceNotFound) {
		t.Errorf("missing partition: %v", err)
	}
	noStream, _ := wire.AppendSendMessages(nil, wire.NamedID("zz"), tp, wire.ToPartition(0), []wire.SendMessage{{Payload: []byte("x")}}, newClientID)
	if err := send(noStream); !errors.Is(err, wire.ErrResourceNotFound) {
		t.Errorf("missing stream: %v", err)
	}
	if err := send([]byte{1, 2, 3}); !errors.Is(err, wire.ErrResourceNotFound) {
		t.Errorf("undecodable metadata: %v", err)
	}
	if err := send(good); err != nil {
		t.Errorf("good batch: %v", err)
	}
	got := c.poll(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Strategy: wire.PollFirst(), Count: 10})
	if len(got.offsets) != 1 || got.payloads[0] != "hello" {
		t.Errorf("only the good batch is stored: %+v", got)
	}
}

func TestAutoCommitAndConsumerOffsets(t *testing.T) {
	s := servertest.Start(t)
	c := login(t, s)
	st, tp := setup(t, c, 2)
	c.send(st, tp, wire.ToPartition(0), "0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
	named := wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NamedID("c-next")}
	next := func(auto bool, count uint32) []uint64 {
		return c.poll(wire.PollMessagesRequest{Consumer: named, Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollNext(), Count: count, AutoCommit: auto}).offsets
	}
	getOff := func(cons wire.Consumer, p uint32) (wire.ConsumerOffsetInfo, bool) {
		info, found, err := wire.DecodeConsumerOffsetInfo(c.must(wire.GetConsumerOffsetRequest{Consumer: cons, Stream: st, Topic: tp, Partition: wire.PartitionID(p)}))
		if err != nil {
			t.Fatal(err)
		}
		return info, found
	}
	if got := next(false, 3); !reflect.DeepEqual(got, []uint64{0, 1, 2}) {
		t.Fatalf("next %v", got)
	}
	if _, found := getOff(named, 0); found {
		t.Fatal("offset stored without auto-commit")
	}
	next(true, 3)
	if info, found := getOff(named, 0); !found || info != (wire.ConsumerOffsetInfo{PartitionID: 0, CurrentOffset: 9, StoredOffset: 2}) {
		t.Fatalf("after auto-commit %+v %v", info, found)
	}
	if got := next(true, 3); !reflect.DeepEqual(got, []uint64{3, 4, 5}) {
		t.Fatalf("next after commit %v", got)
	}
	// Auto-commit never moves backwards: polling offset 0 with auto-commit keeps 5.
	c.poll(wire.PollMessagesRequest{Consumer: named, Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollOffset(0), Count: 1, AutoCommit: true})
	if info, _ := getOff(named, 0); info.StoredOffset != 5 {
		t.Fatalf("auto-commit moved back to %d", info.StoredOffset)
	}
	// The string id is stored under XXH32(name): a numeric consumer with that id sees it.
	if info, found := getOff(single(wire.XXH32([]byte("c-next"), 0)), 0); !found || info.StoredOffset != 5 {
		t.Fatalf("xxh32 alias %+v %v", info, found)
	}
	// Store sets exactly (backwards allowed); beyond current or empty partition → 4100.
	c.must(wire.StoreConsumerOffsetRequest{Consumer: named, Stream: st, Topic: tp, Partition: wire.PartitionID(0), Offset: 1})
	if got := next(false, 2); !reflect.DeepEqual(got, []uint64{2, 3}) {
		t.Fatalf("next after store 1: %v", got)
	}
	c.wantErr(wire.StoreConsumerOffsetRequest{Consumer: named, Stream: st, Topic: tp, Partition: wire.PartitionID(0), Offset: 10}, wire.ErrInvalidOffset)
	c.wantErr(wire.StoreConsumerOffsetRequest{Consumer: named, Stream: st, Topic: tp, Partition: wire.PartitionID(1), Offset: 0}, wire.ErrInvalidOffset)
	c.wantErr(wire.StoreConsumerOffsetRequest{Consumer: named, Stream: st, Topic: tp, Offset: 0}, wire.ErrResourceNotFound) // no partition
	c.wantErr(wire.StoreConsumerOffsetRequest{Consumer: named, Stream: wire.NamedID("x"), Topic: tp, Partition: wire.PartitionID(0)}, wire.ErrResourceNotFound)
	c.must(wire.DeleteConsumerOffsetRequest{Consumer: named, Stream: st, Topic: tp, Partition: wire.PartitionID(0)})
	c.wantErr(wire.DeleteConsumerOffsetRequest{Consumer: named, Stream: st, Topic: tp, Partition: wire.PartitionID(0)}, wire.ErrConsumerOffsetNotFound)
	if _, found := getOff(named, 0); found {
		t.Fatal("offset survived delete")
	}
	// GetConsumerOffset: missing partition of an existing topic → 3007; missing topic → empty.
	c.wantErr(wire.GetConsumerOffsetRequest{Consumer: named, Stream: st, Topic: tp, Partition: wire.PartitionID(7)}, wire.ErrPartitionNotFound)
	if p := c.must(wire.GetConsumerOffsetRequest{Consumer: named, Stream: st, Topic: wire.NamedID("x"), Partition: wire.PartitionID(0)}); len(p) != 0 {
		t.Fatalf("missing topic offset %x", p)
	}
	// Purge clears stored offsets.
	c.must(wire.StoreConsumerOffsetRequest{Consumer: named, Stream: st, Topic: tp, Partition: wire.PartitionID(0), Offset: 4})
	c.must(wire.PurgeTopicRequest{Stream: st, Topic: tp})
	if _, found := getOff(named, 0); found {
		t.Fatal("offset survived purge")
	}
}

func TestPollByteCap(t *testing.T) {
	s := servertest.Start(t, servertest.WithConfig(func(c *server.Config) { c.MaxPollBytes = 1000 }))
	c := login(t, s)
	st, tp := setup(t, c, 1)
	big := strings.Repeat("x", 600)
	for range 4 {
		c.send(st, tp, wire.ToPartition(0), big)
	}
	got := c.poll(wire.PollMessagesRequest{Consumer: single(1), Stream: st, Topic: tp, Strategy: wire.PollFirst(), Count: 100})
	if !reflect.DeepEqual(got.offsets, []uint64{0, 1}) {
		t.Fatalf("byte-capped poll returned %v, want [0 1]", got.offsets)
	}
}
