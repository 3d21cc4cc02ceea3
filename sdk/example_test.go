package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// kvSink is a sink for a key-value store whose client can lose its connection, be
// rate-limited, or refuse a record for good.
type kvSink struct {
	connected bool
	store     map[string][]byte
}

func (s *kvSink) Open(context.Context, sdk.SinkEnv) error {
	s.connected, s.store = true, map[string][]byte{}
	return nil
}

func (s *kvSink) Close(context.Context) error { return nil }

// Reconnect is called by the runtime after Consume returned ErrNotConnected.
func (s *kvSink) Reconnect(context.Context) error {
	s.connected = true
	return nil
}

var errThrottled = errors.New("throttled: retry after 2s")

func (s *kvSink) Consume(_ context.Context, _ sdk.TopicMetadata, _ sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if !s.connected {
		// Reconnect me and call again; this does not count toward max_retries.
		return fmt.Errorf("kv write: %w", sdk.ErrNotConnected)
	}
	var rejected []uint64
	for _, m := range msgs {
		switch {
		case len(m.Payload) == 0:
			// This one record can never be written: the rest of the batch is.
			rejected = append(rejected, m.Offset)
		case string(m.Payload) == "slow down":
			// The store asked us to wait: the runtime waits exactly this long.
			return sdk.BackOff(2*time.Second, errThrottled)
		case string(m.Payload) == "bad schema":
			// Nothing about this batch will ever succeed: straight to on_failure.
			return sdk.Permanent(errors.New("schema mismatch"))
		default:
			s.store[fmt.Sprint(m.Offset)] = m.Payload
		}
	}
	if len(rejected) > 0 {
		return &sdk.RejectedMessages{Offsets: rejected, Err: errors.New("empty value")}
	}
	return nil
}

// A sink says what a retry needs through the error it returns from Consume. The runtime
// reads it with errors.Is and errors.As, so wrapping it with context keeps its meaning.
func Example_steeringErrors() {
	s := &kvSink{}
	_ = s.Open(context.Background(), sdk.SinkEnv{})
	var _ sdk.Reconnector = s // the runtime calls Reconnect after ErrNotConnected

	batch := func(payloads ...string) []sdk.ConsumedMessage {
		out := make([]sdk.ConsumedMessage, len(payloads))
		for i, p := range payloads {
			out[i] = sdk.ConsumedMessage{Offset: uint64(10 + i), Payload: []byte(p)}
		}
		return out
	}
	consume := func(msgs []sdk.ConsumedMessage) error {
		return s.Consume(context.Background(), sdk.TopicMetadata{}, sdk.MessagesMetadata{}, msgs)
	}

	err := consume(batch("a", "slow down"))
	var bo *sdk.BackOffError
	fmt.Println("back off:", errors.As(err, &bo), bo.Wait)

	err = consume(batch("bad schema"))
	fmt.Println("permanent:", errors.Is(err, sdk.ErrPermanent), err)

	err = consume(batch("a", "", "c"))
	var rej *sdk.RejectedMessages
	fmt.Println("rejected:", errors.As(err, &rej), rej.Offsets)

	s.connected = false
	err = consume(batch("a"))
	fmt.Println("not connected:", errors.Is(err, sdk.ErrNotConnected))
	_ = s.Reconnect(context.Background())
	fmt.Println("after reconnect:", consume(batch("a")))
	// Output:
	// back off: true 2s
	// permanent: true schema mismatch
	// rejected: true [11]
	// not connected: true
	// after reconnect: <nil>
}

// Permanent keeps the error it wraps visible to errors.Is, and adds sdk.ErrPermanent.
func ExamplePermanent() {
	cause := errors.New("credentials rejected")
	err := fmt.Errorf("open: %w", sdk.Permanent(cause))
	fmt.Println(errors.Is(err, sdk.ErrPermanent), errors.Is(err, cause))
	// Output: true true
}

