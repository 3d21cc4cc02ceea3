package connect

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/sdk"
)

// seqSource produces batches of batchSize messages with payloads "m<i>" (i counted over the
// source's life) and state = next i (8 bytes LE), ending after total messages. A nack
// rewinds to the batch's start. It accepts maxUnacked batches unacknowledged
// (sdk.PipelinedSource; 0 means 1) and fails the test if Read runs while that many are, or
// if a batch is acked before an earlier one.
type seqSource struct {
	t          *testing.T
	batchSize  int
	total      int
	schema     sdk.Schema
	maxUnacked int
	keys       int // > 0: message i has partition key "k<i%keys>"

	mu       sync.Mutex
	opened   []byte // state given to Open
	next     int
	unacked  []int // the start of each batch read and not yet acked, in read order
	peak     int   // the most batches unacked at once
	acks     []error
	closed   bool
	readErrs int   // fail the next n Reads…
	readErr  error // …with this error ("source hiccup" when nil)
	reads    int   // Read calls
	batches  int   // batches returned
	// onBatch, when set, is called (under mu) with the count of batches returned so far and
	// the new batch's messages, which it may change.
	onBatch func(batches int, msgs []sdk.ProducedMessage)
}

func (s *seqSource) MaxUnacked() int { return max(s.maxUnacked, 1) }

func (s *seqSource) Open(_ context.Context, env sdk.SourceEnv) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opened = env.State
	if len(env.State) == 8 {
		s.next = int(binary.LittleEndian.Uint64(env.State))
	}
	return nil
}

func (s *seqSource) Read(ctx context.Context) (sdk.SourceBatch, sdk.AckFunc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unacked) >= s.MaxUnacked() {
		s.t.Errorf("Read called while %d batches were unacked", len(s.unacked))
	}
	s.reads++
	if s.readErrs > 0 {
		s.readErrs--
		if s.readErr != nil {
			return sdk.SourceBatch{}, nil, s.readErr
		}
		return sdk.SourceBatch{}, nil, errors.New("source hiccup")
	}
	if s.next >= s.total {
		return sdk.SourceBatch{}, nil, sdk.ErrEndOfInput
	}
	if err := ctx.Err(); err != nil {
		return sdk.SourceBatch{}, nil, err
	}
	start := s.next
	n := min(s.batchSize, s.total-start)
	msgs := make([]sdk.ProducedMessage, n)
	for i := range msgs {
		msgs[i] = sdk.ProducedMessage{Payload: fmt.Appendf(nil, "m%d", start+i)}
		if s.keys > 0 {
			msgs[i].PartitionKey = fmt.Appendf(nil, "k%d", (start+i)%s.keys)
		}
	}
	s.next = start + n
	s.unacked = append(s.unacked, start)
	s.peak = max(s.peak, len(s.unacked))
	s.batches++
	if s.onBatch != nil {
		s.onBatch(s.batches, msgs)
	}
	ack := func(_ context.Context, err error) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.unacked) == 0 || s.unacked[0] != start {
			s.t.Errorf("batch from m%d acked out of read order (unacked batches from %v)", start, s.unacked)
		} else {
			s.unacked = s.unacked[1:]
		}
		s.acks = append(s.acks, err)
		if err != nil {
			s.next = min(s.next, start)
		}
		return nil
	}
	return sdk.SourceBatch{Schema: s.schema, Messages: msgs, State: binary.LittleEndian.AppendUint64(nil, uint64(s.next))}, ack, nil
}

func (s *seqSource) Close(context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *seqSource) snapshot() (acks []error, closed bool, opened []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.acks...), s.closed, s.opened
}

// memSource is an in-memory source backend: one topic log of payloads. failNext fails that
// many sends; block makes sends wait for ctx (an unreachable server).
type memSource struct {
	backend  // nil: only newProducer is used by sources
	mu       sync.Mutex
	log      []string
	failNext int
	block    bool
	cfgs     []producerConfig
	closed   int
}

func (m *memSource) newProducer(_ context.Context, cfg producerConfig) (producer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfgs = append(m.cfgs, cfg)
	return memProducer{m}, nil
}

type memProducer struct{ m *memSource }

func (p memProducer) send(ctx context.Context, msgs []sdk.ProducedMessage) error {
	p.m.mu.Lock()
	block := p.m.block
	if !block && p.m.failNext > 0 {
		p.m.failNext--
		p.m.mu.Unlock()
		return errors.New("connection reset")
	}
	if !block {
		for _, msg := range msgs {
			p.m.log = append(p.m.log, string(msg.Payload))
		}
	}
	p.m.mu.Unlock()
	if block {
		<-ctx.Done()
		return fmt.Errorf("send: %w", ctx.Err())
	}
	return nil
}

