package sdk

import (
	"context"
	"errors"
	"log/slog"
)

// ErrEndOfInput is returned by [Source.Read] when the source has nothing more to produce,
// ever. The runtime then closes the source cleanly.
var ErrEndOfInput = errors.New("end of input")

// SourceEnv is what the runtime hands a source when it opens it.
type SourceEnv struct {
	// Key is the connector's key from its config file.
	Key string
	// Config is the connector's plugin_config, as compact JSON ("null" when absent).
	Config []byte
	// State is the state saved with the last batch Iggy confirmed, or nil on a first start.
	State  []byte
	Logger *slog.Logger
	// Tail reads what the source's topic holds at the end of each partition (see [Tail]).
	// A source that must not send a message twice across a crash calls it in Open: the
	// messages sent just before the crash may be in Iggy although their state was never
	// saved. It may be called again at any time until Close (a source whose origin hands
	// it lanes while it runs, a Kafka group's rebalance, reads back on each assignment);
	// it reads what Iggy confirmed so far. ctx bounds the reads. nil when the runtime
	// cannot read its topic.
	Tail func(ctx context.Context) (Tail, error)
	// TailN is Tail reading the last n messages of each partition (Tail.Recent), for a
	// source whose origin lanes share partitions (see [ReadBack]). nil when Tail is.
	TailN func(ctx context.Context, n int) (Tail, error)
}

// Tail is the last message of each partition of a source's topic, read back from Iggy.
type Tail struct {
	// Last holds one entry per partition, in the order PartitionOf numbers them: the
	// partition's last message, or nil when the partition is empty.
	Last []*SentMessage
	// Recent holds, from TailN only, the last messages of each partition, oldest first
	// (the last of them is Last's).
	Recent [][]*SentMessage
	// PartitionOf returns the index in Last of the partition a message with this
	// [ProducedMessage.PartitionKey] goes to (keys of length 0 are not valid here).
	PartitionOf func(key []byte) int
}

// SentMessage is a message read back from the source's topic. Its slices are the
// caller's to keep.
type SentMessage struct {
	Partition uint32 // the partition's id in Iggy
	Offset    uint64
	ID        MessageID
	Headers   []Header
}

// UniqueIDs is implemented by a source whose message ids are unique and deterministic:
// the same change always carries the same id. The runtime then never appends one of its
// messages twice within a run: before it retries a send whose outcome is unknown it reads
// the last message of each partition back and drops, per partition, the messages up to
// the one already stored.
type UniqueIDs interface {
	UniqueIDs() bool
}

// SourceBatch is what a source produces in one Read.
type SourceBatch struct {
	Schema   Schema
	Messages []ProducedMessage
	// State is the source's cursor after this batch. The runtime saves it, atomically, only
	// after Iggy confirmed the send; after a crash the source reopens with it. nil keeps the
	// previous state.
	State []byte
}

// AckFunc tells a source what became of a batch. err == nil: Iggy confirmed every message
// and the batch's state was saved. err != nil: the batch was not delivered (the runtime gave
// up or is stopping); the source may produce it again. The runtime calls it exactly once per
// batch, before the next Read (a [PipelinedSource]: in the order the batches were read, each
// only after every earlier batch's). ctx bounds the call.
type AckFunc func(ctx context.Context, err error) error

// NoAck is an AckFunc for sources that need no acknowledgement.
func NoAck(context.Context, error) error { return nil }

// Source reads from an external system and produces messages for Iggy.
//
// The runtime calls Open, then Read repeatedly: it does not call Read again until the
// previous batch was sent to Iggy, its state saved and its AckFunc called (one batch in
// flight; a [PipelinedSource] may be asked for more), then Close.
type Source interface {
	// Open prepares the source. ctx bounds only the opening.
	Open(ctx context.Context, env SourceEnv) error
	// Read blocks until a batch is ready or ctx ends. It returns ErrEndOfInput when done.
	// A batch with no messages is allowed (it only moves the state). The AckFunc must be
	// non-nil (use NoAck).
	Read(ctx context.Context) (SourceBatch, AckFunc, error)
	// Close releases the source. ctx bounds the time Close may take.
	Close(ctx context.Context) error
}

// CheckedPayloads is implemented by a source that guarantees each payload it produces is
// valid in the schema its batch names (JSON that parses, text that is UTF-8): the runtime
// then sends such payloads to a stream of that schema without checking them again (it still
// decodes them for transforms or a conversion to another schema). Asked after Open; false
// keeps the check.
type CheckedPayloads interface {
	CheckedPayloads() bool
}

// PipelinedSource is implemented by a source whose Read may be called again while batches
// it returned earlier are not acknowledged yet. MaxUnacked, asked after Open, is how many
// such batches it accepts at once (at least 1); the connector file's max_in_flight (unset:
// the runtime's default, a few from the CPUs) chooses how many the runtime keeps, at most
// that. Ordering still holds:
//
//   - the runtime sends the batches to Iggy in the order they were read (one partition's
//     messages never overtake an earlier batch's);
//   - it saves the state and calls the AckFunc strictly in read order, a batch only after
//     it and every earlier batch were appended;
//   - when a batch is not delivered (a failed send, the stop) it sends nothing read after
//     it and nacks every later batch it holds, so nothing after the gap is acknowledged.
//     The source must then produce the nacked batches again or stop (a restart resumes
//     from the last saved state).
//
// The AckFuncs are called one at a time, but possibly while Read runs on another
// goroutine; Close is called after the last of them returned.
type PipelinedSource interface {
	MaxUnacked() int
}

// MessageDescriber is implemented by a source that can say where one of its messages came
// from (the PostgreSQL CDC source: the table and the change's position): the runtime puts
// it in its log lines and the dead-letter error of a message it could not send (a payload
// over Iggy's limit, a failed transform). The description must not hold the message's data,
// which is never logged; keep it short. Called on the goroutine that calls Read, after
// Open; "" names nothing.
type MessageDescriber interface {
	DescribeMessage(m *ProducedMessage) string
}

// Preflighter is implemented by a connector that can verify, before it runs, that the
// system it reads or writes is set up for it (`ferry check --connect`): settings, rights,
// objects. Each returned error names one problem and, where it can, the statement that
// fixes it. config is the connector's plugin_config as compact JSON; ctx bounds the whole
// check. Nothing is created or changed.
type Preflighter interface {
	Preflight(ctx context.Context, config []byte) []error
}

// Gauge is one figure a connector reports about the system it reads or writes (a
// replication slot's lag, the last position sent), for the status API and the metrics.
type Gauge struct {
	Name  string // lower_snake_case, unique within the connector
	Help  string
	Value uint64
}

// Gauger is implemented by a connector with figures of its own: status shows them and the
// metrics expose each as ferry_connector_gauge{name="…"}. Gauges is called from any
// goroutine, concurrently with the connector's other methods, also before Open and after
// Close (then it may return nil).
type Gauger interface {
	Gauges() []Gauge
}
