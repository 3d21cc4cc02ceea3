package connect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// seekSink is a recSink that keeps its own positions (sdk.PartitionSeeker): its first
// failures calls of Assigned fail, then it returns start.
type seekSink struct {
	*recSink
	start    map[uint32]uint64
	failures int

	smu   sync.Mutex
	calls [][]uint32
}

func (s *seekSink) Assigned(_ context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
	s.smu.Lock()
	defer s.smu.Unlock()
	ids := make([]uint32, len(parts))
	for i, p := range parts {
		ids[i] = p.PartitionID
	}
	s.calls = append(s.calls, ids)
	if s.failures > 0 {
		s.failures--
		return nil, errors.New("database unavailable")
	}
	out := map[sdk.Partition]uint64{}
	for id, off := range s.start {
		out[sdk.Partition{StreamID: topic.StreamID, TopicID: topic.TopicID, PartitionID: id}] = off
	}
	return out, nil
}

// TestSeekOnAssignment: a sink that says partition 0 starts at 17 (and says nothing of
// partition 1) gets 17..39 of partition 0 and all of partition 1; its commits are valid
// from the sought offset on and the group's stored offsets reach the ends. Assigned failed
// twice first: it is retried, and nothing was delivered before it answered.
func TestSeekOnAssignment(t *testing.T) {
	env := newIggyEnv(t)
	env.Topic("s", "t", 2)
	env.Fill("s", "t", 0, 40, nil)
	env.Fill("s", "t", 1, 40, nil)
	sink := &seekSink{recSink: newRecSink(), start: map[uint32]uint64{0: 17}, failures: 2}
	sink.commitEach = true
	rt := env.start(testSinkConfig(config.CommitSinkControlled, config.FailureStop), sink)
	testkit.WaitFor(t, "stored 39 on both", func() bool {
		o0, ok0 := env.Stored("g", "s", "t", 0)
		o1, ok1 := env.Stored("g", "s", "t", 1)
		return ok0 && ok1 && o0 == 39 && o1 == 39
	})
	stopRuntime(t, rt)
	if got := sink.got(0); !equalOffsets(got, seq(17, 39)) {
		t.Fatalf("partition 0 delivered %v, want 17..39", got)
	}
	if got := sink.got(1); !equalOffsets(got, seq(0, 39)) {
		t.Fatalf("partition 1 delivered %v, want 0..39", got)
	}
	sink.smu.Lock()
	calls := fmt.Sprint(sink.calls)
	sink.smu.Unlock()
	if calls != "[[0 1] [0 1] [0 1]]" {
		t.Fatalf("Assigned calls = %s, want [0 1] three times (two failures retried)", calls)
	}
	if len(sink.commitErr) != 0 {
		t.Fatalf("commits refused: %v", sink.commitErr)
	}
}

// rejectSink rejects offsets reject of partition 0 (sdk.RejectedMessages) and records the
// rest; calls counts its Consume calls per batch first offset.
type rejectSink struct {
	*recSink
	reject []uint64
	cmu    sync.Mutex
	calls  map[uint64]int
}

func (s *rejectSink) Consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	s.cmu.Lock()
	s.calls[msgs[0].Offset]++
	s.cmu.Unlock()
	var keep []sdk.ConsumedMessage
	var rej []uint64
	for _, m := range msgs {
		if slices.Contains(s.reject, m.Offset) {
			rej = append(rej, m.Offset)
		} else {
			keep = append(keep, m)
		}
	}
	if err := s.recSink.Consume(ctx, topic, meta, keep); err != nil {
		return err
	}
	if len(rej) > 0 {
		return &sdk.RejectedMessages{Offsets: rej, Err: errors.New("check constraint violated")}
	}
	return nil
}

