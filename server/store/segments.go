package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Segments. A partition's offsets are split into segments as Iggy splits its
// log into segment files: a segment is open (the active one, always the last)
// until the batch that takes it to TopicConfig.SegmentSize bytes or more is
// appended; the next append opens a new segment at the next offset. Each
// segment's first and last offset, size and newest timestamp are kept in one
// record ('d' partition 'S' first_offset), rewritten by every append to it in
// the append's own batch. Retention removes whole segments from the front.

// DefaultSegmentSize is Iggy's segment size (`segment_size`, 1 GiB), used when
// TopicConfig.SegmentSize is 0.
const DefaultSegmentSize = 1 << 30

// Segment describes one segment of a partition.
type Segment struct {
	// FirstOffset and LastOffset bound the segment's messages (inclusive).
	FirstOffset, LastOffset uint64
	// Size is the total size of its batches in bytes.
	Size uint64
	// MaxTimestamp is the base timestamp (µs) of its newest batch.
	MaxTimestamp uint64
}

// Messages is the number of messages in the segment (offsets are gap-free).
func (g Segment) Messages() uint64 { return g.LastOffset - g.FirstOffset + 1 }

func segmentKey(k PartitionKey, first uint64) []byte { return dataKey(k, dSegment, first) }

func encodeSegment(g Segment) []byte {
	return appendU64(appendU64(appendU64(make([]byte, 0, 24), g.LastOffset), g.Size), g.MaxTimestamp)
}

// loadSegments reads a partition's segment records (Open). A partition
// written before segments existed has batches but no record: it becomes one
// segment, written back so the next Open finds it.
func (s *Store) loadSegments(p *partition) error {
	pre := dataKey(p.key, dSegment)
	err := s.scan(pre, func(k, v []byte) error {
		first, err := tailU64(k, len(pre))
		if err != nil {
			return err
		}
		if len(v) != 24 {
			return fmt.Errorf("%w: segment of %v at %d", ErrCorrupt, p.key, first)
		}
		p.segs = append(p.segs, Segment{FirstOffset: first, LastOffset: binary.BigEndian.Uint64(v),
			Size: binary.BigEndian.Uint64(v[8:]), MaxTimestamp: binary.BigEndian.Uint64(v[16:])})
		return nil
	})
	if err != nil || len(p.segs) > 0 || p.stats.Messages == 0 {
		return err
	}
	g := Segment{FirstOffset: p.stats.NextOffset - p.stats.Messages, LastOffset: p.stats.NextOffset - 1,
		Size: p.stats.Bytes, MaxTimestamp: p.stats.LastTimestamp}
	b := s.db.NewBatch()
	_ = b.Set(segmentKey(p.key, g.FirstOffset), encodeSegment(g), nil)
	if err := s.commit(b, "write segment record"); err != nil {
		return err
	}
	p.segs = []Segment{g}
	return nil
}

// appendSegment returns the segment an append of count messages of size
// bytes at base (timestamp ts) leaves as the active one, and whether it is a
// new segment. segSize is the topic's segment size.
func appendSegment(segs []Segment, segSize, base uint64, count uint32, size, ts uint64) (Segment, bool) {
	if n := len(segs); n > 0 && segs[n-1].Size < segSize {
		g := segs[n-1]
		g.LastOffset = base + uint64(count) - 1
		g.Size += size
		g.MaxTimestamp = max(g.MaxTimestamp, ts)
		return g, false
	}
	return Segment{FirstOffset: base, LastOffset: base + uint64(count) - 1, Size: size, MaxTimestamp: ts}, true
}

// Segments returns a partition's segments, oldest first; the last is the
// active one. An empty partition has none. Errors: ErrStreamNotFound,
// ErrTopicNotFound, ErrPartitionNotFound, ErrClosed.
func (s *Store) Segments(k PartitionKey) ([]Segment, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := s.partitionLocked(k)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Segment(nil), p.segs...), nil
}

