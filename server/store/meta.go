package store

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// load reads all metadata and partition counters into memory (Open).
func (s *Store) load() error {
	err := s.scan([]byte{kStream}, func(k, v []byte) error {
		if len(k) != 5 {
			return fmt.Errorf("%w: stream key %x", ErrCorrupt, k)
		}
		r := newReader(v)
		st := &streamState{Stream: Stream{ID: binary.BigEndian.Uint32(k[1:]), Name: r.str(), CreatedAt: r.u64()}, topics: map[uint32]*topicState{}}
		s.streams[st.ID] = st
		return r.done()
	})
	if err == nil {
		err = s.scan([]byte{kTopic}, func(k, v []byte) error {
			sid, tid, ok := ids2(k)
			st := s.streams[sid]
			if !ok || st == nil {
				return fmt.Errorf("%w: orphan topic key %x", ErrCorrupt, k)
			}
			t, err := decodeTopic(sid, tid, v)
			st.topics[tid] = t
			return err
		})
	}
	if err == nil {
		err = s.scan([]byte{kPartition}, func(k, v []byte) error {
			t, pid, err := s.childOf(k)
			if err != nil {
				return err
			}
			r := newReader(v)
			t.parts[pid] = &partition{key: PartitionKey{t.streamID, t.id, pid}, createdAt: r.u64()}
			return r.done()
		})
	}
	if err == nil {
		err = s.scan([]byte{kGroup}, func(k, v []byte) error {
			t, gid, err := s.childOf(k)
			if err != nil {
				return err
			}
			r := newReader(v)
			t.groups[gid] = &Group{StreamID: t.streamID, TopicID: t.id, ID: gid, Name: r.str()}
			return r.done()
		})
	}
	if err == nil {
		err = s.scan([]byte{kGroupSeq}, func(k, v []byte) error {
			sid, tid, ok := ids2(k)
			t := s.streams[sid].topicOrNil(tid)
			if !ok || t == nil {
				return fmt.Errorf("%w: orphan group sequence key %x", ErrCorrupt, k)
			}
			r := newReader(v)
			t.nextGroup = r.u32()
			return r.done()
		})
	}
	if err == nil {
		err = s.loadUsers()
	}
	if err != nil {
		return err
	}
	for _, st := range s.streams {
		for _, t := range st.topics {
			t.indexParts()
			for _, p := range t.parts {
				if p.stats, err = s.readState(p.key); err != nil {
					return err
				}
				if err = s.loadSegments(p); err != nil {
					return err
				}
				p.stats.Segments = uint32(len(p.segs))
				p.stats.FirstOffset = p.stats.NextOffset
				if len(p.segs) > 0 {
					p.stats.FirstOffset = p.segs[0].FirstOffset
				}
			}
		}
	}
	return nil
}

// scan calls fn for every key with the prefix; k and v are only valid
// during the call.
func (s *Store) scan(prefix []byte, fn func(k, v []byte) error) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("store: scan %x: %w", prefix, err)
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			err = fn(it.Key(), v)
		}
		if err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

func ids2(k []byte) (a, b uint32, ok bool) {
	if len(k) != 9 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(k[1:]), binary.BigEndian.Uint32(k[5:]), true
}

// childOf resolves a 13-byte key prefix|stream|topic|child.
func (s *Store) childOf(k []byte) (*topicState, uint32, error) {
	if len(k) == 13 {
		sid, tid, _ := ids2(k[:9])
		if t := s.streams[sid].topicOrNil(tid); t != nil {
			return t, binary.BigEndian.Uint32(k[9:]), nil
		}
	}
	return nil, 0, fmt.Errorf("%w: orphan key %x", ErrCorrupt, k)
}

func (st *streamState) topicOrNil(id uint32) *topicState {
	if st == nil {
		return nil
	}
	return st.topics[id]
}

func encodeTopic(t *topicState) []byte {
	b := appendBytes([]byte{recordVersion}, []byte(t.cfg.Name))
	b = appendU64(b, t.createdAt)
	b = appendU64(b, t.cfg.MessageExpiry)
	b = appendU64(b, t.cfg.MaxTopicSize)
	b = append(b, t.cfg.Compression)
	b = appendBytes(b, t.cfg.Options)
	return appendU64(b, t.cfg.SegmentSize)
}

func decodeTopic(sid, tid uint32, v []byte) (*topicState, error) {
	r := newReader(v)
	t := &topicState{streamID: sid, id: tid, parts: map[uint32]*partition{}, groups: map[uint32]*Group{}}
	t.cfg.Name = r.str()
	t.createdAt = r.u64()
	t.cfg.MessageExpiry = r.u64()
	t.cfg.MaxTopicSize = r.u64()
	t.cfg.Compression = r.u8()
	t.cfg.Options = r.bytes()
	if len(r.b) > 0 { // absent in records written before segments
		t.cfg.SegmentSize = r.u64()
	}
	return t, r.done()
}

func (t *topicState) export() Topic {
	out := Topic{StreamID: t.streamID, ID: t.id, CreatedAt: t.createdAt, TopicConfig: t.cfg}
	out.Options = slices.Clone(t.cfg.Options)
	out.Partitions = t.byID[:len(t.byID):len(t.byID)] // shared: indexParts never writes into it
	return out
}

// indexParts rebuilds t.byID from t.parts; the caller holds the store's write lock (or
// t is not published yet).
func (t *topicState) indexParts() {
	t.byID = make([]Partition, 0, len(t.parts))
	for _, p := range t.parts {
		t.byID = append(t.byID, Partition{ID: p.key.Partition, CreatedAt: p.createdAt})
	}
	slices.SortFunc(t.byID, func(a, b Partition) int { return cmp.Compare(a.ID, b.ID) })
}

