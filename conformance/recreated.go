package conformance

import (
	"context"
	"fmt"

	"github.com/ferryio/ferry/iggy"
)

// runTopicRecreated: the sink catches up on its topic (every message recorded and
// stored), the topic is deleted and created again under the same name (Iggy gives it the
// old id and a new creation time, and deletes its consumer groups and stored offsets), and
// more messages than before are produced to the new one. Every message of the new topic
// must be delivered once: a runtime that goes on from its old position skips the new
// topic's first messages. Only what is recorded after the old topic was complete is
// judged, against what the new topic holds (payloads name the topic's generation).
func runTopicRecreated(ctx context.Context, r *Runner, mode string) Result {
	const before, after = 500, 800
	expected := fmt.Sprintf("%d messages stored, the topic deleted and created again, %d produced to the new one: delivered %d of the new topic, lost 0, duplicated 0",
		before, after, after)
	f, p, err := r.begin(ctx, "topic-recreated", mode, setup{partitions: 1, conn: connector{batch: 50, maxRetries: -1}, after: before})
	if err != nil {
		return outcome(expected, err)
	}
	defer p.kill()
	if err := f.waitDone(ctx); err != nil {
		return broken(expected, err)
	}
	if err := f.wait(ctx, "every message of the old topic recorded", func() bool { return f.tally().lost == 0 }); err != nil {
		return broken(expected, err)
	}
	if err := r.admin.DeleteTopic(ctx, iggy.Name(f.stream), iggy.Name(f.topic)); err != nil {
		return broken(expected, fmt.Errorf("delete the topic: %w", err))
	}
	if err := r.admin.EnsureTopic(ctx, f.stream, f.topic, f.partitions); err != nil {
		return broken(expected, fmt.Errorf("create the topic again: %w", err))
	}
	f.from = len(f.events())
	clear(f.sent)
	clear(f.next)
	err = f.produce(ctx, after, func(p uint32, i int) ([]byte, bool) {
		return fmt.Appendf(nil, `{"scenario":%q,"topic":2,"p":%d,"n":%d}`, f.name, p, i), false
	})
	if err != nil {
		return broken(expected, err)
	}
	return f.finish(ctx, expected, func(t tally) (string, bool) {
		first := int64(-1)
		for _, e := range f.events()[f.from:] {
			if e.kind == 'M' {
				first = int64(e.off)
				break
			}
		}
		return fmt.Sprintf("%s; the new topic's delivery began at offset %d", t, first), t.lost == 0 && t.duplicated == 0 && t.clean()
	}, p)
}
