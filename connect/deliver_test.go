package connect

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// scriptSink fails Consume `fails` times (with an error, or a panic when panics is set),
// then succeeds.
type scriptSink struct {
	mu     sync.Mutex
	fails  int
	panics bool
	calls  int
}

func (s *scriptSink) Open(context.Context, sdk.SinkEnv) error { return nil }
func (s *scriptSink) Close(context.Context) error             { return nil }
func (s *scriptSink) Consume(context.Context, sdk.TopicMetadata, sdk.MessagesMetadata, []sdk.ConsumedMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fails > 0 {
		s.fails--
		if s.panics {
			panic("boom")
		}
		return errors.New("target unavailable")
	}
	return nil
}

type recordingDLQ struct {
	fail int
	sent [][]sdk.ProducedMessage
}

func (d *recordingDLQ) send(_ context.Context, msgs []sdk.ProducedMessage) error {
	if d.fail > 0 {
		d.fail--
		return errors.New("dlq down")
	}
	d.sent = append(d.sent, msgs)
	return nil
}

func (d *recordingDLQ) close(context.Context) error                  { return nil }
func (d *recordingDLQ) tail(context.Context) (sdk.Tail, error)       { return sdk.Tail{}, nil }
func (d *recordingDLQ) tailN(context.Context, int) (sdk.Tail, error) { return sdk.Tail{}, nil }

func testBatch(first uint64, n int) []sdk.ConsumedMessage {
	out := make([]sdk.ConsumedMessage, n)
	for i := range out {
		out[i] = sdk.ConsumedMessage{Offset: first + uint64(i), Payload: []byte("m"),
			Headers: []sdk.Header{{Key: sdk.String("orig"), Value: sdk.String("v")}}}
	}
	return out
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// testProcessor is the batch processor a sink runner with cfg would make, around sink,
// with dlq as its dead-letter producer (nil for none).
func testProcessor(cfg *config.Sink, sink sdk.Sink, dlq producer, c *Counters) *batchProcessor {
	p := &batchProcessor{sink: sink, commit: policyFor(cfg), failure: sinkFailurePolicy(cfg, c, quietLog), counters: c, log: quietLog}
	p.failure.dlq = dlq
	return p
}

func TestProcessFailurePolicies(t *testing.T) {
	topic := sdk.TopicMetadata{Stream: "orders", Topic: "created", StreamID: 1, TopicID: 2}
	meta := sdk.MessagesMetadata{Partition: sdk.Partition{StreamID: 1, TopicID: 2, PartitionID: 3}}
	for _, tc := range []struct {
		name                               string
		mode                               config.CommitMode
		policy                             config.FailurePolicy
		fails                              int
		panics                             bool
		want                               batchResult
		wantCalls                          int
		wantDone                           int64 // after processing batch 10..19
		wantConsErrs                       uint64
		wantFailed                         uint64
		wantDL, wantSkipped, wantDelivered uint64
	}{
		{"succeeds after 2 retries", config.CommitAfterConsuming, config.FailureStop, 2, false, batchDelivered, 3, 19, 2, 0, 0, 0, 10},
		{"panic recovered and retried", config.CommitAfterConsuming, config.FailureStop, 1, true, batchDelivered, 2, 19, 1, 0, 0, 0, 10},
		{"stop: nothing committed", config.CommitAfterConsuming, config.FailureStop, 99, false, batchStop, 4, 9, 4, 1, 0, 0, 0},
		{"skip commits past", config.CommitAfterConsuming, config.FailureSkip, 99, false, batchResolved, 4, 19, 4, 1, 0, 10, 0},
		{"dead letter then commit", config.CommitAfterConsuming, config.FailureDeadLetter, 99, false, batchResolved, 4, 19, 4, 1, 10, 0, 0},
		{"sink_controlled: success commits nothing", config.CommitSinkControlled, config.FailureStop, 0, false, batchDelivered, 1, 9, 0, 0, 0, 0, 10},
		{"sink_controlled: skip resolves", config.CommitSinkControlled, config.FailureSkip, 99, false, batchResolved, 4, 19, 4, 1, 0, 10, 0},
		{"after_polling: skip stores nothing more", config.CommitAfterPolling, config.FailureSkip, 99, false, batchResolved, 4, 19, 4, 1, 0, 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := new(Counters)
			sink := &scriptSink{fails: tc.fails, panics: tc.panics}
			dlq := &recordingDLQ{fail: 1}
			cfg := testSinkConfig(tc.mode, tc.policy)
			cfg.Retry = config.Retry{MaxRetries: 3, InitialBackoff: time.Microsecond, MaxBackoff: time.Microsecond}
			pol := policyFor(cfg)
			p := testProcessor(cfg, sink, dlq, c)
			tbl := newTestTable(pol, c)
			tbl.change(nil, []uint32{3})
			part, _ := tbl.polled(3, 0, 9, 9)
			tbl.delivering(part, 9)
			tbl.resolve(part, 0, 9) // batch 0..9 already handled
			tbl.polled(3, 10, 19, 19)
			tbl.delivering(part, 19)
			res, err := p.process(context.Background(), topic, meta, testBatch(10, 10))
			if pol.resolves(res) {
				tbl.resolve(part, 10, 19)
			}
			if res != tc.want {
				t.Fatalf("result %v (%v), want %v", res, err, tc.want)
			}
			if tc.want == batchStop && !strings.Contains(err.Error(), "target unavailable") {
				t.Fatalf("stop error %v lacks the cause", err)
			}
			if tc.panics && tc.want == batchStop && !errors.Is(err, ErrConnectorPanic) {
				t.Fatalf("err %v, want ErrConnectorPanic", err)
			}
			if sink.calls != tc.wantCalls {
				t.Errorf("consume calls %d, want %d", sink.calls, tc.wantCalls)
			}
			if st := tbl.status(); len(st) != 1 || st[0].Done != tc.wantDone {
				t.Errorf("status %+v, want done %d", st, tc.wantDone)
			}
			s := c.Snapshot()
			if s.ConsumeErrors != tc.wantConsErrs || s.FailedBatches != tc.wantFailed || s.DeadLettered != tc.wantDL ||
				s.Skipped != tc.wantSkipped || s.Delivered != tc.wantDelivered {
				t.Errorf("counters %+v", s)
			}
			if tc.policy == config.FailureDeadLetter {
				if len(dlq.sent) != 1 || len(dlq.sent[0]) != 10 {
					t.Fatalf("dead letters %v", dlq.sent)
				}
				checkDeadLetter(t, dlq.sent[0][4], 14)
			}
		})
	}
}