func (p memProducer) tail(context.Context) (sdk.Tail, error)       { return sdk.Tail{}, nil }
func (p memProducer) tailN(context.Context, int) (sdk.Tail, error) { return sdk.Tail{}, nil }

func (p memProducer) close(context.Context) error {
	p.m.mu.Lock()
	p.m.closed++
	p.m.mu.Unlock()
	return nil
}

func (m *memSource) snapshot() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.log...)
}

func fastSourceBackoff(t *testing.T) {
	old := sourceBackoff
	sourceBackoff = Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}
	t.Cleanup(func() { sourceBackoff = old })
}

func sourceCfg(key string, streams ...config.SourceStream) *config.Source {
	if len(streams) == 0 {
		streams = []config.SourceStream{{Stream: "s", Topic: "t", Schema: sdk.SchemaText, BatchLength: 1000}}
	}
	return &config.Source{Common: config.Common{Key: key, Enabled: true, Name: key + " source", Path: "builtin:seq"},
		Streams: streams}
}

func sourceRuntime(cfg *config.Source, src sdk.Source, be *memSource, stateDir string) *Runtime {
	reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return src })
	// No sink runs: the backend is be, whose producers are in memory.
	return newRuntime(Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}}, Builtins: reg, Logger: quietLog}, be, stateDir)
}

func wantSeq(t *testing.T, got []string, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("log has %d messages, want %d (m%d..m%d)", len(got), to-from, from, to-1)
	}
	for i, p := range got {
		if want := fmt.Sprintf("m%d", from+i); p != want {
			t.Fatalf("log[%d] = %s, want %s", i, p, want)
		}
	}
}

// TestSourceExactlyOnceWithoutCrash: 10 batches of 25, the first 3 sends fail and are
// retried; every message lands exactly once, in order; every batch is acked once with nil;
// the state file holds the last cursor; end of input stops the source cleanly.
func TestSourceExactlyOnceWithoutCrash(t *testing.T) {
	for _, n := range []uint32{1, 4} {
		t.Run(fmt.Sprintf("max_in_flight=%d", n), func(t *testing.T) {
			fastSourceBackoff(t)
			dir := t.TempDir()
			src := &seqSource{t: t, batchSize: 25, total: 250, schema: sdk.SchemaText, maxUnacked: 4}
			be := &memSource{failNext: 3}
			cfg := sourceCfg("seq",
				config.SourceStream{Stream: "ignored", Topic: "ignored", Schema: sdk.SchemaText},
				config.SourceStream{Stream: "s", Topic: "t", Schema: sdk.SchemaText, BatchLength: 100, LingerTime: time.Millisecond})
			cfg.MaxInFlight = n
			rt := sourceRuntime(cfg, src, be, dir)
			if err := rt.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, "source stopped at end of input", func() bool { return rt.Status()[0].State == StateStopped })
			if err := rt.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			wantSeq(t, be.snapshot(), 0, 250)
			if want := (producerConfig{Stream: "s", Topic: "t", BatchLength: 100, Linger: time.Millisecond}); len(be.cfgs) != 1 || be.cfgs[0] != want {
				t.Fatalf("producer configs = %+v, want only the last [[streams]] entry %+v", be.cfgs, want)
			}
			acks, closed, _ := src.snapshot()
			if len(acks) != 10 {
				t.Fatalf("%d acks, want 10", len(acks))
			}
			for i, a := range acks {
				if a != nil {
					t.Fatalf("ack %d = %v, want nil", i, a)
				}
			}
			if !closed || be.closed != 1 {
				t.Fatalf("source closed = %v, producer closes = %d; want true, 1", closed, be.closed)
			}
			st := rt.Status()[0]
			want := Stats{Produced: 250, Sent: 250, SendErrors: 3, Committed: 250, Retries: 3}
			if st.Stats.Stages[StageIggySend].Count != 10 || st.Stats.Stages[StageStateSave].Count != 10 || st.Stats.Stages[StageTotal].Count != 10 {
				t.Fatalf("stage histograms %+v, want 10 batches in each", st.Stats.Stages)
			}
			st.Stats.Stages = nil
			if !reflect.DeepEqual(st.Stats, want) || st.Kind != "source" || st.LastError != nil {
				t.Fatalf("status = %+v, want stats %+v, kind source, no error", st, want)
			}
			b, err := newStateFile(dir, "seq").load()
			if err != nil || binary.LittleEndian.Uint64(b) != 250 {
				t.Fatalf("state = %v, %v; want 250", b, err)
			}

			// A restart resumes from the saved cursor: Open gets it and nothing more is produced.
			src2 := &seqSource{t: t, batchSize: 25, total: 250, schema: sdk.SchemaText, maxUnacked: 4}
			rt2 := sourceRuntime(cfg, src2, be, dir)
			if err := rt2.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, "restarted source stopped", func() bool { return rt2.Status()[0].State == StateStopped })
			if err := rt2.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, _, opened := src2.snapshot(); !bytes.Equal(opened, b) {
				t.Fatalf("restart opened with state %v, want %v", opened, b)
			}
			wantSeq(t, be.snapshot(), 0, 250)
		})
	}
}

