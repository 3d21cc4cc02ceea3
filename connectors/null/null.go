package null

import (
	"context"
	"sync/atomic"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:null". The sink takes no plugin_config.
const Name = "null"

// Spec: the null sink ignores plugin_config.
var Spec = sdk.ConfigSpec{AnyFields: true}

// Sink discards messages. Safe for concurrent use.
type Sink struct {
	messages atomic.Uint64
	batches  atomic.Uint64
}

// New returns an unopened null sink.
func New() *Sink { return &Sink{} }

// Open accepts any config.
func (s *Sink) Open(context.Context, sdk.SinkEnv) error { return nil }

// Consume counts the batch and returns nil.
func (s *Sink) Consume(_ context.Context, _ sdk.TopicMetadata, _ sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	s.batches.Add(1)
	s.messages.Add(uint64(len(msgs)))
	return nil
}

// Close does nothing.
func (s *Sink) Close(context.Context) error { return nil }

// Messages returns how many messages were consumed.
func (s *Sink) Messages() uint64 { return s.messages.Load() }

// Batches returns how many Consume calls were made.
func (s *Sink) Batches() uint64 { return s.batches.Load() }

// MaxInFlight implements sdk.ConcurrentSink: Consume only adds to atomic counters.
func (s *Sink) MaxInFlight() int { return sdk.MaxConcurrentUnlimited }
