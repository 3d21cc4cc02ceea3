package sdk

import (
	"context"
	"log/slog"
	"runtime"
)

// TopicMetadata names the stream and topic a batch came from, by name and by Iggy's numeric
// (0-based) id.
type TopicMetadata struct {
	Stream   string
	Topic    string
	StreamID uint32
	TopicID  uint32
}

// Partition identifies one partition of one topic by numeric ids.
type Partition struct {
	StreamID    uint32
	TopicID     uint32
	PartitionID uint32
}

// MessagesMetadata describes one batch: all its messages come from one partition.
type MessagesMetadata struct {
	Partition Partition
	// CurrentOffset is the partition's highest offset as reported by the poll, not the offset
	// of the batch's last message (Iggy's convention).
	CurrentOffset uint64
	Schema        Schema
}

// Committer lets a sink in `sink_controlled` mode advance its stored offsets.
//
// Commit records that every message of partition p up to and including offset has been
// written durably. It is safe to call from any goroutine, at any time, including from inside
// Consume and during Close; it never blocks on the network: commits are coalesced per
// partition and stored on an interval and at shutdown. It returns an error wrapping
// [ErrCommitUnknownPartition] when the sink no longer owns p (stopped, rebalanced away),
// [ErrCommitStale] for an offset at or below what is already committed, and
// [ErrCommitOutOfRange] for an offset this sink was never given.
type Committer interface {
	Commit(p Partition, offset uint64) error
}

// SinkEnv is what the runtime hands a sink when it opens it.
type SinkEnv struct {
	// Key is the connector's key from its config file.
	Key string
	// Config is the connector's plugin_config, as compact JSON ("null" when absent, as Iggy).
	Config []byte
	// Logger carries the connector's key; use it instead of the global logger. The runtime
	// always sets it, and so does sdktest.SinkEnv: a sink needs no fallback of its own.
	Logger *slog.Logger
	// Committer is non-nil only when the connector runs with offset_commit = "sink_controlled".
	Committer Committer
	// OnFailure is the connector's on_failure policy, so a sink that returns
	// [RejectedMessages] knows whether it may record the rest of the batch as done past
	// the rejected messages (not under [FailureStop]: see [OnFailure.MayPassRejected]).
	OnFailure OnFailure
}

// OnFailure is a connector's on_failure policy: what the runtime does with messages that
// failed for good.
type OnFailure string

// The policies.
const (
	FailureStop       OnFailure = "stop"        // stop the connector before anything past them is committed
	FailureSkip       OnFailure = "skip"        // count them and go on
	FailureDeadLetter OnFailure = "dead_letter" // send them to the dead-letter topic and go on
)

// MayPassRejected reports whether a sink may record the messages after a rejected one as
// done: under stop it must not (the runtime stops before the rejected message, and
// everything after it is delivered again).
func (f OnFailure) MayPassRejected() bool { return f != FailureStop && f != "" }

// PartitionSeeker is implemented by a sink that keeps its own positions in its target
// (exactly-once: the rows and the offsets written in one transaction), as Kafka Connect's
// SinkTaskContext.offset. The runtime calls Assigned when partitions of topic are assigned
// to the sink (at start and on every rebalance), on the topic's poll goroutine, before any
// message of them is delivered. It returns, for each partition it knows, the offset of the
// next message to deliver; a partition it leaves out resumes from the group's offset
// stored in Iggy. An error is retried with the connector's backoff until it succeeds or
// the sink stops: nothing of those partitions is delivered meanwhile.
type PartitionSeeker interface {
	Assigned(ctx context.Context, topic TopicMetadata, partitions []Partition) (map[Partition]uint64, error)
}

// PositionKeeper is a PartitionSeeker that says, after Open, whether it keeps its
// positions as configured (a sink may keep them in one mode and not another).
// KeepsPositions true means: every partition it has written resumes where its target
// says, so the group's offset stored in Iggy only shows progress (lag, Iggy's tools). The
// runtime then stores that offset less often: unless the connector file sets
// commit.delay, a done offset waits 100 ms instead of 10 ms (each store costs the server
// a synced write; a stop or a rebalance still stores at once).
type PositionKeeper interface {
	PartitionSeeker
	KeepsPositions() bool
}

// PositionReader is a PositionKeeper that can say, without changing anything, where its
// target says each partition resumes: the runtime shows it beside Iggy's stored offset
// (GET /sinks/{key}/offsets, ferry offsets --sink) and computes the lag from the one the
// sink resumes from. HeldPositions returns, for each partition whose position the target
// holds, the offset of the next message to deliver, and leaves the others out (they
// resume from Iggy's stored offset). The runtime calls it after Open, from any goroutine,
// concurrently with Consume; while the sink is stopped, on an instance it opens only for
// this (its Committer refuses every commit) and closes again. It must not write.
type PositionReader interface {
	PositionKeeper
	HeldPositions(ctx context.Context, topic TopicMetadata, partitions []Partition) (map[Partition]uint64, error)
}

// PositionChange is one partition's new position in the target ([PositionRewinder]).
type PositionChange struct {
	Topic     TopicMetadata
	Partition Partition
	// Next is the offset of the next message to deliver.
	Next uint64
}

// PositionRewinder is a PositionReader that can set the positions its target holds: PUT
// /sinks/{key}/offsets on a stopped sink calls RewindPositions on an instance opened for
// it, then stores the same offsets in Iggy. It applies every change or none (one
// transaction); what the target holds past a new position stays there (a replay writes it
// again). A sink that keeps its positions and is not a PositionRewinder has such a PUT
// refused with 409 and, when it is a [RewindRefuser], its reason: the runtime never
// answers success for a change the sink would not resume from.
type PositionRewinder interface {
	PositionReader
	RewindPositions(ctx context.Context, changes []PositionChange) error
}

