package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// Batch is one stored message batch.
type Batch struct {
	BaseOffset    uint64
	Count         uint32
	BaseTimestamp uint64
	// Data is the batch exactly as appended. Batches returned by Read own
	// their Data (copied out of Pebble).
	Data []byte
}

// Appended describes a committed append.
type Appended struct {
	BaseOffset    uint64
	BaseTimestamp uint64
	Count         uint32
	// Stats are the partition's counters right after the append.
	Stats PartitionStats
}

// StampFunc receives the base offset and base timestamp (µs) the store
// assigns to a batch and returns the batch bytes stamped with them (Iggy:
// partition_id, base_offset, base_timestamp, recomputed batch_checksum). It
// runs with the partition locked: it must be quick and must not call the
// Store. An error aborts the append and is returned wrapped.
type StampFunc func(baseOffset, baseTimestamp uint64) ([]byte, error)

// AppendFunc appends one batch of count messages to a partition. The base
// offset is the partition's next offset (0 when empty); the base timestamp
// is now, raised to the partition's last base timestamp if the clock went
// back, so timestamps never decrease within a partition. The batch, its
// index entries and the partition counters are committed in one Pebble
// batch (synced under FsyncAlways) before AppendFunc returns.
//
// Appends to one partition are serialized; appends to different partitions
// run in parallel. Errors: ErrInvalidBatch (count 0 or empty bytes),
// ErrStreamNotFound, ErrTopicNotFound, ErrPartitionNotFound, ErrLimit
// (offsets exhausted), ErrClosed, the stamp error.
func (s *Store) AppendFunc(k PartitionKey, count uint32, stamp StampFunc) (Appended, error) {
	return s.append(k, count, func(p *partition) ([]byte, uint64, error) {
		ts := max(s.nowMicros(), p.stats.LastTimestamp)
		data, err := stamp(p.stats.NextOffset, ts)
		if err != nil {
			return nil, 0, fmt.Errorf("store: append to %v: stamp: %w", k, err)
		}
		return data, ts, nil
	})
}

// Append appends a batch the caller already stamped: b.BaseOffset must be
// the partition's next offset and b.BaseTimestamp must not be older than
// the partition's last base timestamp, else ErrOffsetMismatch. Otherwise as
// AppendFunc; use AppendFunc when several goroutines append to one
// partition.
func (s *Store) Append(k PartitionKey, b Batch) (Appended, error) {
	return s.append(k, b.Count, func(p *partition) ([]byte, uint64, error) {
		if b.BaseOffset != p.stats.NextOffset || b.BaseTimestamp < p.stats.LastTimestamp {
			return nil, 0, fmt.Errorf("append to %v: batch at offset %d timestamp %d, partition next offset %d last timestamp %d: %w",
				k, b.BaseOffset, b.BaseTimestamp, p.stats.NextOffset, p.stats.LastTimestamp, ErrOffsetMismatch)
		}
		return b.Data, b.BaseTimestamp, nil
	})
}

