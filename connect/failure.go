package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// ErrSinkPanic is wrapped by the error of a Consume call that panicked; the panic is
// recovered and handled like any other failure (retry, then on_failure).
var ErrSinkPanic = errors.New("sink panicked")

// ErrAbandoned is returned for a batch that was in flight when the runtime stopped hard: it
// was not committed and will be redelivered.
var ErrAbandoned = errors.New("batch abandoned at stop")

// Dead-letter header keys (string keys). ferry-error and the stream/topic names are strings,
// ferry-source-partition a uint32 and ferry-source-offset a uint64 header value.
const (
	HeaderError           = "ferry-error"
	HeaderSourceStream    = "ferry-source-stream"
	HeaderSourceTopic     = "ferry-source-topic"
	HeaderSourcePartition = "ferry-source-partition"
	HeaderSourceOffset    = "ferry-source-offset"
)

// maxHeaderValue is Iggy's limit on one header value.
const maxHeaderValue = 255

// deadLetterSender sends a failed batch, with its dead-letter headers already attached, and
// returns once Iggy confirmed every message.
type deadLetterSender interface {
	sendDeadLetters(ctx context.Context, msgs []sdk.ProducedMessage) error
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

// batchProcessor hands batches to a sink and applies retries and the failure policy. It
// knows nothing about Iggy: the topic consumer feeds it decoded batches.
type batchProcessor struct {
	sink     sdk.Sink
	mode     config.CommitMode
	policy   config.FailurePolicy
	backoff  Backoff
	dlq      deadLetterSender // required for FailureDeadLetter
	counters *Counters
	log      *slog.Logger
}

// process delivers one non-empty batch of one partition. t is the partition's tracker (the
// batch's offsets are registered as delivered before Consume). ctx is the hard-stop context:
// when it ends, waits are abandoned and the batch is not committed.
func (p *batchProcessor) process(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage, t *tracker) (batchResult, error) {
	first, last := msgs[0].Offset, msgs[len(msgs)-1].Offset
	t.deliveredBatch(last)
	err := p.consumeWithRetry(ctx, topic, meta, msgs)
	if err == nil {
		p.counters.Delivered.Add(uint64(len(msgs)))
		if p.mode == config.CommitAfterConsuming {
			t.resolve(first, last)
		}
		return batchDelivered, nil
	}
	if errors.Is(err, ErrAbandoned) {
		return batchAbandoned, err
	}
	p.counters.FailedBatches.Add(1)
	attrs := []any{"stream", topic.Stream, "topic", topic.Topic, "partition", meta.Partition.PartitionID,
		"first_offset", first, "last_offset", last, "messages", len(msgs), "error", err}
	switch p.policy {
	case config.FailureSkip:
		p.counters.Skipped.Add(uint64(len(msgs)))
		p.log.Warn("batch failed after retries; skipped (on_failure = skip)", attrs...)
	case config.FailureDeadLetter:
		if derr := p.deadLetter(ctx, topic, meta, msgs, err); derr != nil {
			return batchAbandoned, derr
		}
		p.counters.DeadLettered.Add(uint64(len(msgs)))
		p.log.Warn("batch failed after retries; sent to the dead-letter topic", attrs...)
	default:
		p.log.Error("batch failed after retries; stopping the sink (on_failure = stop)", attrs...)
		return batchStop, fmt.Errorf("partition %d offsets %d..%d: %w", meta.Partition.PartitionID, first, last, err)
	}
	if p.mode != config.CommitAfterPolling {
		t.resolve(first, last)
	}
	return batchResolved, nil
}

// consumeWithRetry calls Consume until it returns nil, retries run out (the last error is
// returned), or ctx ends (ErrAbandoned).
func (p *batchProcessor) consumeWithRetry(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) error {
	for n := 0; ; n++ {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrAbandoned, ctx.Err())
		}
		err := safeConsume(ctx, p.sink, topic, meta, msgs)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: consume: %w", ErrAbandoned, err)
		}
		p.counters.ConsumeErrors.Add(1)
		if uint32(n) >= p.backoff.MaxRetries {
			return err
		}
		d := p.backoff.Delay(n + 1)
		p.log.Warn("consume failed; retrying", "partition", meta.Partition.PartitionID, "retry", n+1, "of", p.backoff.MaxRetries, "backoff", d, "error", err)
		if !sleep(ctx, d) {
			return fmt.Errorf("%w: %w", ErrAbandoned, ctx.Err())
		}
	}
}

// safeConsume calls Consume, turning a panic into an error wrapping ErrSinkPanic.
func safeConsume(ctx context.Context, s sdk.Sink, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrSinkPanic, r)
		}
	}()
	return s.Consume(ctx, topic, meta, msgs)
}

// deadLetter sends the batch to the dead-letter topic, retrying with backoff until Iggy
// confirms it or ctx ends (then the batch is abandoned, not committed).
func (p *batchProcessor) deadLetter(ctx context.Context, topic sdk.TopicMetadata, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage, cause error) error {
	if p.dlq == nil {
		return errors.New("dead_letter: no dead-letter producer")
	}
	out := deadLetterMessages(topic, meta.Partition.PartitionID, msgs, cause)
	for n := 1; ; n++ {
		err := p.dlq.sendDeadLetters(ctx, out)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: dead-letter send: %w", ErrAbandoned, err)
		}
		d := p.backoff.Delay(n)
		p.log.Warn("dead-letter send failed; retrying", "attempt", n, "backoff", d, "error", err)
		if !sleep(ctx, d) {
			return fmt.Errorf("%w: dead-letter send: %w", ErrAbandoned, err)
		}
	}
}

// deadLetterMessages copies a failed batch into messages for the dead-letter topic: the
// payload and user headers, plus the ferry-* headers (which replace same-named originals).
// The message id is left zero so Iggy assigns a new one.
func deadLetterMessages(topic sdk.TopicMetadata, partition uint32, msgs []sdk.ConsumedMessage, cause error) []sdk.ProducedMessage {
	errText := truncateUTF8(cause.Error(), maxHeaderValue)
	if errText == "" {
		errText = "unknown error"
	}
	fixed := []sdk.Header{
		{Key: sdk.String(HeaderError), Value: sdk.String(errText)},
		{Key: sdk.String(HeaderSourceStream), Value: sdk.String(topic.Stream)},
		{Key: sdk.String(HeaderSourceTopic), Value: sdk.String(topic.Topic)},
		{Key: sdk.String(HeaderSourcePartition), Value: uint32Field(partition)},
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
	case HeaderError, HeaderSourceStream, HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset:
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
