package connect

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/syncbuf"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// holdSends makes every source send whose messages match wait until release is closed (at
// most 10 s, then the test fails).
func holdSends(t *testing.T, match func(msgs []sdk.ProducedMessage) bool, release <-chan struct{}) {
	t.Helper()
	beforeSourceSend = func(msgs []sdk.ProducedMessage) {
		if !match(msgs) {
			return
		}
		select {
		case <-release:
		case <-time.After(10 * time.Second):
			t.Error("a held source send was never released")
		}
	}
	t.Cleanup(func() { beforeSourceSend = nil })
}

// partitionSeqs reads every partition of s/t and returns, per partition, the numbers i of
// its "m<i>" payloads in offset order.
func partitionSeqs(t *testing.T, env *iggyEnv, partitions uint32) [][]int {
	t.Helper()
	out := make([][]int, partitions)
	for p := range partitions {
		part := p
		res, err := env.Admin.PollMessages(bg(t), iggy.PollRequest{
			Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: iggy.ID(1)},
			Stream:   iggy.Name("s"), Topic: iggy.Name("t"), Partition: &part,
			Strategy: wire.PollOffset(0), Count: 10000,
		})
		if err != nil {
			t.Fatalf("poll partition %d: %v", p, err)
		}
		for _, m := range res.Messages {
			var i int
			if _, err := fmt.Sscanf(string(m.Payload), "m%d", &i); err != nil {
				t.Fatalf("partition %d offset %d: payload %.20q", p, m.Offset, m.Payload)
			}
			out[p] = append(out[p], i)
		}
	}
	return out
}

// wantSeqs fails unless the partitions hold each of want exactly once, each partition in
// increasing order (the order the source produced them).
func wantSeqs(t *testing.T, parts [][]int, want []int) {
	t.Helper()
	var all []int
	for p, seq := range parts {
		if !slices.IsSorted(seq) {
			t.Fatalf("partition %d out of order: %v", p, seq)
		}
		all = append(all, seq...)
	}
	slices.Sort(all)
	if !slices.Equal(all, want) {
		t.Fatalf("the topic holds %d messages %v, want %d %v", len(all), all, len(want), want)
	}
}

func seqRange(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestSourcePipelineOrder: with max_in_flight 4 a real server gets 8 batches of keyed
// messages over 3 partitions. The first send is held until the source has 4 batches
// unacknowledged at once, so the pipeline is full and the batches that waited go out
// together (fewer than 8 sends); every message lands once, each partition in the order the
// source produced, every ack is nil and in read order (seqSource checks it), and the state
// holds the last cursor.
func TestSourcePipelineOrder(t *testing.T) {
	fastSourceBackoff(t)
	env := newIggyEnv(t)
	env.Topic("s", "t", 3)
	release := make(chan struct{})
	src := &seqSource{t: t, batchSize: 30, total: 240, schema: sdk.SchemaText, maxUnacked: 4, keys: 7}
	src.onBatch = func(int, []sdk.ProducedMessage) {
		if len(src.unacked) == 4 && src.peak == 4 && src.acks == nil {
			close(release)
		}
	}
	sends := 0 // counted on the sender's goroutine, read after the source ended
	holdSends(t, func([]sdk.ProducedMessage) bool { sends++; return sends == 1 }, release)
	cfg := sourceCfg("pipe", config.SourceStream{Stream: "s", Topic: "t", Schema: sdk.SchemaText, BatchLength: 1000})
	cfg.PluginConfig, cfg.MaxInFlight, cfg.OnFailure = []byte("null"), 4, config.FailureStop
	cfg.Retry = config.Retry{MaxRetries: 1, InitialBackoff: 1, MaxBackoff: 1}
	dir := t.TempDir()
	reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return src })
	rt, err := New(Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}}, Client: env.Dial(), Builtins: reg,
		Runtime: &config.Runtime{State: config.State{Path: dir}}, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(bg(t)); err != nil {
		t.Fatal(err)
	}
	defer stopRuntime(t, rt)
	testkit.WaitFor(t, "source at end of input", func() bool { st, _ := rt.Connector(KindSource, "pipe"); return st.State == StateStopped })
	wantSeqs(t, partitionSeqs(t, env, 3), seqRange(0, 240))
	acks, _, _ := src.snapshot()
	src.mu.Lock()
	peak := src.peak
	src.mu.Unlock()
	if peak != 4 || len(acks) != 8 || slices.ContainsFunc(acks, func(e error) bool { return e != nil }) {
		t.Fatalf("peak unacked %d, acks %v; want 4 and 8 nil acks", peak, acks)
	}
	// While the first send was held the next batches queued up: some send carried several.
	if sends >= 8 {
		t.Fatalf("%d sends for 8 batches, want batches that waited sent together", sends)
	}
	b, err := newStateFile(dir, "pipe").load()
	if err != nil || !bytes.Equal(b, binary.LittleEndian.AppendUint64(nil, 240)) {
		t.Fatalf("state %v, %v; want 240", b, err)
	}
}

