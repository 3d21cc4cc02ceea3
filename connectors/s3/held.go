package s3

import (
	"context"
	"fmt"

	"github.com/ferryio/ferry/sdk"
)

var (
	_ sdk.PositionReader = (*Sink)(nil)
	_ sdk.RewindRefuser  = (*Sink)(nil)
)

// HeldPositions implements sdk.PositionReader: each partition with an object resumes after
// the highest one of its highest generation, as at an assignment, but only listed: nothing
// is dropped, aborted or removed. A partition whose new generation (begun at a purge) has
// no object yet holds none.
func (s *Sink) HeldPositions(ctx context.Context, topic sdk.TopicMetadata, parts []sdk.Partition) (map[sdk.Partition]uint64, error) {
	out := map[sdk.Partition]uint64{}
	for _, p := range parts {
		f := newFinder(s.cfg.Prefix, s.tpl, keyCtx{stream: topic.Stream, topic: topic.Topic, partition: p.PartitionID})
		var next, gen uint64
		found := false
		err := s.st.list(ctx, f.listPrefix, func(key string) {
			if _, last, g, ok := f.object(key); ok && (!found || g > gen || g == gen && last+1 > next) {
				next, gen, found = last+1, g, true
			}
		})
		if err != nil {
			return nil, fmt.Errorf("s3 sink: list partition %d of %s/%s: %w", p.PartitionID, topic.Stream, topic.Topic, err)
		}
		s.mu.Lock()
		ps := s.parts[p]
		s.mu.Unlock()
		if found && (ps == nil || ps.gen <= gen) {
			out[p] = next
		}
	}
	return out, nil
}

// RewindRefusal implements sdk.RewindRefuser: the bucket's objects are the positions.
func (s *Sink) RewindRefusal() string {
	return fmt.Sprintf("the S3 sink resumes after the highest object of each partition in s3://%s/%s, and objects already written are not removed by Ferry; "+
		"to write a partition again, delete its objects above the offset (or give the sink a new prefix or bucket), then restart it", s.cfg.Bucket, s.cfg.Prefix)
}
