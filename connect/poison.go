package connect

import (
	"context"
	"fmt"

	"github.com/ferryio/ferry/connect/config"
	"github.com/ferryio/ferry/sdk"
)

// deliverPoisoned delivers a batch in which some messages failed decode or a transform
// (poison; docs/architecture.md, "The life of one message"). The sink never sees them,
// and the connector's on_failure decides for each of them alone:
//
//   - stop: the messages before the first poisoned one are delivered (and resolved as the
//     commit policy says), then the sink stops; nothing at or past it is resolved, so the
//     stored offset stays at the one before it;
//   - dead_letter: the poisoned messages, as polled, go to the dead-letter topic with
//     ferry-error, ferry-stage (decode or transform) and the source headers, confirmed
//     before anything is committed; then as skip;
//   - skip: counted in Skipped; the rest of the batch is delivered, and the poisoned
//     offsets are resolved with it (sink_controlled: by the runtime, since the sink never
//     saw them). A batch left empty is resolved at once in every mode that stores.
func (tc *topicConsumer) deliverPoisoned(ctx context.Context, b polledBatch, meta sdk.MessagesMetadata, msgs []sdk.ConsumedMessage, poison []poisoned) {
	first, last := b.Messages[0].Offset, b.Messages[len(b.Messages)-1].Offset
	proc, c := tc.s.proc, tc.s.counters
	for _, m := range poison {
		tc.log.Warn("message failed "+m.stage+"; on_failure = "+string(proc.policy), "partition", b.Partition, "offset", m.msg.Offset, "error", m.err)
	}
	if proc.policy != config.FailureSkip && proc.policy != config.FailureDeadLetter {
		bad := poison[0].msg.Offset
		k := 0
		for k < len(msgs) && msgs[k].Offset < bad {
			k++
		}
		if k > 0 {
			res, err := proc.process(ctx, tc.topic, meta, msgs[:k])
			if !tc.settle(b, res, first, bad-1) {
				if res == batchStop {
					tc.s.fail(err)
				}
				return
			}
		}
		tc.s.fail(fmt.Errorf("partition %d: stopping the sink (on_failure = stop): %w", b.Partition, poison[0].cause()))
		return
	}
	if proc.policy == config.FailureDeadLetter {
		out := make([]sdk.ProducedMessage, 0, len(poison))
		for _, m := range poison {
			out = append(out, poisonDeadLetter(tc.topic, b.Partition, m))
		}
		if err := proc.sendDeadLetters(ctx, out); err != nil {
			tc.abandoned.Store(true)
			tc.log.Warn("poison messages not dead-lettered; batch abandoned", "partition", b.Partition, "error", err)
			return
		}
		c.DeadLettered.Add(uint64(len(poison)))
	} else {
		c.Skipped.Add(uint64(len(poison)))
	}
	res := batchResolved // nothing left for the sink: resolved like a skipped batch
	var err error
	if len(msgs) > 0 {
		res, err = proc.process(ctx, tc.topic, meta, msgs)
	}
	if !tc.settle(b, res, first, last) {
		if res == batchStop {
			tc.s.fail(err)
		}
		return
	}
	if res == batchDelivered && !tc.s.policy.resolveOnSuccess && !tc.s.policy.serverStores {
		// sink_controlled: the sink commits what it saw; the poisoned offsets are the
		// runtime's to resolve (they wait until everything before them is done).
		for _, m := range poison {
			tc.table.resolve(b.part, m.msg.Offset, m.msg.Offset)
		}
	}
}

// settle records what became of (part of) a batch, first..last: abandoned, resolved as
// the commit policy says. It reports whether the batch may go on (not abandoned, not
// stopped).
func (tc *topicConsumer) settle(b polledBatch, res batchResult, first, last uint64) bool {
	switch res {
	case batchAbandoned:
		tc.abandoned.Store(true)
		return false
	case batchStop:
		return false
	}
	if tc.s.policy.resolves(res) {
		tc.table.resolve(b.part, first, last)
	}
	return true
}

// poisonDeadLetter is the dead letter of one poisoned message: its payload and headers as
// polled, the source headers, ferry-error and ferry-stage.
func poisonDeadLetter(topic sdk.TopicMetadata, partition uint32, m poisoned) sdk.ProducedMessage {
	return deadLetterMessages(topic, partition, []sdk.ConsumedMessage{m.msg}, m.cause(), m.stage)[0]
}
