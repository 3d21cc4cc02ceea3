package random

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openSrc(t *testing.T, cfg string, state []byte) *Source {
	t.Helper()
	s := New()
	if err := s.Open(context.Background(), sdktest.SourceEnv(t, cfg, state, nil)); err != nil {
		t.Fatal(err)
	}
	return s
}

// drain reads until ErrEndOfInput, acking each batch, and returns the batch sizes and the
// last state.
func drain(t *testing.T, s *Source) (sizes []int, ids []uint64, state []byte) {
	t.Helper()
	for {
		b, ack, err := s.Read(context.Background())
		if errors.Is(err, sdk.ErrEndOfInput) {
			return sizes, ids, state
		}
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(b.Messages))
		for _, m := range b.Messages {
			lo, _ := m.ID.Halves()
			ids = append(ids, lo)
		}
		state = b.State
		if err := ack(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
}

func TestExactCount(t *testing.T) {
	s := openSrc(t, `{"count":250,"batch_size":100,"payload_size":8,"seed":7}`, nil)
	sizes, ids, state := drain(t, s)
	if len(sizes) != 3 || sizes[0] != 100 || sizes[1] != 100 || sizes[2] != 50 {
		t.Fatalf("sizes = %v", sizes)
	}
	if ids[0] != 1 || ids[249] != 250 || binary.LittleEndian.Uint64(state) != 250 || s.Produced() != 250 {
		t.Fatalf("ids %d..%d state %v", ids[0], ids[249], state)
	}
}

func TestResumeFromState(t *testing.T) {
	const cfg = `{"count":250,"batch_size":100,"payload_size":16,"seed":42}`
	first := openSrc(t, cfg, nil)
	var payloads [][]byte
	var state []byte
	for range 2 {
		b, ack, err := first.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range b.Messages {
			payloads = append(payloads, m.Payload)
		}
		state = b.State
		_ = ack(context.Background(), nil)
	}
	// A third batch that is nacked: produced again after restart from the saved state.
	b3, ack, err := first.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = ack(context.Background(), errors.New("send failed"))
	if first.Produced() != 200 {
		t.Fatalf("nack did not rewind: %d", first.Produced())
	}

	second := openSrc(t, cfg, state)
	b, ack2, err := second.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = ack2(context.Background(), nil)
	if lo, _ := b.Messages[0].ID.Halves(); lo != 201 || len(b.Messages) != 50 {
		t.Fatalf("resumed at id %d with %d messages", lo, len(b.Messages))
	}
	if string(b.Messages[0].Payload) != string(b3.Messages[0].Payload) || len(b.Messages[0].Payload) != 16 {
		t.Fatalf("seeded payload differs: %q vs %q", b.Messages[0].Payload, b3.Messages[0].Payload)
	}
	if _, _, err := second.Read(context.Background()); !errors.Is(err, sdk.ErrEndOfInput) {
		t.Fatalf("count not respected across restart: %v", err)
	}
	if len(payloads) != 200 {
		t.Fatalf("payloads %d", len(payloads))
	}
}

func TestRateAndCancel(t *testing.T) {
	s := openSrc(t, `{"messages_per_second":1,"batch_size":10}`, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := s.Read(ctx) // 10 messages at 1/s: due in 10s
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
	if s.Produced() != 0 {
		t.Fatalf("produced %d", s.Produced())
	}
}

// Every plugin_config problem is refused by `ferry check` (Spec.Validate) and by Open,
// with the key and what is wrong; a bad state by Open only.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{`{"batch_size":0}`, "plugin_config.batch_size: 0 is below the minimum 1"},
		{`{"messages_per_second":-1}`, "plugin_config.messages_per_second: -1 is below the minimum 0"},
		{`{"payload_size":-1}`, "plugin_config.payload_size: want an unsigned, got -1"},
		{`{"seed":"x"}`, `plugin_config.seed: want an unsigned, got string "x"`},
		{`{"bogus":1}`, "plugin_config.bogus: unknown field (known: messages_per_second, count, payload_size, batch_size, seed)"},
	} {
		if errs := Spec.Validate([]byte(tc.cfg)); len(errs) != 1 || errs[0].Error() != tc.want {
			t.Errorf("check %s: %v, want %s", tc.cfg, errs, tc.want)
		}
		err := New().Open(context.Background(), sdktest.SourceEnv(t, tc.cfg, nil, nil))
		if err == nil || err.Error() != "random source: "+tc.want || !errors.Is(err, sdk.ErrPermanent) {
			t.Errorf("Open(%s) = %v, want the permanent error random source: %s", tc.cfg, err, tc.want)
		}
	}
	if err := New().Open(context.Background(), sdktest.SourceEnv(t, nil, []byte("abc"), nil)); err == nil ||
		err.Error() != "random source: state has 3 bytes, want 8" {
		t.Errorf("Open with a 3-byte state: %v", err)
	}
}

// The source states at least once into Iggy from its saved state: a crash at any step
// (before the append, between the append and the saved state, before Close) leaves every
// one of count messages in the topic, in order, each with its seeded payload; only the
// crash between the append and the saved state repeats a batch.
func TestAtLeastOnceCrashAtEveryStep(t *testing.T) {
	const count = 250
	ref := openSrc(t, `{"payload_size":8,"seed":3}`, nil) // the payloads the seed gives
	sdktest.SourceHarness{
		New:        func() sdk.Source { return New() },
		Config:     fmt.Sprintf(`{"count":%d,"batch_size":100,"payload_size":8,"seed":3}`, count),
		Partitions: 1,
		Check: func(t *testing.T, log *sdktest.Log) {
			next := uint64(1) // the first id not seen yet
			for _, m := range log.Partition(0) {
				id, _ := m.Message.ID.Halves()
				if id > next || id == 0 {
					t.Fatalf("offset %d holds id %d, want at most %d (a message skipped)", m.Offset, id, next)
				}
				if want := ref.payload(id - 1); string(m.Message.Payload) != string(want) {
					t.Fatalf("id %d: payload %q, want %q", id, m.Message.Payload, want)
				}
				next = max(next, id+1)
			}
			if next != count+1 {
				t.Fatalf("the topic holds ids up to %d, want %d", next-1, count)
			}
		},
	}.CrashAtEveryStep(t)
}
