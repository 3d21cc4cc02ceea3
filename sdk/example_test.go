package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferryio/ferry/sdk"
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
