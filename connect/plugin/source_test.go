package plugin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ferryio/ferry/sdk"
)

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func openSource(t *testing.T, lib *Library, env sdk.SourceEnv) *Source {
	t.Helper()
	s, err := lib.NewSource()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func read(t *testing.T, s *Source) (sdk.SourceBatch, sdk.AckFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, ack, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return b, ack
}

func payloads(b sdk.SourceBatch) []string {
	var out []string
	for _, m := range b.Messages {
		out = append(out, string(m.Payload))
	}
	return out
}

// The Rust source encodes ProducedMessages with postcard::to_allocvec; Ferry decodes it.
func TestRustSourceG4(t *testing.T) {
	lib := mustLib(t, buildRust(t))
	if lib.SourceGeneration() != SourceG4 {
		t.Fatalf("generation %v", lib.SourceGeneration())
	}
	s := openSource(t, lib, sdk.SourceEnv{Key: "rs", Config: []byte(`{"count":3}`)})
	b, ack := read(t, s)
	wantID := sdk.MessageIDFromUint64(1000)
	wantID[12] = 0x10 // + 2^100
	want := sdk.SourceBatch{Schema: sdk.SchemaText, State: le64(1), Messages: []sdk.ProducedMessage{{
		ID:      wantID,
		Headers: []sdk.Header{{Key: sdk.String("n"), Value: sdk.Uint64(0)}},
		Payload: []byte("rust-0"),
	}}}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("batch = %+v\nwant    %+v", b, want)
	}
	if err := ack(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := ack(context.Background(), nil); !errors.Is(err, ErrAckTwice) {
		t.Fatalf("second ack: %v", err)
	}
	b, ack = read(t, s)
	if got := payloads(b); !reflect.DeepEqual(got, []string{"rust-1"}) {
		t.Fatalf("second batch %q", got)
	}
	// NACK: the plugin produces the same batch again (under a new batch id).
	if err := ack(context.Background(), errors.New("send failed")); err != nil {
		t.Fatal(err)
	}
	b, ack = read(t, s)
	if got := payloads(b); !reflect.DeepEqual(got, []string{"rust-1"}) || !reflect.DeepEqual(b.State, le64(2)) {
		t.Fatalf("after nack %q state %v", got, b.State)
	}
	if err := ack(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	b, ack = read(t, s)
	if got := payloads(b); !reflect.DeepEqual(got, []string{"rust-2"}) {
		t.Fatalf("third batch %q", got)
	}
	sid := s.ID()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ack(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("ack after close: %v", err)
	}
	if _, _, err := s.Read(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
	// A send callback in a closed instance's name is refused.
	if code := sendV2(sid, 99, nil); code != -1 {
		t.Fatalf("send after close = %d", code)
	}

	// Reopened with the saved state the source resumes there (new plugin id).
	r := openSource(t, lib, sdk.SourceEnv{Key: "rs", Config: []byte(`{"count":3}`), State: le64(2)})
	b, ack = read(t, r)
	if got := payloads(b); !reflect.DeepEqual(got, []string{"rust-2"}) {
		t.Fatalf("resumed batch %q", got)
	}
	if err := ack(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := r.Read(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with cancelled ctx: %v", err)
	}
}

func TestCSourceExampleBatchesAndNack(t *testing.T) {
	lib := mustLib(t, buildC(t, "example_source", "../../examples/plugins/c/source.c"))
	s := openSource(t, lib, sdk.SourceEnv{Key: "c", Config: []byte(`{"count":5,"batch":2}`)})
	steps := []struct {
		want  []string
		state uint64
		nack  bool
	}{
		{[]string{"message-0", "message-1"}, 2, false},
		{[]string{"message-2", "message-3"}, 4, true},
		{[]string{"message-2", "message-3"}, 4, false},
		{[]string{"message-4"}, 5, false},
	}
	for i, st := range steps {
		b, ack := read(t, s)
		if got := payloads(b); !reflect.DeepEqual(got, st.want) || !reflect.DeepEqual(b.State, le64(st.state)) || b.Schema != sdk.SchemaText {
			t.Fatalf("step %d: %q state %v schema %v", i, got, b.State, b.Schema)
		}
		if b.Messages[0].ID != sdk.MessageIDFromUint64(st.state-uint64(len(st.want))+1) {
			t.Fatalf("step %d: id %v", i, b.Messages[0].ID)
		}
		var err error
		if st.nack {
			err = fmt.Errorf("nack")
		}
		if err := ack(context.Background(), err); err != nil {
			t.Fatal(err)
		}
	}
}

func TestG3SourceNoAck(t *testing.T) {
	lib := mustLib(t, probe(t, "probe_g3", "NO_SINK", "WITH_SOURCE_G3"))
	s := openSource(t, lib, sdk.SourceEnv{Key: "g3", Config: []byte(`{"count":3}`)})
	for i := 0; i < 3; i++ {
		b, ack := read(t, s)
		if got := payloads(b); !reflect.DeepEqual(got, []string{fmt.Sprintf("g3-%d", i)}) || b.Schema != sdk.SchemaRaw || b.State != nil {
			t.Fatalf("batch %d: %q %v %v", i, got, b.Schema, b.State)
		}
		if err := ack(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBatchResultRefused: a result the plugin has no pending batch for (here a batch id it
// never handed out, as after its own timeout) is refused with -1, reported as
// ErrResultRefused rather than as an undecodable call. The conformance suite's probe source
// behaves like the official SDK's loop.
func TestBatchResultRefused(t *testing.T) {
	lib := mustLib(t, buildC(t, "probe_source", "../../conformance/probe/c/source.c"))
	record := filepath.Join(t.TempDir(), "record.txt")
	s := openSource(t, lib, sdk.SourceEnv{Key: "p", Config: []byte(`{"record":"` + record + `","total":4,"batch":2}`)})
	b, ack := read(t, s)
	if got := payloads(b); !reflect.DeepEqual(got, []string{`{"seq":0}`, `{"seq":1}`}) || !reflect.DeepEqual(b.State, le64(2)) {
		t.Fatalf("first batch %q state %v", got, b.State)
	}
	err := callErr(lib, SymSourceBatchResult, s.ID(), callBatchResult(lib.srcBatchResult, s.ID(), 99, 0))
	if !errors.Is(err, ErrResultRefused) || errors.Is(err, ErrPluginRejected) {
		t.Fatalf("result for batch 99: %v, want ErrResultRefused", err)
	}
	if err := ack(context.Background(), nil); err != nil {
		t.Fatalf("ack of the pending batch: %v", err)
	}
	if b, _ = read(t, s); !reflect.DeepEqual(payloads(b), []string{`{"seq":2}`, `{"seq":3}`}) {
		t.Fatalf("second batch %q", payloads(b))
	}
}
