package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// ErrConnectorPanic is wrapped by the error of a connector call (a sink's Open, Consume or
// Close, a source's Open, Read, ack or Close) that panicked: the panic is recovered and
// handled like any other failure of that call (a Consume is retried, then on_failure).
var ErrConnectorPanic = errors.New("connector panicked")

// ErrAbandoned is returned for a batch that was in flight when the runtime stopped hard: it
// was not committed and will be redelivered.
var ErrAbandoned = errors.New("batch abandoned at stop")

// callSafely runs fn, turning a panic into an error wrapping ErrConnectorPanic. Every call
// into a connector goes through it.
func callSafely(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrConnectorPanic, r)
		}
	}()
	return fn()
}

// batchResult is what became of one batch.
type batchResult int

const (
	batchDelivered batchResult = iota // Consume returned nil
	batchResolved                     // retries ran out; dead-lettered or skipped
	batchStop                         // retries ran out; on_failure = stop
	batchAbandoned                    // the runtime stopped hard; nothing committed
)

func (r batchResult) String() string {
	return [...]string{"delivered", "resolved", "stop", "abandoned"}[r]
}

// batchProcessor delivers batches to a sink under the connector's two policies: it calls
// Consume with retries (steered by the sdk's errors), hands whatever fails for good to the
// failure policy, and says which offsets the runtime itself marks done as the commit
// policy says. It knows nothing about Iggy or the partition table: the topic consumer
// applies the settlement it returns.
type batchProcessor struct {
	sink     sdk.Sink
	commit   commitPolicy
	failure  *failurePolicy
	counters *Counters
	log      *slog.Logger
	wait     func(context.Context, time.Duration) bool // nil: sleep; tests see the waits
}

// settlement is what became of one polled batch: its result, the error that stops the sink
// (batchStop) or abandoned it (batchAbandoned), and the spans of offsets the runtime marks
// done itself (the rest is the sink's to commit, or the server's under after_polling).
type settlement struct {
	result  batchResult
	err     error
	resolve []span
}

// deliver delivers one polled batch, offsets all.first..all.last, of which msgs are the
// converted messages for the sink and poison the ones that failed decode or a transform
// (docs/architecture.md, "When messages fail"). Poison is handled first, each message alone:
// under stop the messages before the first of them are delivered and the sink stops;
// under skip and dead_letter they are skipped or dead-lettered (confirmed before anything
// else is delivered, so no commit can pass them unrecorded), then the rest is delivered.
// ctx is the hard-stop context.
func (p *batchProcessor) deliver(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, all span, msgs []sdk.ConsumedMessage, poison []poisoned) settlement {
	part := meta.Partition.PartitionID
	if len(poison) > 0 {
		for _, m := range poison {
			p.log.Warn("message failed "+m.stage, "partition", part, "offset", m.msg.Offset, "error", m.err)
		}
		switch v, err := p.failure.apply(ctx, poisonFailure(topic, part, poison)); v {
		case unsent:
			return settlement{result: batchAbandoned, err: err}
		case mustStop:
			// Deliver what comes before the first of them, resolve that, then stop.
			bad := poison[0].msg.Offset
			k := 0
			for k < len(msgs) && msgs[k].Offset < bad {
				k++
			}
			st := settlement{result: batchStop, err: fmt.Errorf("partition %d: stopping the sink (on_failure = stop): %w", part, err)}
			if k > 0 {
				res, perr := p.process(ctx, topic, meta, msgs[:k])
				switch {
				case res == batchAbandoned || res == batchStop:
					return settlement{result: res, err: perr}
				case p.commit.resolves(res):
					st.resolve = []span{{all.first, bad - 1}}
				}
			}
			return st
		}
	}
	res := batchResolved // nothing left for the sink: resolved like a skipped batch
	var err error
	if len(msgs) > 0 {
		res, err = p.process(ctx, topic, meta, msgs)
	}
	st := settlement{result: res, err: err}
	switch {
	case res == batchAbandoned || res == batchStop:
	case p.commit.resolves(res):
		st.resolve = []span{all}
	case res == batchDelivered && p.commit.sinkCommits:
		// The sink commits what it saw; the poisoned offsets are the runtime's to resolve
		// (they wait until everything before them is done).
		for _, m := range poison {
			st.resolve = append(st.resolve, span{m.msg.Offset, m.msg.Offset})
		}
	}
	return st
}