func (s *Store) append(k PartitionKey, count uint32, produce func(*partition) ([]byte, uint64, error)) (Appended, error) {
	if count == 0 {
		return Appended{}, fmt.Errorf("append to %v: count 0: %w", k, ErrInvalidBatch)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := s.partitionLocked(k)
	if err != nil {
		return Appended{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	base := p.stats.NextOffset
	if base > math.MaxUint64-uint64(count) {
		return Appended{}, fmt.Errorf("append to %v: %w", k, ErrLimit)
	}
	data, ts, err := produce(p)
	if err != nil {
		return Appended{}, err
	}
	if len(data) == 0 {
		return Appended{}, fmt.Errorf("append to %v: empty batch: %w", k, ErrInvalidBatch)
	}
	seg, opened := appendSegment(p.segs, s.streams[k.Stream].topics[k.Topic].segmentSize(), base, count, uint64(len(data)), ts)
	next := PartitionStats{
		NextOffset:    base + uint64(count),
		Messages:      p.stats.Messages + uint64(count),
		Bytes:         p.stats.Bytes + uint64(len(data)),
		LastTimestamp: ts,
		Segments:      p.stats.Segments,
		FirstOffset:   p.stats.FirstOffset,
	}
	if opened {
		next.Segments++
	}
	if len(p.segs) == 0 {
		next.FirstOffset = base
	}
	b := s.db.NewBatch()
	_ = b.Set(segmentKey(k, seg.FirstOffset), encodeSegment(seg), nil)
	_ = b.Set(dataKey(k, dBatch, base), data, nil)
	_ = b.Set(dataKey(k, dIndex, base), encodeIndex(count, ts, uint64(len(data))), nil)
	_ = b.Set(dataKey(k, dTime, ts, base), nil, nil)
	_ = b.Set(dataKey(k, dState), encodeState(next), nil)
	if err := s.commit(b, "append"); err != nil {
		return Appended{}, err
	}
	p.stats = next
	if opened {
		p.segs = append(p.segs, seg)
	} else {
		p.segs[len(p.segs)-1] = seg
	}
	return Appended{BaseOffset: base, BaseTimestamp: ts, Count: count, Stats: next}, nil
}

func encodeIndex(count uint32, ts, size uint64) []byte {
	return appendU64(appendU64(appendU32(make([]byte, 0, 20), count), ts), size)
}

func encodeState(st PartitionStats) []byte {
	b := make([]byte, 0, 32)
	for _, v := range []uint64{st.NextOffset, st.Messages, st.Bytes, st.LastTimestamp} {
		b = appendU64(b, v)
	}
	return b
}

// readState reads a partition's counters from Pebble (zero when absent).
func (s *Store) readState(k PartitionKey) (PartitionStats, error) {
	v, closer, err := s.db.Get(dataKey(k, dState))
	if errors.Is(err, pebble.ErrNotFound) {
		return PartitionStats{}, nil
	}
	if err != nil {
		return PartitionStats{}, fmt.Errorf("store: read counters of %v: %w", k, err)
	}
	defer func() { _ = closer.Close() }()
	if len(v) != 32 {
		return PartitionStats{}, fmt.Errorf("%w: counters of %v: %d bytes", ErrCorrupt, k, len(v))
	}
	return PartitionStats{
		NextOffset:    binary.BigEndian.Uint64(v),
		Messages:      binary.BigEndian.Uint64(v[8:]),
		Bytes:         binary.BigEndian.Uint64(v[16:]),
		LastTimestamp: binary.BigEndian.Uint64(v[24:]),
	}, nil
}

// Stats returns a partition's counters. Errors: ErrStreamNotFound,
// ErrTopicNotFound, ErrPartitionNotFound, ErrClosed.
func (s *Store) Stats(k PartitionKey) (PartitionStats, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := s.partitionLocked(k)
	if err != nil {
		return PartitionStats{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats, nil
}

// ReadResult is the answer of Read.
type ReadResult struct {
	// Stats are the partition's counters at the time of the read.
	Stats PartitionStats
	// Batches are the stored batches overlapping the requested range, in
	// offset order. The first may start before the requested offset and
	// the last may end after the range: the caller slices them.
	Batches []Batch
}

// Read returns the batches holding offsets [start, start+maxMessages),
// clipped to the stored messages, from one consistent view of the
// partition. A start below the first retained offset (Stats.FirstOffset:
// older segments were removed) reads from the first retained message, as
// Iggy does. maxMessages 0, an empty partition or start past the last
// offset give no batches (not an error). Errors: ErrStreamNotFound,
// ErrTopicNotFound, ErrPartitionNotFound, ErrClosed.
func (s *Store) Read(k PartitionKey, start uint64, maxMessages uint32) (ReadResult, error) {
	return s.ReadLimit(k, start, maxMessages, 0)
}

// ReadLimit is Read with a byte budget: it stops adding batches once the
// batches collected hold maxBytes bytes or more (0 means no budget). The
// first overlapping batch is always returned, whatever its size, so a
// reader always makes progress. The server uses it to bound the memory a
// single poll may load.
func (s *Store) ReadLimit(k PartitionKey, start uint64, maxMessages uint32, maxBytes uint64) (ReadResult, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := s.partitionLocked(k)
	if err != nil {
		return ReadResult{}, err
	}
	var res ReadResult
	p.mu.Lock()
	res.Stats = p.stats
	start = max(start, res.Stats.FirstOffset) // below the retained range: its first message
	if maxMessages == 0 || res.Stats.Messages == 0 || start >= res.Stats.NextOffset {
		p.mu.Unlock()
		return res, nil
	}
	idxPre := dataKey(k, dIndex)
	idx, err := s.db.NewIter(&pebble.IterOptions{LowerBound: idxPre, UpperBound: prefixEnd(idxPre)})
	if err != nil {
		p.mu.Unlock()
		return ReadResult{}, fmt.Errorf("store: read %v: %w", k, err)
	}
	batchPre := dataKey(k, dBatch)
	data, err := s.db.NewIter(&pebble.IterOptions{LowerBound: batchPre, UpperBound: prefixEnd(batchPre)})
	p.mu.Unlock() // both iterators see the same committed state
	if err != nil {
		_ = idx.Close()
		return ReadResult{}, fmt.Errorf("store: read %v: %w", k, err)
	}
	res.Batches, err = readBatches(idx, data, k, start, min(start+uint64(maxMessages), res.Stats.NextOffset), maxBytes)
	if err2 := errors.Join(idx.Close(), data.Close()); err == nil && err2 != nil {
		err = fmt.Errorf("store: read %v: %w", k, err2)
	}
	if err != nil {
		return ReadResult{}, err
	}
	return res, nil
}

// readBatches collects the batches overlapping [start, end).
func readBatches(idx, data *pebble.Iterator, k PartitionKey, start, end, maxBytes uint64) ([]Batch, error) {
	var out []Batch
	var size uint64
	prefixLen := len(dataKey(k, dIndex))
	if !idx.SeekLT(dataKey(k, dIndex, start+1)) {
		idx.First() // start precedes the oldest stored batch
	}
	for ; idx.Valid(); idx.Next() {
		base, err := tailU64(idx.Key(), prefixLen)
		if err != nil {
			return nil, err
		}
		if base >= end {
			break
		}
		v, err := idx.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("store: read %v index: %w", k, err)
		}
		if len(v) != 20 {
			return nil, fmt.Errorf("%w: index of %v at %d", ErrCorrupt, k, base)
		}
		b := Batch{BaseOffset: base, Count: binary.BigEndian.Uint32(v), BaseTimestamp: binary.BigEndian.Uint64(v[4:])}
		if base+uint64(b.Count) <= start {
			continue
		}
		if maxBytes > 0 && len(out) > 0 && size >= maxBytes {
			break
		}
		size += binary.BigEndian.Uint64(v[12:])
		out = append(out, b)
	}
	if err := idx.Error(); err != nil {
		return nil, fmt.Errorf("store: read %v index: %w", k, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	i := 0
	for ok := data.SeekGE(dataKey(k, dBatch, out[0].BaseOffset)); ok && i < len(out); ok = data.Next() {
		if !bytes.Equal(data.Key(), dataKey(k, dBatch, out[i].BaseOffset)) {
			return nil, fmt.Errorf("%w: %v batch key %x does not match index offset %d", ErrCorrupt, k, data.Key(), out[i].BaseOffset)
		}
		v, err := data.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("store: read %v batch %d: %w", k, out[i].BaseOffset, err)
		}
		out[i].Data = bytes.Clone(v)
		i++
	}
	if err := data.Error(); err != nil {
		return nil, fmt.Errorf("store: read %v batches: %w", k, err)
	}
	if i != len(out) {
		return nil, fmt.Errorf("%w: %v: %d batches indexed, %d stored", ErrCorrupt, k, len(out), i)
	}
	return out, nil
}

// OffsetForTimestamp returns the base offset of the first batch whose base
// timestamp is ≥ ts (µs); found is false when there is none. Errors:
// ErrStreamNotFound, ErrTopicNotFound, ErrPartitionNotFound, ErrClosed.
func (s *Store) OffsetForTimestamp(k PartitionKey, ts uint64) (offset uint64, found bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, err := s.partitionLocked(k); err != nil {
		return 0, false, err
	}
	pre := dataKey(k, dTime)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: prefixEnd(pre)})
	if err != nil {
		return 0, false, fmt.Errorf("store: timestamp lookup %v: %w", k, err)
	}
	if it.SeekGE(dataKey(k, dTime, ts)) {
		offset, err = tailU64(it.Key(), len(pre)+8)
		found = err == nil
	}
	if err2 := it.Close(); err == nil && err2 != nil {
		err = fmt.Errorf("store: timestamp lookup %v: %w", k, err2)
	}
	return offset, found, err
}

// Totals are summed counters of a topic or stream.
type Totals struct {
	Messages uint64
	Bytes    uint64
}

// TopicTotals sums the counters of the topic's partitions. Errors:
// ErrStreamNotFound, ErrTopicNotFound, ErrClosed.
func (s *Store) TopicTotals(streamID, topicID uint32) (Totals, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return Totals{}, err
	}
	return t.totals(), nil
}

// StreamTotals sums the counters of every partition of the stream. Errors:
// ErrStreamNotFound, ErrClosed.
func (s *Store) StreamTotals(streamID uint32) (Totals, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, err := s.streamLocked(streamID)
	if err != nil {
		return Totals{}, err
	}
	var sum Totals
	for _, t := range st.topics {
		tt := t.totals()
		sum.Messages += tt.Messages
		sum.Bytes += tt.Bytes
	}
	return sum, nil
}

func (t *topicState) totals() Totals {
	var sum Totals
	for _, p := range t.parts {
		p.mu.Lock()
		sum.Messages += p.stats.Messages
		sum.Bytes += p.stats.Bytes
		p.mu.Unlock()
	}
	return sum
}
