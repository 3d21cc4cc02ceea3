package connect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// readTopic returns the payloads of partition 0 of stream/topic on the real server.
func readTopic(t *testing.T, e *iggyEnv, stream, topic string) []string {
	t.Helper()
	part := uint32(0)
	r, err := e.Admin.PollMessages(bg(t), iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(0)},
		Stream: iggy.Name(stream), Topic: iggy.Name(topic), Partition: &part, Strategy: wire.PollOffset(0), Count: 1000})
	if err != nil {
		t.Fatalf("read %s/%s: %v", stream, topic, err)
	}
	defer r.Release()
	var out []string
	for _, m := range r.Messages {
		out = append(out, string(m.Payload))
	}
	return out
}

// route3 routes message m<i> by i % 3: to the entry's s/t, to s/u (only the topic named),
// to s2/v (both named).
func route3(_ int, msgs []sdk.ProducedMessage) {
	for i := range msgs {
		var n int
		_, _ = fmt.Sscanf(string(msgs[i].Payload), "m%d", &n)
		switch n % 3 {
		case 1:
			msgs[i].Topic = "u"
		case 2:
			msgs[i].Stream, msgs[i].Topic = "s2", "v"
		}
	}
}

// TestSourceRoutesMessagesToTheirTargets: messages a source routes (ProducedMessage.Stream,
// Topic) land in their own stream and topic of the real server, each target's in read
// order and exactly once (a failed send of one target does not send the others again), the
// rest in the [[streams]] entry's; with max_in_flight 1 and 4 (batches sent together).
func TestSourceRoutesMessagesToTheirTargets(t *testing.T) {
	for _, n := range []uint32{1, 4} {
		t.Run(fmt.Sprintf("max_in_flight=%d", n), func(t *testing.T) {
			fastSourceBackoff(t)
			e := newIggyEnv(t)
			e.Topic("s", "t", 1)
			e.Topic("s", "u", 1)
			e.Topic("s2", "v", 1)
			src := &seqSource{t: t, batchSize: 10, total: 90, schema: sdk.SchemaText, maxUnacked: 4, onBatch: route3}
			cfg := sourceCfg("seq")
			cfg.MaxInFlight = n
			reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return src })
			rt := newRuntime(Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}}, Builtins: reg, Logger: quietLog},
				&iggyBackend{c: e.Dial()}, t.TempDir())
			if err := rt.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, "source stopped at end of input", func() bool { return rt.Status()[0].State == StateStopped })
			stopRuntime(t, rt)
			want := map[string][]string{}
			for i := range 90 {
				k := []string{"s/t", "s/u", "s2/v"}[i%3]
				want[k] = append(want[k], fmt.Sprintf("m%d", i))
			}
			for k, w := range want {
				stream, topic, _ := strings.Cut(k, "/")
				if got := readTopic(t, e, stream, topic); !slices.Equal(got, w) {
					t.Fatalf("%s = %v, want %v", k, got, w)
				}
			}
			if st := rt.Status()[0].Stats; st.Sent != 90 || st.Committed != 90 {
				t.Fatalf("stats %+v, want 90 sent and committed", st)
			}
		})
	}
}

