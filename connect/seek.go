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
//
// A rewound partition (purged: it went back to offset 0) is logged, counted and starts
// afresh at 0; a sink that keeps its positions is told (sdk.RewindSeeker.Rewound) once no
// batch of the old assignment is in Consume, and is not asked where it starts.
func (tc *topicConsumer) onChange(ch assignmentChange) {
	if r := ch.replaced; r != nil {
		tc.s.counters.TopicsRecreated.Add(1)
		tc.log.Info("topic was deleted and created again; its partitions start afresh from the new topic's stored offsets (0 when none)",
			"old_topic_id", r.oldID, "old_created_at", r.oldCreatedAt, "new_topic_id", r.newID, "new_created_at", r.newCreatedAt,
			"revoked", ch.revoked, "assigned", ch.assigned)
	}
	rewound := make([]uint32, 0, len(ch.rewound))
	for _, r := range ch.rewound {
		tc.s.counters.PartitionRewinds.Add(1)
		rewound = append(rewound, r.partition)
		tc.log.Warn("partition went back to an earlier offset (its messages were purged); it is delivered again from offset 0",
			"partition", r.partition, "position", r.position, "current_offset", r.current, "reason", r.reason)
	}
	busy := tc.table.apply(ch)
	if len(ch.assigned) > 0 {
		tc.s.status.recovered(tc.name()) // the topic's assignment was read: it can be polled
	}
	seeker, ok := tc.s.sink.(sdk.PartitionSeeker)
	if !ok || len(ch.assigned) == 0 {
		return
	}
	rs, checked := seeker.(sdk.RewindSeeker)
	if len(rewound) > 0 {
		if !checked {
			tc.log.Warn("the sink keeps its own positions but cannot be told that partitions went back; it may drop their new messages as written already",
				"partitions", rewound)
		} else if !tc.tellRewound(rs, rewound, busy) {
			return // the soft stop
		}
	}
	var assigned []uint32
	for _, id := range ch.assigned {
		if !slices.Contains(rewound, id) {
			assigned = append(assigned, id)
		}
	}
	if len(assigned) == 0 {
		return
	}
	parts := tc.partitions(assigned)
	ctx := tc.s.life.soft
	var next map[sdk.Partition]sdk.Position
	err := retry(ctx, tc.s.retryBackoff(), func(int) error {
		return callSafely(func() (err error) {
			if checked {
				next, err = rs.Positions(ctx, tc.topic, parts)
				return err
			}
			var offs map[sdk.Partition]uint64
			offs, err = seeker.Assigned(ctx, tc.topic, parts)
			next = make(map[sdk.Partition]sdk.Position, len(offs))
			for p, o := range offs {
				next[p] = sdk.Position{Next: o}
			}
			return err
		})
	}, func(attempt int, err error, wait time.Duration) {
		tc.log.Warn("sink could not say where its assigned partitions start; retrying", "partitions", assigned, "attempt", attempt, "backoff", wait, "error", err)
	})
	if err != nil {
		return // the soft stop: nothing more is polled or delivered
	}
	for _, p := range parts {
		if pos, ok := next[p]; ok {
			tc.cons.Seek(p.PartitionID, pos.Next, pos.Timestamp)
			tc.log.Info("partition starts where the sink says", "partition", p.PartitionID, "next_offset", pos.Next)
		}
	}
	for p := range next {
		if p.StreamID != tc.topic.StreamID || p.TopicID != tc.topic.TopicID || !slices.Contains(assigned, p.PartitionID) {
			tc.log.Warn("sink returned a start offset for a partition not assigned; ignored", "partition", fmt.Sprint(p))
		}
	}
}

// tellRewound waits until no batch of the rewound partitions' old assignments is in
// Consume (busy), then tells the sink, retried until it succeeds; false at the soft stop.
func (tc *topicConsumer) tellRewound(rs sdk.RewindSeeker, rewound []uint32, busy []<-chan struct{}) bool {
	ctx := tc.s.life.soft
	for _, c := range busy {
		select {
		case <-c:
		case <-ctx.Done():
			return false
		}
	}
	parts := tc.partitions(rewound)
	err := retry(ctx, tc.s.retryBackoff(), func(int) error {
		return callSafely(func() error { return rs.Rewound(ctx, tc.topic, parts) })
	}, func(attempt int, err error, wait time.Duration) {
		tc.log.Warn("sink could not forget the positions of partitions that went back; retrying", "partitions", rewound, "attempt", attempt, "backoff", wait, "error", err)
	})
	return err == nil
}

// partitions names partition ids of the consumer's topic.
func (tc *topicConsumer) partitions(ids []uint32) []sdk.Partition {
	parts := make([]sdk.Partition, len(ids))
	for i, id := range ids {
		parts[i] = sdk.Partition{StreamID: tc.topic.StreamID, TopicID: tc.topic.TopicID, PartitionID: id}
	}
	return parts
}