// BackOff asks for one wait; a zero wait means the connector's own backoff.
func ExampleBackOff() {
	err := sdk.BackOff(1500*time.Millisecond, errors.New("HTTP 429"))
	fmt.Println(err)
	// Output: back off 1.5s: HTTP 429
}

// format is a connector's own enum type: the config holds it, not a string to compare.
type format string

const (
	formatLines format = "json_lines"
	formatArray format = "json_array"
)

// webhookConfig is a connector's plugin_config as its code reads it: typed, nothing left
// to re-parse.
type webhookConfig struct {
	URL      string
	Token    sdk.Secret
	Timeout  time.Duration
	MaxBody  sdk.ByteSize
	Format   format
	Attempts int
}

// webhookSpec declares each key once: its type, default, bounds and meaning.
var webhookSpec = sdk.NewConfig(func(c *webhookConfig, f *sdk.Fields) {
	f.URL("url", &c.URL, "http", "https").Required().Doc("the endpoint")
	f.Secret("token", &c.Token).Doc("the bearer token")
	f.Duration("timeout", &c.Timeout).Default(30 * time.Second).Min(time.Millisecond).Doc("per request")
	f.Size("max_body_size", &c.MaxBody).Default(8 * sdk.MiB).Max(64 * sdk.MiB)
	sdk.Enum(f, "format", &c.Format, sdk.Choice(formatLines, "jsonl"), sdk.Choice(formatArray)).Default(formatLines)
	f.Int("max_attempts", &c.Attempts).Alias("max_retries").Default(3).Min(1)
	f.RequiredWhen("token", "format", string(formatArray))
})

// A connector declares its plugin_config once with NewConfig; Parse (in Open) fills the
// typed struct or names every problem by its key, and Spec gives `ferry check` the same
// checks and `ferry connectors` the same fields.
func ExampleNewConfig() {
	cfg, err := webhookSpec.Parse([]byte(`{"url": "https://example.com/in", "token": "s3cret",
		"timeout": "2s", "max_body_size": "1MiB", "format": "jsonl", "max_retries": 5}`))
	fmt.Println(err)
	fmt.Println(cfg.URL, cfg.Timeout, cfg.MaxBody, cfg.Format, cfg.Attempts)
	fmt.Printf("token %v, %d bytes to send\n", cfg.Token, len(cfg.Token.Reveal()))

	_, err = webhookSpec.Parse([]byte(`{"url": "ftp://example.com", "timeout": "0s", "format": "xml"}`))
	fmt.Println(err)

	// `ferry check` runs the same code, rules between keys included.
	for _, err := range webhookSpec.Spec().Validate([]byte(`{"url": "https://example.com/in", "format": "json_array"}`)) {
		fmt.Println("check:", err)
	}
	// Output:
	// <nil>
	// https://example.com/in 2s 1MiB json_lines 5
	// token ***, 6 bytes to send
	// plugin_config.format: unknown value "xml" (want json_lines or json_array)
	// plugin_config.timeout: 0s is below the minimum 1ms
	// plugin_config.url: scheme "ftp" not supported (want http, https)
	// check: plugin_config.token: required with format = "json_array"
}

// flakyTarget fails the way a network target does: a reset, a rate limit, a lost
// connection, then it takes the write.
type flakyTarget struct{ calls int }

func (t *flakyTarget) write(context.Context) error {
	t.calls++
	switch t.calls {
	case 1:
		return errors.New("connection reset")
	case 2:
		return sdk.BackOff(2*time.Second, errors.New("HTTP 429"))
	case 3:
		return fmt.Errorf("write: %w", sdk.ErrNotConnected)
	}
	return nil
}

// Reconnect is what Retry calls after ErrNotConnected.
func (t *flakyTarget) Reconnect(context.Context) error {
	fmt.Println("reconnecting")
	return nil
}

