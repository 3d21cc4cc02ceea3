package connect

import (
	"context"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/sdk"
)

// backend is what the runtime needs of an Iggy client; iggy_backend.go implements it over
// *iggy.Client. It keeps the pipeline's code independent of the client's concrete types
// (and lets a test put a fault in front of one call of the real client).
type backend interface {
	producers
	// topicMetadata resolves names to numeric ids once per topic consumer.
	topicMetadata(ctx context.Context, stream, topic string) (sdk.TopicMetadata, error)
	newConsumer(ctx context.Context, cfg consumerConfig) (memberConsumer, error)
}

// producers is the part of backend a source runner needs.
type producers interface {
	// newProducer returns a producer on cfg's stream and topic: a source's producer, and a
	// dead-letter producer. It creates neither: a missing one is an error naming both and
	// --create-topics (missingTopicError).
	newProducer(ctx context.Context, cfg producerConfig) (producer, error)
}

type consumerConfig struct {
	Stream, Topic string
	Group         string
	BatchSize     uint32
	PollInterval  time.Duration
	AutoCommit    bool
	// OnChange is told every assignment change, in band: on the poll goroutine, inside
	// Poll, before any batch polled under the new assignment (iggy.AssignmentChange).
	OnChange func(assignmentChange)
}

// assignmentChange is one report of the member consumer (iggy.AssignmentChange).
type assignmentChange struct {
	revoked, assigned []uint32
	// replaced is set when the topic was deleted and created again since the last
	// report: every revoked partition belongs to the old topic, whose offsets must not be
	// stored into the new one.
	replaced *topicReplacement
	// rewound lists the partitions found gone back to an earlier offset (purged); each is
	// also revoked and assigned, and the new assignment starts at offset 0. Offsets of the
	// earlier assignment describe messages that are gone: they must not be stored.
	rewound []partitionRewind
	// life is the member's incarnation of the topic the assigned partitions belong to;
	// a store names it (memberConsumer.Store).
	life uint64
}

// partitionRewind is one partition found rewound (iggy.PartitionRewind): the member was
// at position (the next offset) and the partition's last offset was current.
type partitionRewind struct {
	partition         uint32
	position, current uint64
	reason            string
}

// topicReplacement names the old and the new topic of a replacement (ids and creation
// times in µs, as Iggy reports them).
type topicReplacement struct {
	oldID, newID               uint32
	oldCreatedAt, newCreatedAt uint64
}

// consumerBatch is one polled batch: one partition, never empty.
type consumerBatch struct {
	Partition     uint32
	CurrentOffset uint64
	Sent          time.Time      // when the poll request was sent (zero: unknown)
	Messages      []wire.Message // valid until Release
	Release       func()
}

// memberConsumer is one consumer-group member on one topic (iggy.Consumer). Poll is
// called by one goroutine; the other methods from any.
type memberConsumer interface {
	Poll(ctx context.Context) (consumerBatch, error)
	// Store writes the group's offset of partition, an offset of incarnation life of
	// the topic (assignmentChange.life). Errors for which storeRefused is true are final
	// for the partition (not owned any more, behind the group, or the topic replaced).
	Store(ctx context.Context, life uint64, partition uint32, offset uint64) error
	Pause(partition uint32)
	Resume(partition uint32)
	// Seek makes the next poll of partition start at offset next (a batch polled while
	// the sink was held is given back this way, undelivered). With timestamp ≠ 0 (the
	// server timestamp of the message at next−1, as a sink's target holds it) the poll
	// checks that message is still there: if not, the partition is reported rewound.
	Seek(partition uint32, next, timestamp uint64)
	Close(ctx context.Context) error
}

type producerConfig struct {
	Stream, Topic string
	BatchLength   uint32        // 0 = the producer's default
	Linger        time.Duration // 0 = the producer's default
}

// producer sends one batch and returns once Iggy confirmed every message.
type producer interface {
	send(ctx context.Context, msgs []sdk.ProducedMessage) error
	// tail reads the last message of each partition (sdk.SourceEnv.Tail).
	tail(ctx context.Context) (sdk.Tail, error)
	// tailN reads the last n messages of each partition (sdk.SourceEnv.TailN).
	tailN(ctx context.Context, n int) (sdk.Tail, error)
	close(ctx context.Context) error
}
