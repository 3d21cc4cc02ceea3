package sdk

import (
	"context"
	"fmt"
)

// Exactly once into Iggy, the source's half. A source that reads an ordered origin (a
// Kafka partition, a replication slot, a remote Iggy partition, a Redis stream) carries
// each message's origin position in its headers, acknowledges the origin only after Iggy
// acknowledged the batch (its AckFunc), and after a crash skips what Iggy already holds:
// the batches appended whose acknowledgement never reached the origin. [ReadBack] reads
// that back at Open; [Origins.Holds] answers per message.

// Origin is one origin position found in a message read back: the lane it belongs to
// (one ordered sequence of the origin: "orders/3" for a Kafka topic's partition 3; "" when
// the origin has one) and its position in the lane.
type Origin[P any] struct {
	Lane string
	Pos  P
}

// Origins is what Iggy holds of a source's origin lanes: per partition of the source's
// topic and lane, the newest position appended. Read-only after ReadBack; safe for
// concurrent use.
type Origins[P any] struct {
	less        func(a, b P) bool
	newest      map[originKey]P
	partitionOf func(key []byte) int
	partitions  int
	read        bool
}

type originKey struct {
	partition int // index in the tail, as Tail.PartitionOf numbers partitions
	lane      string
}

// ReadBack reads the last window messages of each partition of the source's topic
// (env.TailN; at least the last message: env.Tail when TailN is nil or window ≤ 1) and
// keeps, per partition and lane, the newest origin position that parse finds in their
// headers (ok false: the message carries none, e.g. another writer's). less orders
// positions of one lane. window must cover the messages a crash can leave appended but
// unacknowledged at the origin, per partition: with one lane per partition 1 is enough;
// with several lanes sharing a partition, the source's batch size times its batches in
// flight. Without a tail reader (env.Tail nil: the runtime cannot read the topic) the
// result holds nothing.
func ReadBack[P any](ctx context.Context, env SourceEnv, window int, parse func(SentMessage) (Origin[P], bool), less func(a, b P) bool) (*Origins[P], error) {
	o := &Origins[P]{less: less, newest: map[originKey]P{}}
	var tail Tail
	var err error
	switch {
	case env.TailN != nil && window > 1:
		tail, err = env.TailN(ctx, window)
	case env.Tail != nil:
		tail, err = env.Tail(ctx)
	default:
		return o, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read back the topic's last messages: %w", err)
	}
	o.read, o.partitionOf = true, tail.PartitionOf
	o.partitions = len(tail.Last)
	for i := range tail.Last {
		msgs := []*SentMessage{tail.Last[i]}
		if i < len(tail.Recent) && len(tail.Recent[i]) > 0 {
			msgs = tail.Recent[i]
		}
		for _, m := range msgs {
			if m == nil {
				continue
			}
			org, ok := parse(*m)
			if !ok {
				continue
			}
			k := originKey{i, org.Lane}
			if cur, have := o.newest[k]; !have || less(cur, org.Pos) {
				o.newest[k] = org.Pos
			}
		}
	}
	return o, nil
}

// Holds reports whether partition (its index, as Tail numbers them) already holds the
// message at pos of lane: a position at or below the newest one read back there. A
// partition index < 0 asks every partition (only right when a lane's messages all go to
// one partition, whichever it is).
func (o *Origins[P]) Holds(partition int, lane string, pos P) bool {
	if partition >= 0 {
		cur, ok := o.newest[originKey{partition, lane}]
		return ok && !o.less(cur, pos)
	}
	for k, cur := range o.newest {
		if k.lane == lane && !o.less(cur, pos) {
			return true
		}
	}
	return false
}

// HoldsKeyed is Holds for a message sent with partition key key (the runtime's
// partitioning by key decides the partition). False for an empty key.
func (o *Origins[P]) HoldsKeyed(key []byte, lane string, pos P) bool {
	if len(key) == 0 || o.partitionOf == nil {
		return false
	}
	return o.Holds(o.partitionOf(key), lane, pos)
}

// Partitions returns how many partitions the topic had when it was read back (0 when it
// was not read).
func (o *Origins[P]) Partitions() int { return o.partitions }

// Newest returns the newest position of lane over every partition.
func (o *Origins[P]) Newest(lane string) (P, bool) {
	var best P
	found := false
	for k, cur := range o.newest {
		if k.lane == lane && (!found || o.less(best, cur)) {
			best, found = cur, true
		}
	}
	return best, found
}

// Lanes returns every lane found, with its newest position over every partition.
func (o *Origins[P]) Lanes() map[string]P {
	out := map[string]P{}
	for k := range o.newest {
		if _, done := out[k.lane]; !done {
			out[k.lane], _ = o.Newest(k.lane)
		}
	}
	return out
}

// Read reports whether the topic was read back at all (false: env had no tail reader).
func (o *Origins[P]) Read() bool { return o.read }