// TestSourcePipelineNoAckPastGap: with max_in_flight 4, the first of 8 batches holds a
// message larger than the client's frame, which Iggy can never take (rejected after the
// [retry] attempts). Its send is held until the source has 4 batches unacknowledged, so the
// pipeline is full and batches 2–4 are read when it fails (the sender may have taken some of
// them into the same send: each is then sent again alone). With on_failure = stop nothing
// after the gap is sent or acknowledged: the topic is empty, batch 1 is nacked as rejected
// and batches 2–4 as not delivered, no state is saved and no fifth batch is read. With skip
// the rejected batch is dropped and everything after it is sent and acknowledged, in order.
func TestSourcePipelineNoAckPastGap(t *testing.T) {
	for _, policy := range []config.FailurePolicy{config.FailureStop, config.FailureSkip} {
		t.Run(string(policy), func(t *testing.T) {
			fastSourceBackoff(t)
			env := newIggyEnv(t)
			env.Topic("s", "t", 3)
			release := make(chan struct{})
			src := &seqSource{t: t, batchSize: 30, total: 240, schema: sdk.SchemaText, maxUnacked: 4, keys: 7}
			src.onBatch = func(n int, msgs []sdk.ProducedMessage) {
				if n == 1 {
					msgs[15].Payload = append(msgs[15].Payload, bytes.Repeat([]byte("x"), 70<<10)...)
				}
				if n == 4 && len(src.unacked) == 4 {
					close(release)
				}
			}
			holdSends(t, func(msgs []sdk.ProducedMessage) bool {
				return slices.ContainsFunc(msgs, func(m sdk.ProducedMessage) bool { return len(m.Payload) > 64<<10 })
			}, release)
			cfg := sourceCfg("gap", config.SourceStream{Stream: "s", Topic: "t", Schema: sdk.SchemaText, BatchLength: 1000})
			cfg.PluginConfig, cfg.MaxInFlight, cfg.OnFailure = []byte("null"), 4, policy
			cfg.Retry = config.Retry{MaxRetries: 1, InitialBackoff: 1, MaxBackoff: 1}
			dir := t.TempDir()
			reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return src })
			rt, err := New(Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}},
				Client: env.Dial(iggy.WithMaxFrameSize(64 << 10)), Builtins: reg,
				Runtime: &config.Runtime{State: config.State{Path: dir}}, Logger: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			if err := rt.Start(bg(t)); err != nil {
				t.Fatal(err)
			}
			defer stopRuntime(t, rt)
			want := StateStopped
			if policy == config.FailureStop {
				want = StateError
			}
			testkit.WaitFor(t, "source ended", func() bool {
				st, _ := rt.Connector(KindSource, "gap")
				return st.State == want && st.Restart.GaveUp == (want == StateError)
			})
			st, _ := rt.Connector(KindSource, "gap")
			acks, _, _ := src.snapshot()
			state, err := newStateFile(dir, "gap").load()
			if err != nil {
				t.Fatal(err)
			}
			if policy == config.FailureSkip {
				wantSeqs(t, partitionSeqs(t, env, 3), seqRange(30, 240))
				if len(acks) != 8 || slices.ContainsFunc(acks, func(e error) bool { return e != nil }) {
					t.Fatalf("acks %v, want 8 nil", acks)
				}
				if !bytes.Equal(state, binary.LittleEndian.AppendUint64(nil, 240)) || st.Stats.Skipped != 30 || st.Stats.FailedBatches != 1 {
					t.Fatalf("state %v, stats %+v; want 240, 30 skipped, 1 failed batch", state, st.Stats)
				}
				return
			}
			wantSeqs(t, partitionSeqs(t, env, 3), nil)
			src.mu.Lock()
			batches := src.batches
			src.mu.Unlock()
			if batches != 4 || len(acks) != 4 || acks[0] == nil || !strings.Contains(acks[0].Error(), "batch rejected (send)") {
				t.Fatalf("%d batches read, acks %v; want 4: batch 1 rejected (send), then 3 nacks", batches, acks)
			}
			for i, a := range acks[1:] {
				if !errors.Is(a, errStopping) || !errors.Is(a, errEarlierUndelivered) {
					t.Fatalf("ack of batch %d = %v, want not delivered after an earlier batch", i+2, a)
				}
			}
			if state != nil {
				t.Fatalf("state %v, want none saved", state)
			}
			if st.Stats.Sent != 0 || st.Stats.Committed != 0 || st.Stats.FailedBatches != 1 ||
				st.LastError == nil || !strings.Contains(st.LastError.Message, "exceeds the frame limit") {
				t.Fatalf("stats %+v, last error %+v; want nothing sent or acked, 1 failed batch, a frame-limit error", st.Stats, st.LastError)
			}
		})
	}
}

