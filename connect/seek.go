package connect

import (
	"fmt"
	"slices"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// onChange is the topic consumer's assignment hook (consumerConfig.OnChange), on the poll
// goroutine inside Poll: the table applies the change, then a sink that keeps its own
// positions (sdk.PartitionSeeker) says where each newly assigned partition starts and the
// member consumer seeks there, before anything of those partitions is polled. The table's
// entry starts at the first offset polled, which is then the sought one, so its
// invariants hold as for any assignment (docs/architecture.md, "Seek on assignment").
func (tc *topicConsumer) onChange(ch assignmentChange) {
	if r := ch.replaced; r != nil {
		tc.s.counters.TopicsRecreated.Add(1)
		tc.log.Info("topic was deleted and created again; its partitions start afresh from the new topic's stored offsets (0 when none)",
			"old_topic_id", r.oldID, "old_created_at", r.oldCreatedAt, "new_topic_id", r.newID, "new_created_at", r.newCreatedAt,
			"revoked", ch.revoked, "assigned", ch.assigned)
	}
	tc.table.apply(ch)
	if len(ch.assigned) > 0 {
		tc.s.status.recovered(tc.name()) // the topic's assignment was read: it can be polled
	}
	assigned := ch.assigned
	seeker, ok := tc.s.sink.(sdk.PartitionSeeker)
	if !ok || len(assigned) == 0 {
		return
	}
	parts := make([]sdk.Partition, len(assigned))
	for i, id := range assigned {
		parts[i] = sdk.Partition{StreamID: tc.topic.StreamID, TopicID: tc.topic.TopicID, PartitionID: id}
	}
	ctx := tc.s.life.soft
	var next map[sdk.Partition]uint64
	err := retry(ctx, tc.s.retryBackoff(), func(int) error {
		return callSafely(func() (err error) {
			next, err = seeker.Assigned(ctx, tc.topic, parts)
			return err
		})
	}, func(attempt int, err error, wait time.Duration) {
		tc.log.Warn("sink could not say where its assigned partitions start; retrying", "partitions", assigned, "attempt", attempt, "backoff", wait, "error", err)
	})
	if err != nil {
		return // the soft stop: nothing more is polled or delivered
	}
	for _, p := range parts {
		if off, ok := next[p]; ok {
			tc.cons.Seek(p.PartitionID, off)
			tc.log.Info("partition starts where the sink says", "partition", p.PartitionID, "next_offset", off)
		}
	}
	for p := range next {
		if p.StreamID != tc.topic.StreamID || p.TopicID != tc.topic.TopicID || !slices.Contains(assigned, p.PartitionID) {
			tc.log.Warn("sink returned a start offset for a partition not assigned; ignored", "partition", fmt.Sprint(p))
		}
	}
}