// RewindRefuser is implemented by a sink for which a change of its offsets by the operator
// would not do what it says: a PositionKeeper that cannot set the positions its target
// holds (they are what it wrote: objects, records), or a sink whose target drops a replay
// as written already (ids derived from the offsets). RewindRefusal, asked after Open,
// says why and what to do instead, in a sentence or two for the operator; "" when the sink
// as configured takes the change (a PositionRewinder, or a target that writes a replay).
// The runtime then answers the change with 409 and that reason, changing nothing.
type RewindRefuser interface {
	RewindRefusal() string
}

// Position is where a partition resumes, as a sink that keeps its positions in its target
// knows it ([RewindSeeker]).
type Position struct {
	// Next is the offset of the next message to deliver.
	Next uint64
	// Timestamp is the server timestamp ([ConsumedMessage].Timestamp) of the message at
	// Next−1 as the sink wrote it, or 0 when the target does not hold it (written before
	// the sink kept it): then the position is taken as it is. With it the runtime's first
	// poll of the partition starts at Next−1 and checks that this message is still there;
	// a partition purged while the sink was away is found rewound ([RewindSeeker.Rewound])
	// instead of resumed past the messages that took the purged ones' offsets.
	Timestamp uint64
}

// RewindSeeker is a PartitionSeeker whose positions the runtime can check and which it
// tells when a partition went back to an earlier offset. A partition goes back when its
// messages are deleted (Iggy's PurgeTopic and PurgeStream reset every partition of the
// topic or stream to offset 0): new messages then take the offsets of purged ones, and a
// sink that drops what is at or below the position it holds would skip them.
type RewindSeeker interface {
	PartitionSeeker
	// Positions is Assigned with the timestamp of each partition's last message written;
	// the runtime calls it instead of Assigned, with the same contract.
	Positions(ctx context.Context, topic TopicMetadata, partitions []Partition) (map[Partition]Position, error)
	// Rewound tells the sink that partitions were found gone back to offset 0: what its
	// target holds of them describes messages that are gone. It forgets the positions it
	// holds of them, so that the next messages, from offset 0, are written and not dropped
	// as written already (what it does with what it wrote of the purged messages is the
	// sink's to document). The runtime calls it on the topic's poll goroutine, once no
	// batch of the partitions' earlier assignment is in Consume any more and before any
	// new message of them is delivered; an error is retried with the connector's backoff
	// until it succeeds or the sink stops.
	Rewound(ctx context.Context, topic TopicMetadata, partitions []Partition) error
}

// ConcurrentSink is implemented by a sink whose Consume may be called concurrently for
// different partitions of one topic (each partition's batches still come one at a time,
// in order). MaxInFlight, asked after Open, says how many such calls it accepts at once
// (≥ 1). The connector file's max_in_flight chooses how many the runtime makes, at most
// this; a file that leaves it unset gets the runtime's default (a few, from the CPUs), so
// implementing this interface is the sink's statement that overlapping calls are safe. A
// sink without it gets one call per topic at a time, and a file that asks for more is
// refused at start.
type ConcurrentSink interface {
	MaxInFlight() int
}

// MaxConcurrentUnlimited is what a [ConcurrentSink] or a [PipelinedSource] with no limit of
// its own returns.
const MaxConcurrentUnlimited = 1 << 30

// maxDefaultInFlight bounds DefaultMaxInFlight: past a few batches in flight a sink's
// target, not the runtime, is what waits, and each batch in flight holds its memory.
const maxDefaultInFlight = 8

// DefaultMaxInFlight is how many batches the runtime keeps in flight at once for a
// [ConcurrentSink] or a [PipelinedSource] whose connector file leaves max_in_flight unset
// (at most what the connector accepts): twice the CPUs Go runs on, between 2 and 8. One
// batch at a time leaves a sink's target idle while the runtime polls and decodes the next;
// a second overlaps that, and with the benchmarks' targets (PostgreSQL's COPY, the CDC
// source's sends) the gain flattens at 3–4 batches on two CPUs.
func DefaultMaxInFlight() int { return min(max(2*runtime.GOMAXPROCS(0), 2), maxDefaultInFlight) }

// Sink writes consumed messages to a target.
//
// The runtime calls Open once, then Consume for each batch, then Close once. Consume may be
// called concurrently for different topics of the same sink (one caller per stream/topic, as
// Iggy's runtime does); calls for one topic are sequential. A batch never mixes partitions.
type Sink interface {
	// Open prepares the sink. ctx bounds only the opening.
	Open(ctx context.Context, env SinkEnv) error
	// Consume writes one batch. A nil return means the batch is handled: in after_consuming
	// mode the runtime then stores the batch's last offset. An error makes the runtime retry
	// the same batch with backoff and then apply the connector's on_failure policy; the
	// error can steer that: [Permanent] (no retry), [BackOff] (wait this long, uncounted),
	// [ErrNotConnected] (reconnect, uncounted; see [Reconnector]), [RejectedMessages]
	// (written except these). ctx is cancelled when the runtime stops the sink hard.
	Consume(ctx context.Context, topic TopicMetadata, meta MessagesMetadata, msgs []ConsumedMessage) error
	// Close flushes and releases the sink. It may still call the Committer. ctx bounds the
	// time Close may take.
	Close(ctx context.Context) error
}
