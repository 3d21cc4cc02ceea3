package stdout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

func TestLines(t *testing.T) {
	for _, tc := range []struct {
		cfg    string
		schema sdk.Schema
		want   string
	}{
		{`null`, sdk.SchemaText, "s/t partition=3 offset=7 id=00000000000000000000000000000001\ns/t partition=3 offset=8 id=00000000000000000000000000000002\n"},
		{`{"print_payload":true}`, sdk.SchemaText, "s/t partition=3 offset=7 id=00000000000000000000000000000001 payload=hello\ns/t partition=3 offset=8 id=00000000000000000000000000000002 payload=base64:/w==\n"},
		{`{"print_payload":true}`, sdk.SchemaRaw, "s/t partition=3 offset=7 id=00000000000000000000000000000001 payload=base64:aGVsbG8=\ns/t partition=3 offset=8 id=00000000000000000000000000000002 payload=base64:/w==\n"},
	} {
		var out bytes.Buffer
		s := NewWriter(&out)
		if err := s.Open(context.Background(), sdktest.SinkEnv(t, tc.cfg, nil)); err != nil {
			t.Fatal(err)
		}
		msgs := []sdk.ConsumedMessage{{Offset: 7, ID: sdk.MessageIDFromUint64(1), Payload: []byte("hello")}, {Offset: 8, ID: sdk.MessageIDFromUint64(2), Payload: []byte{0xff}}}
		meta := sdk.MessagesMetadata{Partition: sdk.Partition{PartitionID: 3}, Schema: tc.schema}
		if err := s.Consume(context.Background(), sdk.TopicMetadata{Stream: "s", Topic: "t"}, meta, msgs); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("cfg %s schema %s:\n%q\nwant\n%q", tc.cfg, tc.schema, out.String(), tc.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{`{"print":1}`, "plugin_config.print: unknown field (known: print_payload)"},
		{`{"print_payload":"yes"}`, `plugin_config.print_payload: want a bool, got string "yes"`},
	} {
		err := New().Open(context.Background(), sdktest.SinkEnv(t, tc.cfg, nil))
		if err == nil || err.Error() != "stdout sink: "+tc.want || !errors.Is(err, sdk.ErrPermanent) {
			t.Errorf("Open(%s) = %v, want the permanent error stdout sink: %s", tc.cfg, err, tc.want)
		}
	}
}

// Under sink_controlled each batch is committed once its lines are written; a commit the
// runtime refuses (the partition moved away) does not fail the batch.
func TestSinkControlledCommitsEachBatch(t *testing.T) {
	c := sdktest.NewCommitter()
	var out bytes.Buffer
	s := NewWriter(&out)
	if err := s.Open(context.Background(), sdktest.SinkEnv(t, nil, c)); err != nil {
		t.Fatal(err)
	}
	p := sdktest.Part(0)
	ctx := context.Background()
	if err := sdktest.Consume(ctx, s, c, sdktest.Topic, p, sdktest.Messages(0, 0, 3, nil)); err != nil {
		t.Fatal(err)
	}
	if off, ok := c.Committed(p); !ok || off != 2 {
		t.Fatalf("committed %d (%v), want 2", off, ok)
	}
	c.Revoke(p)
	if err := sdktest.Consume(ctx, s, nil, sdktest.Topic, p, sdktest.Messages(0, 3, 2, nil)); err != nil {
		t.Fatalf("a batch whose commit is refused: %v", err)
	}
	if n := strings.Count(out.String(), "\n"); n != 5 {
		t.Fatalf("%d lines, want 5", n)
	}
	if got := fmt.Sprint(len(c.Commits()), len(c.Refused()), len(c.OutOfRange())); got != "1 1 0" {
		t.Fatalf("commits, refused, out of range: %s", got)
	}
}

// syncBuffer is the sink's target in the harness: it outlives the sink instances.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// records reads the printed lines back: "<stream>/<topic> partition=P offset=O id=… payload=…".
func (w *syncBuffer) records(context.Context) ([]sdktest.Record, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []sdktest.Record
	for line := range strings.Lines(w.b.String()) {
		f := strings.Fields(line)
		if len(f) != 5 {
			return nil, fmt.Errorf("line %q: want 5 fields", line)
		}
		p, err1 := strconv.ParseUint(strings.TrimPrefix(f[1], "partition="), 10, 32)
		o, err2 := strconv.ParseUint(strings.TrimPrefix(f[2], "offset="), 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("line %q: %w", line, err)
		}
		out = append(out, sdktest.Record{Partition: uint32(p), Offset: o, Payload: []byte(strings.TrimPrefix(f[4], "payload="))})
	}
	return out, nil
}

// The sink states at least once in both modes it commits in: every message printed,
// whatever step a crash hits.
func TestAtLeastOnceCrashAtEveryStep(t *testing.T) {
	for _, sinkControlled := range []bool{true, false} {
		t.Run(fmt.Sprintf("sink_controlled=%v", sinkControlled), func(t *testing.T) {
			w := &syncBuffer{}
			sdktest.SinkHarness{
				New:            func() sdk.Sink { return NewWriter(w) },
				Config:         `{"print_payload":true}`,
				SinkControlled: sinkControlled,
				Guarantee:      sdktest.AtLeastOnce,
				Reset:          func(context.Context) error { w.mu.Lock(); w.b.Reset(); w.mu.Unlock(); return nil },
				Read:           w.records,
			}.CrashAtEveryStep(t)
		})
	}
}
