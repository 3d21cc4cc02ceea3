package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/ferryio/ferry/sdk"
)

// Topic is the stream and topic the kit's helpers use unless told otherwise.
var Topic = sdk.TopicMetadata{Stream: "stream", Topic: "topic", StreamID: 1, TopicID: 1}

// Part returns partition id of Topic.
func Part(id uint32) sdk.Partition {
	return sdk.Partition{StreamID: Topic.StreamID, TopicID: Topic.TopicID, PartitionID: id}
}

// Config renders a plugin_config for SinkEnv and SourceEnv: raw JSON bytes or a string
// are taken as they are, anything else is marshalled (a map or a struct with JSON tags).
func Config(tb TB, v any) []byte {
	tb.Helper()
	switch c := v.(type) {
	case nil:
		return []byte("null")
	case []byte:
		return c
	case string:
		return []byte(c)
	case json.RawMessage:
		return c
	}
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("sdktest: plugin_config: %v", err)
	}
	return b
}

// SinkEnv returns what the runtime would open a sink with: key "test", config, a logger
// writing to tb's log, c as the Committer (nil: not sink_controlled) and on_failure stop.
func SinkEnv(tb TB, config any, c *Committer) sdk.SinkEnv {
	env := sdk.SinkEnv{Key: "test", Config: Config(tb, config), Logger: Logger(tb), OnFailure: sdk.FailureStop}
	if c != nil {
		env.Committer = c
	}
	return env
}

// SourceEnv returns what the runtime would open a source with: key "test", config, a
// logger writing to tb's log and the saved state (nil on a first start); its Tail reads
// log, the kit's stand-in for the source's topic (nil: no tail reader).
func SourceEnv(tb TB, config any, state []byte, log *Log) sdk.SourceEnv {
	env := sdk.SourceEnv{Key: "test", Config: Config(tb, config), State: state, Logger: Logger(tb)}
	if log != nil {
		env.Tail = func(context.Context) (sdk.Tail, error) { return log.Tail(1), nil }
		env.TailN = func(_ context.Context, n int) (sdk.Tail, error) { return log.Tail(n), nil }
	}
	return env
}

// Logger returns a logger writing each record to tb's log (and nothing once the test
// ended: a connector's goroutine may still log).
func Logger(tb TB) *slog.Logger {
	w := &tbWriter{tb: tb}
	tb.Cleanup(w.end)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct {
	mu    sync.Mutex
	tb    TB
	ended bool
}

func (w *tbWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.tb.Logf("%s", strings.TrimSuffix(string(b), "\n"))
	}
	return len(b), nil
}

func (w *tbWriter) end() { w.mu.Lock(); w.ended = true; w.mu.Unlock() }

var _ io.Writer = (*tbWriter)(nil)

// Messages returns n messages of partition p from offset first, as a poll would deliver
// them: ids unique per (partition, offset), timestamps increasing, the payload of
// payload (nil: `{"p":P,"o":O}`).
func Messages(p uint32, first, n uint64, payload func(p uint32, offset uint64) []byte) []sdk.ConsumedMessage {
	out := make([]sdk.ConsumedMessage, n)
	for i := range out {
		o := first + uint64(i)
		out[i] = Message(p, o, payload)
	}
	return out
}

// Message is one of Messages.
func Message(p uint32, o uint64, payload func(p uint32, offset uint64) []byte) sdk.ConsumedMessage {
	if payload == nil {
		payload = JSONPayload
	}
	return sdk.ConsumedMessage{ID: sdk.MessageIDFromUint64(uint64(p)<<40 | o + 1), Offset: o,
		Timestamp: baseTime + o, OriginTimestamp: baseTime, Payload: payload(p, o),
		Headers: []sdk.Header{{Key: sdk.String("offset"), Value: sdk.Uint64(o)}}}
}

// JSONPayload is the default payload: {"p":P,"o":O}.
func JSONPayload(p uint32, o uint64) []byte { return fmt.Appendf(nil, `{"p":%d,"o":%d}`, p, o) }

const baseTime = 1_710_597_600_000_000 // 2024-03-16T14:00:00Z, in µs

// Consume delivers msgs of partition p to sink as the runtime does: recorded as delivered
// in c (when not nil) first, then one Consume call.
func Consume(ctx context.Context, sink sdk.Sink, c *Committer, topic sdk.TopicMetadata, p sdk.Partition, msgs []sdk.ConsumedMessage) error {
	if c != nil {
		c.Deliver(p, msgs)
	}
	meta := sdk.MessagesMetadata{Partition: p, Schema: sdk.SchemaJSON}
	if len(msgs) > 0 {
		meta.CurrentOffset = msgs[len(msgs)-1].Offset
	}
	return sink.Consume(ctx, topic, meta, msgs)
}

// Rejected returns the offsets err says the target refused (sdk.RejectedMessages), nil
// when it says none.
func Rejected(err error) []uint64 {
	var rej *sdk.RejectedMessages
	if errors.As(err, &rej) {
		return rej.Offsets
	}
	return nil
}