// Removed reports what one retention pass removed.
type Removed struct {
	Segments uint64
	Messages uint64
	Bytes    uint64
}

func (r *Removed) add(o Removed) {
	r.Segments += o.Segments
	r.Messages += o.Messages
	r.Bytes += o.Bytes
}

// EnforceRetention runs one retention pass over every topic at time now, as
// Iggy's segment cleaner does, and returns what it removed:
//
//   - message_expiry: every leading segment whose newest message is older
//     than the expiry (MaxTimestamp + expiry ≤ now) is removed whole.
//   - max_topic_size: while the topic's size (all its partitions) is above
//     it, the oldest segment of the topic (the smallest MaxTimestamp, then the
//     lowest partition id) is removed.
//
// Never removed: a partition's active (last) segment, and a segment holding
// an offset after the lowest stored consumer or group offset of its
// partition (Iggy's consumer barrier: a consumer that has stored an offset
// never loses a message it has not read). Expiry and size 0 or u64::MAX mean
// never and unlimited.
//
// Each removal is one Pebble batch (DeleteRange over the segment's batches
// and index entries, the segment record and the partition counters), synced
// like an append; the removed ranges are then compacted so the disk space
// comes back. Appends, reads and offset operations go on in parallel on other
// partitions. Errors: ErrClosed, a Pebble error.
func (s *Store) EnforceRetention(now time.Time) (Removed, error) {
	nowUs := uint64(max(now.UnixMicro(), 0))
	var total Removed
	var spans []span
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return total, ErrClosed
	}
	var err error
	for _, sid := range sortedKeys(s.streams) {
		st := s.streams[sid]
		for _, tid := range sortedKeys(st.topics) {
			var r Removed
			r, spans, err = s.retainTopic(st.topics[tid], nowUs, spans)
			total.add(r)
			if err != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	s.mu.RUnlock()
	if cerr := s.compactSpans(spans); err == nil {
		err = cerr
	}
	return total, err
}

// compactPrefix compacts every key with the prefix (after a purge or a
// delete), without holding the store's locks.
func (s *Store) compactPrefix(pre []byte) error {
	return s.compactSpans([]span{{start: pre, end: prefixEnd(pre)}})
}

// span is a key range to compact once its data is deleted.
type span struct{ start, end []byte }

// compactSpans compacts each range so deleted data leaves the disk. It holds
// s.mu shared: appends go on, metadata changes and Close wait.
func (s *Store) compactSpans(spans []span) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	for _, sp := range spans {
		if err := s.db.Compact(context.Background(), sp.start, sp.end, false); err != nil {
			return fmt.Errorf("store: compact removed range: %w", err)
		}
	}
	return nil
}

func expired(g Segment, expiry, now uint64) bool {
	if expiry == 0 || expiry == math.MaxUint64 || g.MaxTimestamp == 0 {
		return false
	}
	return g.MaxTimestamp <= now && now-g.MaxTimestamp >= expiry
}

// retainTopic applies t's retention; the caller holds s.mu shared.
func (s *Store) retainTopic(t *topicState, now uint64, spans []span) (Removed, []span, error) {
	var total Removed
	parts := sortedKeys(t.parts)
	if e := t.cfg.MessageExpiry; e != 0 && e != math.MaxUint64 {
		for _, pid := range parts {
			p := t.parts[pid]
			r, err := s.removeLeading(p, func(g Segment) bool { return expired(g, e, now) })
			total.add(r)
			if r.Segments > 0 {
				spans = append(spans, partitionSpan(p.key))
			}
			if err != nil {
				return total, spans, err
			}
		}
	}
	limit := t.cfg.MaxTopicSize
	if limit == 0 || limit == math.MaxUint64 {
		return total, spans, nil
	}
	touched, blocked := map[uint32]bool{}, map[uint32]bool{}
	var err error
	for err == nil && t.totals().Bytes > limit {
		victim, ok := oldestRemovable(t, parts, blocked)
		if !ok {
			break
		}
		var r Removed
		r, err = s.removeLeading(t.parts[victim], func(Segment) bool { return true }, 1)
		total.add(r)
		if r.Segments > 0 {
			touched[victim] = true
		} else {
			blocked[victim] = true // held back by a stored offset
		}
	}
	for _, pid := range sortedKeys(touched) {
		spans = append(spans, partitionSpan(t.parts[pid].key))
	}
	return total, spans, err
}