func checkDeadLetter(t *testing.T, m sdk.ProducedMessage, offset uint64) {
	t.Helper()
	got := map[string]sdk.HeaderField{}
	for _, h := range m.Headers {
		got[string(h.Key.Value)] = h.Value
	}
	want := map[string]sdk.HeaderField{
		"orig":                sdk.String("v"),
		HeaderError:           sdk.String("target unavailable"),
		HeaderSourceStream:    sdk.String("orders"),
		HeaderSourceTopic:     sdk.String("created"),
		HeaderSourcePartition: {Kind: sdk.HeaderUint32, Value: []byte{3, 0, 0, 0}},
		HeaderSourceOffset:    sdk.Uint64(offset),
		HeaderStage:           sdk.String("consume"),
	}
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for k, w := range want {
		if g := got[k]; g.Kind != w.Kind || string(g.Value) != string(w.Value) {
			t.Errorf("header %s = %+v, want %+v", k, g, w)
		}
	}
	if string(m.Payload) != "m" || !m.ID.IsZero() {
		t.Errorf("payload %q id %v", m.Payload, m.ID)
	}
}

// TestProcessAbandonedAtHardStop: a batch in retry backoff when the runtime stops hard is
// abandoned: not counted as failed, not committed.
func TestProcessAbandonedAtHardStop(t *testing.T) {
	c := new(Counters)
	cfg := testSinkConfig(config.CommitAfterConsuming, config.FailureSkip)
	cfg.Retry = config.Retry{MaxRetries: 3, InitialBackoff: time.Hour, MaxBackoff: time.Hour}
	p := testProcessor(cfg, &scriptSink{fails: 99}, nil, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res, err := p.process(ctx, sdk.TopicMetadata{}, sdk.MessagesMetadata{}, testBatch(0, 10))
	if res != batchAbandoned || !errors.Is(err, ErrAbandoned) {
		t.Fatalf("result %v, %v; want abandoned", res, err)
	}
	if s := c.Snapshot(); s.FailedBatches != 0 || s.Skipped != 0 || s.ConsumeErrors != 1 {
		t.Fatalf("counters %+v", s)
	}
	for _, mode := range allModes {
		if policyFor(testSinkConfig(mode, config.FailureSkip)).resolves(res) {
			t.Fatalf("%s: an abandoned batch is resolved", mode)
		}
	}
}

func TestTruncateUTF8(t *testing.T) {
	s := strings.Repeat("é", 200) // 400 bytes
	got := truncateUTF8(s, 255)
	if len(got) != 254 || !strings.HasPrefix(s, got) {
		t.Fatalf("len %d", len(got))
	}
}