// oneAtATime is a source that does not accept reads ahead: seqSource without MaxUnacked.
type oneAtATime struct{ s *seqSource }

func (o oneAtATime) Open(ctx context.Context, env sdk.SourceEnv) error { return o.s.Open(ctx, env) }
func (o oneAtATime) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	return o.s.Read(ctx)
}
func (o oneAtATime) Close(ctx context.Context) error { return o.s.Close(ctx) }

// TestSourceMaxInFlightCapped: a source that does not accept reads ahead is refused when its
// file asks for max_in_flight > 1 (status error naming the reason, closed, no restart: a
// restart cannot fix a config); one that accepts 2 runs with 2 when the file asks for 8,
// with one warning.
func TestSourceMaxInFlightCapped(t *testing.T) {
	fastSourceBackoff(t)
	src := &seqSource{t: t, batchSize: 10, total: 100, schema: sdk.SchemaText}
	cfg := sourceCfg("plain")
	cfg.MaxInFlight = 3
	cfg.Restart = config.RestartPolicy{MaxRestarts: 5, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	rt := sourceRuntime(cfg, oneAtATime{src}, &memSource{}, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "source in error", func() bool { return rt.Status()[0].State == StateError })
	st := rt.Status()[0]
	stopRuntime(t, rt)
	const want = "max_in_flight = 3: the source builtin:seq does not accept reads before its batches are acknowledged (sdk.PipelinedSource)"
	if _, closed, _ := src.snapshot(); st.LastError == nil || !strings.Contains(st.LastError.Message, want) || st.Restart.Restarts != 0 || !closed {
		t.Fatalf("status %+v, last error %+v, closed %v; want %q, no restart, closed", st, st.LastError, closed, want)
	}

	logs := &syncbuf.Buffer{}
	two := &seqSource{t: t, batchSize: 10, total: 100, schema: sdk.SchemaText, maxUnacked: 2}
	cfg = sourceCfg("two")
	cfg.MaxInFlight = 8
	be := &memSource{}
	reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return two })
	rt = newRuntime(Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}}, Builtins: reg,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}, be, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "source at end of input", func() bool { return rt.Status()[0].State == StateStopped })
	stopRuntime(t, rt)
	wantSeq(t, be.snapshot(), 0, 100)
	if n := strings.Count(logs.String(), "max_in_flight is more than the source accepts"); n != 1 {
		t.Fatalf("%d warnings about the cap, want 1", n)
	}
}

// checkedSeq is seqSource stating its payloads valid in their schema (sdk.CheckedPayloads).
type checkedSeq struct{ *seqSource }

func (checkedSeq) CheckedPayloads() bool { return true }

// TestSourceCheckedPayloadsNotChecked: a source that guarantees its payloads (here, on
// purpose, payloads that are not JSON, named json) has them sent to a json stream as they
// are, without the check that would reject them; with a transform they are decoded and
// rejected as before.
func TestSourceCheckedPayloadsNotChecked(t *testing.T) {
	fastSourceBackoff(t)
	src := checkedSeq{&seqSource{t: t, batchSize: 5, total: 10, schema: sdk.SchemaJSON}}
	be := &memSource{}
	cfg := sourceCfg("checked", config.SourceStream{Stream: "s", Topic: "t", Schema: sdk.SchemaJSON, BatchLength: 100})
	rt := sourceRuntime(cfg, src, be, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "source at end of input", func() bool { return rt.Status()[0].State == StateStopped })
	stopRuntime(t, rt)
	wantSeq(t, be.snapshot(), 0, 10)

	src = checkedSeq{&seqSource{t: t, batchSize: 5, total: 10, schema: sdk.SchemaJSON}}
	be = &memSource{}
	cfg = sourceCfg("transformed", config.SourceStream{Stream: "s", Topic: "t", Schema: sdk.SchemaJSON, BatchLength: 100})
	cfg.OnFailure = config.FailureSkip
	cfg.Transforms = []config.Transform{{Type: "delete_fields", Enabled: true, Config: map[string]any{"enabled": true, "fields": []any{"x"}}}}
	rt = sourceRuntime(cfg, src, be, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "source at end of input", func() bool { return rt.Status()[0].State == StateStopped })
	stopRuntime(t, rt)
	if got, st := be.snapshot(), rt.Status()[0]; len(got) != 0 || st.Stats.Skipped != 10 {
		t.Fatalf("sent %v, stats %+v; want nothing sent, 10 skipped", got, st.Stats)
	}
}