// TestSourceStopNacksUnsentBatch: the server is unreachable; a graceful stop ends the retry
// wait and the pending batch is acked with an error; no state is saved.
func TestSourceStopNacksUnsentBatch(t *testing.T) {
	for _, n := range []uint32{1, 4} {
		t.Run(fmt.Sprintf("max_in_flight=%d", n), func(t *testing.T) {
			fastSourceBackoff(t)
			dir := t.TempDir()
			src := &seqSource{t: t, batchSize: 10, total: 100, schema: sdk.SchemaText, maxUnacked: 4}
			be := &memSource{failNext: 1 << 30}
			cfg := sourceCfg("down")
			cfg.MaxInFlight = n
			rt := sourceRuntime(cfg, src, be, dir)
			if err := rt.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, "send errors", func() bool { return rt.Status()[0].Stats.SendErrors >= 3 })
			if st := rt.Status()[0]; st.State != StateError || st.LastError == nil {
				t.Fatalf("status while failing = %+v, want error with last_error", st)
			}
			if err := rt.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Every batch read (one, or up to max_in_flight) is nacked: the first one's send
			// failed, the later ones were never sent.
			acks, closed, _ := src.snapshot()
			read := int(rt.Status()[0].Stats.Produced / 10)
			if read < 1 || read > int(n) || len(acks) != read || !closed {
				t.Fatalf("%d batches read, acks = %v, closed = %v; want 1..%d batches, one ack each, closed", read, acks, closed, n)
			}
			for i, a := range acks {
				if !errors.Is(a, errStopping) || (i > 0 && !errors.Is(a, errEarlierUndelivered)) {
					t.Fatalf("ack %d = %v, want errStopping (after the first: errEarlierUndelivered)", i, a)
				}
			}
			if got := be.snapshot(); len(got) != 0 {
				t.Fatalf("log = %v, want empty", got)
			}
			if b, err := newStateFile(dir, "down").load(); err != nil || b != nil {
				t.Fatalf("state = %v, %v; want none", b, err)
			}
			st := rt.Status()[0]
			if st.Stats.Produced != uint64(10*read) || st.Stats.Sent != 0 || st.Stats.Committed != 0 {
				t.Fatalf("stats = %+v, want produced %d, sent 0, committed 0", st.Stats, 10*read)
			}
		})
	}
}

// TestSourceHardStopAbandonsSend: a send that never returns is cut by the hard stop (Stop's
// ctx expiring) and its batch is acked with an error.
func TestSourceHardStopAbandonsSend(t *testing.T) {
	for _, n := range []uint32{1, 4} {
		t.Run(fmt.Sprintf("max_in_flight=%d", n), func(t *testing.T) {
			fastSourceBackoff(t)
			src := &seqSource{t: t, batchSize: 10, total: 100, schema: sdk.SchemaText, maxUnacked: 4}
			be := &memSource{block: true}
			cfg := sourceCfg("stuck")
			cfg.MaxInFlight = n
			rt := sourceRuntime(cfg, src, be, t.TempDir())
			if err := rt.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			testkit.WaitFor(t, "batch in flight", func() bool { return rt.Status()[0].Stats.Produced >= 10 })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if err := rt.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Stop = %v, want deadline exceeded", err)
			}
			testkit.WaitFor(t, "source done", func() bool {
				acks, closed, _ := src.snapshot()
				return closed && len(acks) == int(rt.Status()[0].Stats.Produced/10)
			})
			acks, _, _ := src.snapshot()
			if len(acks) < 1 || len(acks) > int(n) {
				t.Fatalf("%d acks, want 1..%d", len(acks), n)
			}
			if !errors.Is(acks[0], errStopping) || !errors.Is(acks[0], context.Canceled) {
				t.Fatalf("ack = %v, want errStopping wrapping context.Canceled", acks[0])
			}
			for i, a := range acks[1:] {
				if !errors.Is(a, errStopping) || !errors.Is(a, errEarlierUndelivered) {
					t.Fatalf("ack %d = %v, want errStopping after an undelivered batch", i+1, a)
				}
			}
			testkit.WaitFor(t, "status stopped", func() bool { return rt.Status()[0].State == StateStopped })
		})
	}
}

