package null

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/ferryio/ferry/sdk"
)

// Name is the registry name: path = "builtin:null". The sink takes no plugin_config.
const Name = "null"

// Spec: the null sink ignores plugin_config. Under offset_commit = "sink_controlled" it
// commits each batch at once (sdk.CommitsEachBatch): dropping a batch is all its writing,
// and the mode then measures the runtime's commit path with no target behind it.
var Spec = sdk.ConfigSpec{AnyFields: true, Commits: sdk.CommitsEachBatch}

// Sink discards messages. Safe for concurrent use.
type Sink struct {
	messages atomic.Uint64
	batches  atomic.Uint64
	pos      *sdk.Positions // commits each batch (sink_controlled)
	log      *slog.Logger
}

// New returns an unopened null sink.
func New() *Sink { return &Sink{} }

// Open accepts any config.
func (s *Sink) Open(_ context.Context, env sdk.SinkEnv) error {
	s.pos, s.log = sdk.NewPositions(env, nil), env.Logger
	return nil
}

// Consume counts the batch and returns nil; under sink_controlled it first commits the
// batch's last offset.
func (s *Sink) Consume(_ context.Context, _ sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	if len(msgs) > 0 {
		last := msgs[len(msgs)-1].Offset
		// Nothing is kept either way: a refused commit (the partition moved to another
		// member, or the offset is already stored) only means the batch may come again.
		if err := s.pos.Durable(meta.Partition, last); err != nil && !errors.Is(err, sdk.ErrCommitUnknownPartition) {
			s.log.Warn("null sink: commit refused", "partition", meta.Partition.PartitionID, "offset", last, "error", err)
		}
	}
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