func partitionSpan(k PartitionKey) span {
	pre := dataPrefix(k)
	return span{start: pre, end: prefixEnd(pre)}
}

// oldestRemovable picks the partition whose first segment is the topic's
// oldest removable one.
func oldestRemovable(t *topicState, parts []uint32, blocked map[uint32]bool) (uint32, bool) {
	var (
		best  uint32
		bestT uint64
		found bool
	)
	for _, pid := range parts {
		p := t.parts[pid]
		p.mu.Lock()
		if len(p.segs) > 1 && !blocked[pid] && (!found || p.segs[0].MaxTimestamp < bestT) {
			best, bestT, found = pid, p.segs[0].MaxTimestamp, true
		}
		p.mu.Unlock()
	}
	return best, found
}

// removeLeading removes the leading segments of p for which pick is true, at
// most limit of them (no limit when absent), never the active one nor one
// held back by the consumer barrier.
func (s *Store) removeLeading(p *partition, pick func(Segment) bool, limit ...int) (Removed, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	low, held, err := s.barrier(p)
	if err != nil {
		return Removed{}, err
	}
	n := 0
	for n < len(p.segs)-1 && pick(p.segs[n]) && (!held || p.segs[n].LastOffset <= low) && (len(limit) == 0 || n < limit[0]) {
		n++
	}
	if n == 0 {
		return Removed{}, nil
	}
	gone := p.segs[:n]
	last := gone[n-1]
	var r Removed
	for _, g := range gone {
		r.Segments++
		r.Messages += g.Messages()
		r.Bytes += g.Size
	}
	next := p.stats
	next.Messages -= r.Messages
	next.Bytes -= r.Bytes
	k := p.key
	b := s.db.NewBatch()
	_ = b.DeleteRange(dataKey(k, dBatch), dataKey(k, dBatch, last.LastOffset+1), nil)
	_ = b.DeleteRange(dataKey(k, dIndex), dataKey(k, dIndex, last.LastOffset+1), nil)
	_ = b.DeleteRange(dataKey(k, dTime), dataKey(k, dTime, last.MaxTimestamp, last.LastOffset+1), nil)
	_ = b.DeleteRange(dataKey(k, dSegment), dataKey(k, dSegment, last.LastOffset+1), nil)
	_ = b.Set(dataKey(k, dState), encodeState(next), nil)
	if err := s.commit(b, "remove segments"); err != nil {
		return Removed{}, err
	}
	p.stats = next
	p.segs = append(p.segs[:0:0], p.segs[n:]...)
	p.stats.Segments = uint32(len(p.segs))
	p.stats.FirstOffset = p.segs[0].FirstOffset
	s.log.Debug("removed segments", "partition", k.String(), "segments", r.Segments,
		"first_offset", gone[0].FirstOffset, "last_offset", last.LastOffset, "bytes", r.Bytes)
	return r, nil
}

// barrier returns the lowest stored consumer or group offset of p, found
// false when none is stored. p.mu is held, so no offset moves meanwhile.
func (s *Store) barrier(p *partition) (low uint64, found bool, err error) {
	pre := append(dataPrefix(p.key), dOffset)
	err = s.scan(pre, func(_, v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: stored offset of %v", ErrCorrupt, p.key)
		}
		if off := binary.BigEndian.Uint64(v); !found || off < low {
			low, found = off, true
		}
		return nil
	})
	return low, found, err
}