// TestSourceStartFailures: an unknown built-in and a read error are reported in the status;
// a read error is retried.
func TestSourceStartFailures(t *testing.T) {
	fastSourceBackoff(t)
	cfg := sourceCfg("nope")
	cfg.Path = "builtin:missing"
	rt := sourceRuntime(cfg, nil, &memSource{}, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := rt.Status()[0]; st.State != StateError || st.LastError == nil {
		t.Fatalf("status = %+v, want error", st)
	}
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	src := &seqSource{t: t, batchSize: 4, total: 8, schema: sdk.SchemaText, readErrs: 2}
	be := &memSource{}
	rt = sourceRuntime(sourceCfg("hiccup"), src, be, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "end of input", func() bool { return rt.Status()[0].State == StateStopped })
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, be.snapshot(), 0, 8)
}

// TestSourceStateDirMissingParent: the runtime creates its state directory, but not a
// directory below it: a key with a '/' names source_<a>/<b>.state, whose directory is
// missing. That source fails with upstream's words, is not restarted, and creates nothing;
// its sibling runs to the end of its input.
func TestSourceStateDirMissingParent(t *testing.T) {
	fastSourceBackoff(t)
	state := filepath.Join(t.TempDir(), "state", "deeper") // missing: Start creates it
	bad := sourceCfg("random_invalid/state_missing_parent")
	good := sourceCfg("good")
	src := &seqSource{t: t, batchSize: 5, total: 10, schema: sdk.SchemaText}
	reg := sdk.NewRegistry().AddSource("seq", func() sdk.Source { return src })
	be := &memSource{}
	rt := newRuntime(Options{Connectors: &config.Connectors{Sources: []*config.Source{bad, good}}, Builtins: reg, Logger: quietLog}, be, state)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	testkit.WaitFor(t, "the good source at the end of its input", func() bool { return rt.Status()[0].State == StateStopped })
	testkit.WaitFor(t, "the bad source given up", func() bool { return rt.Status()[1].Restart.GaveUp })
	st := rt.Status()[1]
	parent := filepath.Join(state, "source_random_invalid")
	want := "Failed to load source state: Cannot open state file " + filepath.Join(parent, "state_missing_parent.state") +
		": its directory " + parent + ": stat " + parent + ": no such file or directory"
	if st.Key != bad.Key || st.State != StateError || st.LastError == nil || st.LastError.Message != want {
		t.Fatalf("bad source status = %+v (last_error %v), want error %q", st, st.LastError, want)
	}
	if _, err := os.Stat(parent); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s: %v; want it still missing", parent, err)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state dir: %v, %v; want created with mode 0700", fi, err)
	}
	wantSeq(t, be.snapshot(), 0, 10)
}

// TestMissingPluginWording: a native plugin that is not there fails its connector with
// upstream's words first ("Failed to resolve plugin path: Plugin library not found", which
// tools written for Iggy's runtime match on), then the path Ferry looked at.
func TestMissingPluginWording(t *testing.T) {
	cfg := sourceCfg("missing")
	cfg.Path = filepath.Join(t.TempDir(), "libnothing")
	load := func(string) (sdk.SourceFactory, error) {
		t.Error("the loader was called for a missing file")
		return nil, nil
	}
	rt := newRuntime(Options{Connectors: &config.Connectors{Sources: []*config.Source{cfg}}, LoadSourcePlugin: load, Logger: quietLog}, &memSource{}, t.TempDir())
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	st := rt.Status()[0]
	want := "Failed to resolve plugin path: Plugin library not found: " + cfg.Path + ".so does not exist"
	if st.State != StateError || st.LastError == nil || st.LastError.Message != want {
		t.Fatalf("status = %+v (last_error %v), want error %q", st, st.LastError, want)
	}
}

func sdkSchema(s string) sdk.Schema { return sdk.Schema(s) }
