package connect

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// rejectedOf returns the sdk.RejectedMessages err carries, or nil. A rejection is final:
// the sink wrote the rest of the batch, so the batch is not retried (a retry would find
// it written and report success, losing the rejected messages).
func rejectedOf(err error) *sdk.RejectedMessages {
	var rej *sdk.RejectedMessages
	if errors.As(err, &rej) {
		return rej
	}
	return nil
}

// rejected applies on_failure to exactly the messages the sink rejected (the rest of the
// batch is written): dead_letter sends them alone to the dead-letter topic with
// ferry-stage = consume, skip counts them, stop stops the sink (the sink must not have
// recorded anything past the first of them: sdk.RejectedMessages).
func (p *batchProcessor) rejected(ctx context.Context, topic sdk.TopicMetadata, part uint32, msgs []sdk.ConsumedMessage, rej *sdk.RejectedMessages) (batchResult, error) {
	var refused []sdk.ConsumedMessage
	for _, m := range msgs {
		if _, ok := slices.BinarySearch(rej.Offsets, m.Offset); ok {
			refused = append(refused, m)
		}
	}
	cause := rej.Err
	if cause == nil {
		cause = errors.New("rejected by the target")
	}
	p.counters.Delivered.Add(uint64(len(msgs) - len(refused)))
	attrs := []any{"stream", topic.Stream, "topic", topic.Topic, "partition", part, "offsets", rej.Offsets, "error", cause}
	switch p.policy {
	case config.FailureSkip:
		p.counters.Skipped.Add(uint64(len(refused)))
		p.log.Warn("messages rejected by the target; skipped (on_failure = skip)", attrs...)
	case config.FailureDeadLetter:
		if err := p.sendDeadLetters(ctx, deadLetterMessages(topic, part, refused, cause, stageConsume)); err != nil {
			return batchAbandoned, err
		}
		p.counters.DeadLettered.Add(uint64(len(refused)))
		p.log.Warn("messages rejected by the target; sent to the dead-letter topic", attrs...)
	default:
		p.log.Error("messages rejected by the target; stopping the sink (on_failure = stop)", attrs...)
		return batchStop, fmt.Errorf("partition %d: %w", part, rej)
	}
	return batchResolved, nil
}
