package connect

import (
	"context"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// backend is what the runtime needs of an Iggy client; iggy_backend.go implements it over
// *iggy.Client. It keeps the pipeline's code independent of the client's concrete types.
type backend interface {
	// topicMetadata resolves names to numeric ids once per topic consumer.
	topicMetadata(ctx context.Context, stream, topic string) (sdk.TopicMetadata, error)
	newConsumer(ctx context.Context, cfg consumerConfig) (memberConsumer, error)
	// newDeadLetterProducer returns a producer for the dead-letter stream/topic, creating
	// them (one partition) when missing.
	newDeadLetterProducer(ctx context.Context, stream, topic string) (deadLetterProducer, error)
}

type consumerConfig struct {
	Stream, Topic string
	Group         string
	BatchSize     uint32
	PollInterval  time.Duration
	AutoCommit    bool
}

// consumerBatch is one polled batch: one partition, never empty.
type consumerBatch struct {
	Partition     uint32
	CurrentOffset uint64
	Generation    uint64
	Messages      []wire.Message // valid until Release
	Release       func()
}

type assignmentEvent struct {
	Generation        uint64
	Assigned, Revoked []uint32
}

// memberConsumer is one consumer-group member on one topic (iggy.Consumer).
type memberConsumer interface {
	Poll(ctx context.Context) (consumerBatch, error)
	Commit(ctx context.Context, partition uint32, offset uint64) error
	Pause(partition uint32)
	Resume(partition uint32)
	Events() <-chan assignmentEvent
	Close(ctx context.Context) error
}

type deadLetterProducer interface {
	deadLetterSender
	Close(ctx context.Context) error
}