func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: %q (1..%d bytes)", ErrInvalidName, name, MaxNameLen)
	}
	return nil
}

// lowestFree returns the lowest id in [0, limit) not in m.
func lowestFree[V any](m map[uint32]V, limit uint32) (uint32, bool) {
	for id := uint32(0); id < limit; id++ {
		if _, used := m[id]; !used {
			return id, true
		}
	}
	return 0, false
}

// sortedKeys returns m's keys in ascending order.
func sortedKeys[V any](m map[uint32]V) []uint32 {
	ks := make([]uint32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// streamLocked returns the stream; s.mu must be held.
func (s *Store) streamLocked(id uint32) (*streamState, error) {
	if s.closed {
		return nil, ErrClosed
	}
	st := s.streams[id]
	if st == nil {
		return nil, fmt.Errorf("stream %d: %w", id, ErrStreamNotFound)
	}
	return st, nil
}

// topicLocked returns the topic; s.mu must be held.
func (s *Store) topicLocked(sid, tid uint32) (*topicState, error) {
	st, err := s.streamLocked(sid)
	if err != nil {
		return nil, err
	}
	t := st.topics[tid]
	if t == nil {
		return nil, fmt.Errorf("stream %d topic %d: %w", sid, tid, ErrTopicNotFound)
	}
	return t, nil
}

// partitionLocked returns the partition; s.mu must be held.
func (s *Store) partitionLocked(k PartitionKey) (*partition, error) {
	t, err := s.topicLocked(k.Stream, k.Topic)
	if err != nil {
		return nil, err
	}
	p := t.parts[k.Partition]
	if p == nil {
		return nil, fmt.Errorf("stream %d topic %d partition %d: %w", k.Stream, k.Topic, k.Partition, ErrPartitionNotFound)
	}
	return p, nil
}

// CreateStream creates a stream with the lowest free id. Errors:
// ErrInvalidName, ErrStreamExists, ErrLimit, ErrClosed.
func (s *Store) CreateStream(name string) (Stream, error) {
	if err := checkName(name); err != nil {
		return Stream{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Stream{}, ErrClosed
	}
	if _, found := s.streamByName(name); found {
		return Stream{}, fmt.Errorf("stream %q: %w", name, ErrStreamExists)
	}
	id, ok := lowestFree(s.streams, MaxStreams)
	if !ok {
		return Stream{}, fmt.Errorf("create stream %q: %w", name, ErrLimit)
	}
	st := &streamState{Stream: Stream{ID: id, Name: name, CreatedAt: nowMicros()}, topics: map[uint32]*topicState{}}
	b := s.db.NewBatch()
	_ = b.Set(key(kStream, id), encodeStream(st.Stream), nil)
	if err := s.commit(b, "create stream"); err != nil {
		return Stream{}, err
	}
	s.streams[id] = st
	return st.Stream, nil
}

func encodeStream(st Stream) []byte {
	return appendU64(appendBytes([]byte{recordVersion}, []byte(st.Name)), st.CreatedAt)
}

func (s *Store) streamByName(name string) (*streamState, bool) {
	for _, st := range s.streams {
		if st.Name == name {
			return st, true
		}
	}
	return nil, false
}

// UpdateStream renames a stream (renaming to its own name is fine). Errors:
// ErrInvalidName, ErrStreamNotFound, ErrStreamExists, ErrClosed.
func (s *Store) UpdateStream(id uint32, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.streamLocked(id)
	if err != nil {
		return err
	}
	if other, found := s.streamByName(name); found && other.ID != id {
		return fmt.Errorf("stream %q: %w", name, ErrStreamExists)
	}
	upd := st.Stream
	upd.Name = name
	b := s.db.NewBatch()
	_ = b.Set(key(kStream, id), encodeStream(upd), nil)
	if err := s.commit(b, "update stream"); err != nil {
		return err
	}
	st.Stream = upd
	return nil
}

// DeleteStream deletes a stream with all its topics, partitions, messages,
// groups and offsets, in one batch. Errors: ErrStreamNotFound, ErrClosed.
func (s *Store) DeleteStream(id uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.streamLocked(id); err != nil {
		return err
	}
	b := s.db.NewBatch()
	_ = b.Delete(key(kStream, id), nil)
	for _, p := range []byte{kTopic, kPartition, kGroup, kGroupSeq, kData} {
		pre := key(p, id)
		_ = b.DeleteRange(pre, prefixEnd(pre), nil)
	}
	if err := s.commit(b, "delete stream"); err != nil {
		return err
	}
	delete(s.streams, id)
	return nil
}

// Stream returns the stream with the id. Errors: ErrStreamNotFound, ErrClosed.
func (s *Store) Stream(id uint32) (Stream, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, err := s.streamLocked(id)
	if err != nil {
		return Stream{}, err
	}
	return st.Stream, nil
}

// StreamByName returns the stream with the exact name. Errors:
// ErrStreamNotFound, ErrClosed.
func (s *Store) StreamByName(name string) (Stream, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return Stream{}, ErrClosed
	}
	st, ok := s.streamByName(name)
	if !ok {
		return Stream{}, fmt.Errorf("stream %q: %w", name, ErrStreamNotFound)
	}
	return st.Stream, nil
}

// Streams returns all streams ordered by id.
func (s *Store) Streams() ([]Stream, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	out := make([]Stream, 0, len(s.streams))
	for _, id := range sortedKeys(s.streams) {
		out = append(out, s.streams[id].Stream)
	}
	return out, nil
}

// PartitionsCount returns the count of partitions of every topic of every stream.
func (s *Store) PartitionsCount() (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	n := 0
	for _, st := range s.streams {
		for _, t := range st.topics {
			n += len(t.parts)
		}
	}
	return n, nil
}