// TestSourceRoutedTargetMissing: a message routed to a topic that does not exist is refused
// like an invalid message: with on_failure = stop the source stops on it with an error
// naming the target and that --create-topics does not create it, and the batch is nacked;
// with skip the batch is dropped and counted and the rest goes on. A target name Iggy
// cannot hold (over 255 bytes) rejects that message alone.
func TestSourceRoutedTargetMissing(t *testing.T) {
	fastSourceBackoff(t)
	e := newIggyEnv(t)
	e.Topic("s", "t", 1)
	src := &seqSource{t: t, batchSize: 5, total: 10, schema: sdk.SchemaText, onBatch: func(_ int, msgs []sdk.ProducedMessage) {
		msgs[len(msgs)-1].Topic = "nope"
	}}
	cfg := sourceCfg("seq")
	reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return src })
	rt := newRuntime(Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}}, Builtins: reg, Logger: quietLog},
		&iggyBackend{c: e.Dial()}, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "source stopped with an error", func() bool { return rt.Status()[0].State == StateError })
	stopRuntime(t, rt)
	le := rt.Status()[0].LastError
	for _, w := range []string{`a message routed to s/nope`, `topic "nope" of stream "s" does not exist`, `ferry run --create-topics creates a routed target when its first message comes`} {
		if le == nil || !strings.Contains(le.Message, w) {
			t.Fatalf("last error %+v, want it to hold %q", le, w)
		}
	}
	if acks, _, _ := src.snapshot(); len(acks) != 1 || acks[0] == nil {
		t.Fatalf("acks %v, want the one batch nacked", acks)
	}
	if got := readTopic(t, e, "s", "t"); len(got) != 0 {
		t.Fatalf("s/t = %v, want nothing (the batch was refused)", got)
	}

	long := strings.Repeat("x", 256)
	src = &seqSource{t: t, batchSize: 5, total: 10, schema: sdk.SchemaText, onBatch: func(b int, msgs []sdk.ProducedMessage) {
		msgs[0].Topic = long
		if b == 2 {
			msgs[1].Topic = "nope"
		}
	}}
	cfg = sourceCfg("seq2")
	cfg.OnFailure = sdk.FailureSkip
	reg = sdk.NewRegistry().AddSource("seq", func() sdk.Source { return src })
	rt = newRuntime(Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}}, Builtins: reg, Logger: quietLog},
		&iggyBackend{c: e.Dial()}, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "source stopped at end of input", func() bool { return rt.Status()[0].State == StateStopped })
	stopRuntime(t, rt)
	if got, want := readTopic(t, e, "s", "t"), []string{"m1", "m2", "m3", "m4"}; !slices.Equal(got, want) {
		t.Fatalf("s/t = %v, want %v (m0 over the name limit alone, the second batch refused whole)", got, want)
	}
	if st := rt.Status()[0].Stats; st.Skipped != 6 || st.FailedBatches != 1 {
		t.Fatalf("stats %+v, want 6 skipped (m0 and the batch of m5..m9), 1 failed batch", st)
	}
}

// TestSourceRoutedTargetCreated: with Options.CreateRoutedTopics (ferry run --create-topics,
// --embedded) a missing routed target, a topic or a stream and its topic, is created with
// that many partitions at its first message, and the messages land in it.
func TestSourceRoutedTargetCreated(t *testing.T) {
	fastSourceBackoff(t)
	e := newIggyEnv(t)
	e.Topic("s", "t", 1)
	src := &seqSource{t: t, batchSize: 10, total: 30, schema: sdk.SchemaText, onBatch: route3}
	cfg := sourceCfg("seq")
	reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return src })
	rt := newRuntime(Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}}, Builtins: reg, Logger: quietLog},
		&iggyBackend{c: e.Dial(), createRouted: 2}, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "source stopped at end of input", func() bool { return rt.Status()[0].State == StateStopped })
	stopRuntime(t, rt)
	for _, st := range []struct{ stream, topic string }{{"s", "u"}, {"s2", "v"}} {
		td, err := e.Admin.GetTopic(bg(t), iggy.Name(st.stream), iggy.Name(st.topic))
		if err != nil {
			t.Fatalf("%s/%s: %v", st.stream, st.topic, err)
		}
		var n uint64
		for _, p := range td.Partitions {
			n += p.MessagesCount
		}
		if len(td.Partitions) != 2 || n != 10 {
			t.Fatalf("%s/%s: %d partitions, %d messages; want 2 and 10", st.stream, st.topic, len(td.Partitions), n)
		}
	}
	if got := readTopic(t, e, "s", "t"); len(got) != 10 {
		t.Fatalf("s/t holds %d messages, want 10", len(got))
	}
}