// Retry is the one retry loop: capped exponential backoff, steered by the errors the
// operation returns, each retried failure logged once with What. Sleep replaces the
// waits here so the example shows them.
func ExampleRetry() {
	target := &flakyTarget{}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	r := sdk.Retry{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Attempts: 3,
		What: "upload", Log: logger, LogAttrs: []any{"sink", "webhook"}, Reconnector: target,
		Sleep: func(_ context.Context, d time.Duration) bool { fmt.Println("wait", d); return true }}
	err := r.Do(context.Background(), func(ctx context.Context, _ int) error { return target.write(ctx) })
	fmt.Println("done:", err, "after", target.calls, "calls")

	err = r.Do(context.Background(), func(context.Context, int) error {
		return sdk.Permanent(errors.New("HTTP 400: bad payload"))
	})
	fmt.Println("permanent:", err)
	// Output:
	// level=WARN msg="upload failed; retrying" attempt=1 sink=webhook of=3 backoff=100ms error="connection reset"
	// wait 100ms
	// level=WARN msg="upload asked to back off" attempt=2 sink=webhook of=3 backoff=2s error="back off 2s: HTTP 429"
	// wait 2s
	// level=WARN msg="upload: not connected; reconnecting" attempt=3 sink=webhook of=3 error="write: not connected"
	// reconnecting
	// level=INFO msg="upload: reconnected" sink=webhook
	// done: <nil> after 4 calls
	// permanent: HTTP 400: bad payload
}

// Positions keeps a sink's per-partition bookkeeping. Here an exactly-once sink whose
// target already holds partition 0 up to offset 6: Assigned seeks there, Fresh cuts off
// a redelivery, and Durable commits once the write is durable. (The Committer is the test
// kit's, with the runtime's rules.)
func ExamplePositions() {
	committer := sdktest.NewCommitter()
	held := map[sdk.Partition]uint64{sdktest.Part(0): 7} // next offset to write, per partition
	pos := sdk.NewPositions(sdk.SinkEnv{Committer: committer},
		func(_ context.Context, _ sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
			out := map[sdk.Partition]uint64{}
			for _, p := range parts {
				if next, ok := held[p]; ok {
					out[p] = next
				}
			}
			return out, nil
		})

	p := sdktest.Part(0)
	seek, _ := pos.Assigned(context.Background(), sdktest.Topic, []sdk.Partition{p})
	fmt.Println("resume partition 0 at", seek[p])
	committer.Assign(p, seek[p])

	batch := sdktest.Messages(0, 5, 5, nil) // offsets 5..9: 5 and 6 are in the target
	committer.Deliver(p, batch)
	fresh := pos.Fresh(p, batch)
	fmt.Println("write", fresh[0].Offset, "to", fresh[len(fresh)-1].Offset)
	// ... write fresh and its offset to the target, atomically ...
	fmt.Println("durable:", pos.Durable(p, fresh[len(fresh)-1].Offset))
	fmt.Println("again:", len(pos.Fresh(p, batch)), "to write")
	last, _ := committer.Committed(p)
	fmt.Println("committed", last)
	// Output:
	// resume partition 0 at 7
	// write 7 to 9
	// durable: <nil>
	// again: 0 to write
	// committed 9
}

// An at-least-once sink made durable by a periodic fsync writes every batch it is given:
// Written per batch, a Mark before the fsync, Synced after it. What is written during
// the fsync waits for the next one.
func ExamplePositions_Mark() {
	committer := sdktest.NewCommitter()
	pos := sdk.NewPositions(sdk.SinkEnv{Committer: committer}, nil)
	p := sdktest.Part(1)
	committer.Deliver(p, sdktest.Messages(1, 0, 20, nil))

	pos.Written(p, 9)  // a batch appended to the file
	mark := pos.Mark() // the fsync begins
	pos.Written(p, 19) // a batch appended while it runs
	_ = mark.Synced()  // the fsync returned
	last, _ := committer.Committed(p)
	fmt.Println("committed", last)
	_ = pos.Synced() // the next fsync
	last, _ = committer.Committed(p)
	fmt.Println("committed", last)
	// Output:
	// committed 9
	// committed 19
}