// TestRejectedMessagesAlone: offsets 13 and 17 of 0..49 are rejected by the sink. The batch
// is not retried; dead_letter sends exactly those two (ferry-stage = consume), skip counts
// them, and both store 49; stop stops the sink with nothing stored past 9.
func TestRejectedMessagesAlone(t *testing.T) {
	for _, policy := range []config.FailurePolicy{config.FailureDeadLetter, config.FailureSkip, config.FailureStop} {
		t.Run(string(policy), func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			if policy == config.FailureDeadLetter {
				env.Topic("dlq", "dead", 1) // the runtime creates no topic (ferry run --create-topics does)
			}
			env.Fill("s", "t", 0, 50, nil)
			sink := &rejectSink{recSink: newRecSink(), reject: []uint64{13, 17}, calls: map[uint64]int{}}
			rt := env.start(testSinkConfig(config.CommitAfterConsuming, policy), sink)
			if policy == config.FailureStop {
				testkit.WaitFor(t, "the sink stopped in error", func() bool { return rt.Status()[0].State == StateError })
				stopRuntime(t, rt)
				if o, ok := env.Stored("g", "s", "t", 0); ok && o > 9 {
					t.Fatalf("stored %d, want at most 9", o)
				}
				if le := rt.Status()[0].LastError; le == nil || !strings.Contains(le.Message, "offsets [13 17]") {
					t.Fatalf("last error %+v, want one naming offsets [13 17]", le)
				}
				return
			}
			testkit.WaitFor(t, "stored 49", func() bool { o, ok := env.Stored("g", "s", "t", 0); return ok && o == 49 })
			stopRuntime(t, rt)
			st := rt.Status()[0].Stats
			sink.cmu.Lock()
			calls := sink.calls[10]
			sink.cmu.Unlock()
			if calls != 1 {
				t.Fatalf("batch 10..19 consumed %d times, want once (a rejection is not retried)", calls)
			}
			if st.Delivered != 48 || st.ConsumeErrors != 0 {
				t.Fatalf("stats %+v", st)
			}
			if policy == config.FailureSkip {
				if st.Skipped != 2 || st.DeadLettered != 0 {
					t.Fatalf("stats %+v", st)
				}
				env.wantNoStream("dlq")
				return
			}
			if st.DeadLettered != 2 {
				t.Fatalf("stats %+v", st)
			}
			zero := uint32(0)
			res, err := env.Admin.PollMessages(bg(t), iggy.PollRequest{
				Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
				Stream:   iggy.Name("dlq"), Topic: iggy.Name("dead"), Partition: &zero,
				Strategy: wire.PollOffset(0), Count: 100,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			if len(res.Messages) != 2 {
				t.Fatalf("dead-letter topic holds %d messages, want 2", len(res.Messages))
			}
			for i, src := range []uint64{13, 17} {
				m := res.Messages[i]
				kvs, err := m.Headers(nil)
				if err != nil {
					t.Fatal(err)
				}
				stage, _ := wire.LookupKV(kvs, HeaderStage)
				off, _ := wire.LookupKV(kvs, HeaderSourceOffset)
				e, _ := wire.LookupKV(kvs, HeaderError)
				if string(m.Payload) != fmt.Sprintf("p0-m%d", src) || string(stage.Raw) != "consume" ||
					string(off.Raw) != string(wire.Uint64Value(src).Raw) || !strings.Contains(string(e.Raw), "check constraint violated") {
					t.Fatalf("dead letter %d: payload %q stage %q offset %v error %q; want p0-m%d, consume, %d", i, m.Payload, stage.Raw, off.Raw, e.Raw, src, src)
				}
			}
		})
	}
}

// keeperSink is a seekSink that says whether it keeps its positions (sdk.PositionKeeper).
type keeperSink struct {
	*seekSink
	keeps bool
}

func (s *keeperSink) KeepsPositions() bool { return s.keeps }

// TestPositionKeeperStoresLessOften: a sink that keeps its own positions gets its done
// offsets stored 100 ms after they were done instead of commit.delay's default, unless the
// file sets commit.delay or the sink says it does not keep them as configured; either
// way every partition's stored offset reaches its end.
func TestPositionKeeperStoresLessOften(t *testing.T) {
	const line = "the sink keeps its own positions"
	for _, c := range []struct {
		name     string
		keeps    bool
		delaySet bool
		want     string // the logged store_delay; "" for no line
	}{
		{"keeper", true, false, "store_delay=100ms"},
		{"keeper_with_delay_set", true, true, "store_delay=5ms"},
		{"not_keeping_as_configured", false, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newIggyEnv(t)
			env.Topic("s", "t", 2)
			env.Fill("s", "t", 0, 40, nil)
			env.Fill("s", "t", 1, 40, nil)
			sink := &keeperSink{seekSink: &seekSink{recSink: newRecSink(), start: map[uint32]uint64{}}, keeps: c.keeps}
			sink.commitEach = true
			cfg := testSinkConfig(config.CommitSinkControlled, config.FailureStop)
			cfg.Commit.Interval, cfg.Commit.DelaySet = time.Second, c.delaySet
			rt, logs := env.startLogged(cfg, sink)
			testkit.WaitFor(t, "stored 39 on both", func() bool {
				o0, ok0 := env.Stored("g", "s", "t", 0)
				o1, ok1 := env.Stored("g", "s", "t", 1)
				return ok0 && ok1 && o0 == 39 && o1 == 39
			})
			stopRuntime(t, rt)
			var got string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, line) {
					got = l[strings.Index(l, "store_delay="):]
				}
			}
			if got != c.want {
				t.Fatalf("logged %q, want %q\n%s", got, c.want, logs.String())
			}
			if g0, g1 := sink.got(0), sink.got(1); !equalOffsets(g0, seq(0, 39)) || !equalOffsets(g1, seq(0, 39)) {
				t.Fatalf("delivered %v and %v, want 0..39 each", g0, g1)
			}
		})
	}
}