// process delivers one non-empty batch of one partition: Consume with retries, then the
// failure policy for a batch that failed for good or the messages the sink rejected.
// ctx is the hard-stop context: when it ends, waits are abandoned and the batch is not
// committed.
func (p *batchProcessor) process(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) (batchResult, error) {
	part := meta.Partition.PartitionID
	start := time.Now()
	defer p.counters.ConsumeTime.since(start)
	rej, err := p.consume(ctx, topic, meta, msgs)
	var f failure
	switch {
	case err == nil && rej == nil:
		p.counters.Delivered.Add(uint64(len(msgs)))
		return batchDelivered, nil
	case err == nil:
		// Written except the rejected messages: a rejection is final, never retried (a retry
		// would find the batch written and report success, losing them).
		var refused []sdk.ConsumedMessage
		for _, m := range msgs {
			if _, ok := slices.BinarySearch(rej.Offsets, m.Offset); ok {
				refused = append(refused, m)
			}
		}
		p.counters.Delivered.Add(uint64(len(msgs) - len(refused)))
		cause := rej.Err
		if cause == nil {
			cause = errors.New("rejected by the target")
		}
		f = sinkFailure("messages rejected by the target", stageConsume, cause, topic, part, refused)
		f.attrs = append(f.attrs, "offsets", rej.Offsets)
		cause = rej // under stop, the sink stops on the rejection itself
		f.cause = cause
	case ctx.Err() != nil:
		return batchAbandoned, fmt.Errorf("%w: %w", ErrAbandoned, err)
	default:
		p.counters.FailedBatches.Add(1)
		what := "batch failed after retries"
		if errors.Is(err, sdk.ErrPermanent) {
			what = "batch failed with a permanent error"
		}
		f = sinkFailure(what, stageConsume, err, topic, part, msgs)
	}
	switch v, ferr := p.failure.apply(ctx, f); v {
	case unsent:
		return batchAbandoned, ferr
	case mustStop:
		return batchStop, fmt.Errorf("partition %d offsets %d..%d: %w", part, msgs[0].Offset, msgs[len(msgs)-1].Offset, ferr)
	}
	return batchResolved, nil
}

// consume calls Consume until it succeeds, the sink rejects messages (returned, not
// retried), the error is sdk.Permanent, the connector's max_retries is exhausted, or ctx
// ends: the one retry loop, sdk.Retry, steered by the sink's errors (an sdk.BackOffError
// waits what it asks, sdk.ErrNotConnected reconnects through sdk.Reconnector; neither
// counts toward max_retries).
func (p *batchProcessor) consume(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) (*sdk.RejectedMessages, error) {
	r := p.failure.consume.Retry()
	r.What, r.Log, r.LogAttrs = "consume", p.log, []any{"partition", meta.Partition.PartitionID}
	r.Reconnector, r.Sleep = reconnectorOf(p.sink), p.sleep
	var rej *sdk.RejectedMessages
	err := r.Do(ctx, func(ctx context.Context, attempt int) error {
		if attempt > 1 {
			p.counters.Retries.Add(1)
		}
		err := callSafely(func() error { return p.sink.Consume(ctx, topic, meta, msgs) })
		if err == nil {
			return nil
		}
		if rej = rejectedOf(err); rej != nil {
			return nil //nolint:nilerr // written except these: never retried, a retry would find the batch written
		}
		if ctx.Err() == nil {
			p.counters.ConsumeErrors.Add(1)
		}
		return err
	})
	return rej, err
}

// sleep waits d or until ctx ends (a test hook replaces it to see the waits).
func (p *batchProcessor) sleep(ctx context.Context, d time.Duration) bool {
	if p.wait != nil {
		return p.wait(ctx, d)
	}
	return sleep(ctx, d)
}

// rejectedOf returns the sdk.RejectedMessages err carries, or nil.
func rejectedOf(err error) *sdk.RejectedMessages {
	var rej *sdk.RejectedMessages
	if errors.As(err, &rej) {
		return rej
	}
	return nil
}
