package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/ferryio/ferry/connect/config"
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

// Dead-letter header keys (string keys). ferry-error and the stream/topic names are strings,
// ferry-source-partition a uint32 and ferry-source-offset a uint64 header value.
const (
	HeaderError           = "ferry-error"
	HeaderSourceStream    = "ferry-source-stream"
	HeaderSourceTopic     = "ferry-source-topic"
	HeaderSourcePartition = "ferry-source-partition"
	HeaderSourceOffset    = "ferry-source-offset"
	// HeaderStage names where a message was rejected: decode or transform (a sink's
	// poison message), consume (a batch the sink failed, or a message it rejected), encode,
	// transform or send (a source's).
	HeaderStage = "ferry-stage"
	// HeaderSource is the key of the source connector whose message was rejected.
	HeaderSource = "ferry-source"
)

// maxHeaderValue is Iggy's limit on one header value.
const maxHeaderValue = 255

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

// batchProcessor hands batches to a sink and applies retries and the failure policy. It
// knows nothing about offsets or Iggy: the topic consumer feeds it decoded batches and
// marks the offsets done as the commit policy says (commitPolicy.resolves).
type batchProcessor struct {
	sink     sdk.Sink
	policy   config.FailurePolicy
	backoff  Backoff  // Attempts = max_retries + 1
	dlq      producer // required for FailureDeadLetter
	counters *Counters
	log      *slog.Logger
}

// process delivers one non-empty batch of one partition. ctx is the hard-stop context:
// when it ends, waits are abandoned and the batch is not committed.
func (p *batchProcessor) process(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) (batchResult, error) {
	first, last := msgs[0].Offset, msgs[len(msgs)-1].Offset
	part := meta.Partition.PartitionID
	start := time.Now()
	defer p.counters.ConsumeTime.since(start)
	var rej *sdk.RejectedMessages
	err := retry(ctx, p.backoff, func(attempt int) error {
		if attempt > 1 {
			p.counters.Retries.Add(1)
		}
		err := callSafely(func() error { return p.sink.Consume(ctx, topic, meta, msgs) })
		if rej = rejectedOf(err); rej != nil {
			return nil //nolint:nilerr // final, not retried: the rest is written (rejected.go)
		}
		if err != nil && ctx.Err() == nil {
			p.counters.ConsumeErrors.Add(1)
		}
		return err
	}, func(attempt int, err error, wait time.Duration) {
		p.log.Warn("consume failed; retrying", "partition", part, "attempt", attempt, "of", p.backoff.Attempts, "backoff", wait, "error", err)
	})
	if err == nil && rej != nil {
		return p.rejected(ctx, topic, part, msgs, rej)
	}
	if err == nil {
		p.counters.Delivered.Add(uint64(len(msgs)))
		return batchDelivered, nil
	}
	if ctx.Err() != nil {
		return batchAbandoned, fmt.Errorf("%w: %w", ErrAbandoned, err)
	}
	p.counters.FailedBatches.Add(1)
	attrs := []any{"stream", topic.Stream, "topic", topic.Topic, "partition", part,
		"first_offset", first, "last_offset", last, "messages", len(msgs), "error", err}
	switch p.policy {
	case config.FailureSkip:
		p.counters.Skipped.Add(uint64(len(msgs)))
		p.log.Warn("batch failed after retries; skipped (on_failure = skip)", attrs...)
	case config.FailureDeadLetter:
		if derr := p.deadLetter(ctx, topic, part, msgs, err); derr != nil {
			return batchAbandoned, derr
		}
		p.counters.DeadLettered.Add(uint64(len(msgs)))
		p.log.Warn("batch failed after retries; sent to the dead-letter topic", attrs...)
	default:
		p.log.Error("batch failed after retries; stopping the sink (on_failure = stop)", attrs...)
		return batchStop, fmt.Errorf("partition %d offsets %d..%d: %w", part, first, last, err)
	}
	return batchResolved, nil
}

// deadLetter sends the batch to the dead-letter topic, retrying with backoff until Iggy
// confirms it or ctx ends (then the batch is abandoned, not committed).
func (p *batchProcessor) deadLetter(ctx context.Context, topic sdk.TopicMetadata, partition uint32, msgs []sdk.ConsumedMessage, cause error) error {
	return p.sendDeadLetters(ctx, deadLetterMessages(topic, partition, msgs, cause, stageConsume))
}

// sendDeadLetters sends out to the dead-letter topic as deadLetter does.
func (p *batchProcessor) sendDeadLetters(ctx context.Context, out []sdk.ProducedMessage) error {
	if p.dlq == nil {
		return errors.New("dead_letter: no dead-letter producer")
	}
	forever := Backoff{Initial: p.backoff.Initial, Max: p.backoff.Max}
	err := retry(ctx, forever, func(int) error { return p.dlq.send(ctx, out) }, func(attempt int, err error, wait time.Duration) {
		p.log.Warn("dead-letter send failed; retrying", "attempt", attempt, "backoff", wait, "error", err)
	})
	if err != nil {
		return fmt.Errorf("%w: dead-letter send: %w", ErrAbandoned, err)
	}
	return nil
}

// deadLetterMessages copies a failed batch into messages for the dead-letter topic: the
// payload and user headers, plus the ferry-* headers (which replace same-named originals).
// The message id is left zero so Iggy assigns a new one.
func deadLetterMessages(topic sdk.TopicMetadata, partition uint32, msgs []sdk.ConsumedMessage, cause error, stage string) []sdk.ProducedMessage {
	errText := truncateUTF8(cause.Error(), maxHeaderValue)
	if errText == "" {
		errText = "unknown error"
	}
	fixed := []sdk.Header{
		{Key: sdk.String(HeaderError), Value: sdk.String(errText)},
		{Key: sdk.String(HeaderSourceStream), Value: sdk.String(topic.Stream)},
		{Key: sdk.String(HeaderSourceTopic), Value: sdk.String(topic.Topic)},
		{Key: sdk.String(HeaderSourcePartition), Value: uint32Field(partition)},
		{Key: sdk.String(HeaderStage), Value: sdk.String(stage)},
	}
	out := make([]sdk.ProducedMessage, len(msgs))
	for i, m := range msgs {
		hs := make([]sdk.Header, 0, len(m.Headers)+len(fixed)+1)
		for _, h := range m.Headers {
			if h.Key.Kind == sdk.HeaderString && isFerryHeader(string(h.Key.Value)) {
				continue
			}
			hs = append(hs, sdk.Header{Key: cloneField(h.Key), Value: cloneField(h.Value)})
		}
		hs = append(hs, fixed...)
		hs = append(hs, sdk.Header{Key: sdk.String(HeaderSourceOffset), Value: sdk.Uint64(m.Offset)})
		out[i] = sdk.ProducedMessage{Headers: hs, Payload: append([]byte(nil), m.Payload...)}
	}
	return out
}

func isFerryHeader(k string) bool {
	switch k {
	case HeaderError, HeaderSourceStream, HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset, HeaderStage:
		return true
	}
	return false
}

func uint32Field(v uint32) sdk.HeaderField {
	return sdk.HeaderField{Kind: sdk.HeaderUint32, Value: []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}}
}

func cloneField(f sdk.HeaderField) sdk.HeaderField {
	return sdk.HeaderField{Kind: f.Kind, Value: append([]byte(nil), f.Value...)}
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
