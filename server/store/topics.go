package store

import (
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// CreateTopic creates a topic with the lowest free id in the stream and
// partitions 0..partitions-1 (0 is legal). cfg is stored verbatim. Errors:
// ErrInvalidName, ErrPartitionsCount (> 1000), ErrStreamNotFound,
// ErrTopicExists, ErrLimit, ErrClosed.
func (s *Store) CreateTopic(streamID uint32, partitions uint32, cfg TopicConfig) (Topic, error) {
	if err := checkName(cfg.Name); err != nil {
		return Topic{}, err
	}
	if partitions > MaxPartitionsPerCall {
		return Topic{}, fmt.Errorf("create topic %q with %d partitions: %w", cfg.Name, partitions, ErrPartitionsCount)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.streamLocked(streamID)
	if err != nil {
		return Topic{}, err
	}
	if _, found := topicByName(st, cfg.Name); found {
		return Topic{}, fmt.Errorf("stream %d topic %q: %w", streamID, cfg.Name, ErrTopicExists)
	}
	id, ok := lowestFree(st.topics, MaxTopicsPerStream)
	if !ok {
		return Topic{}, fmt.Errorf("stream %d create topic %q: %w", streamID, cfg.Name, ErrLimit)
	}
	cfg.Options = append([]byte(nil), cfg.Options...)
	t := &topicState{streamID: streamID, id: id, createdAt: nowMicros(), cfg: cfg,
		parts: map[uint32]*partition{}, groups: map[uint32]*Group{}}
	b := s.db.NewBatch()
	_ = b.Set(key(kTopic, streamID, id), encodeTopic(t), nil)
	for pid := range partitions {
		t.parts[pid] = newPartition(b, t, pid, t.createdAt)
	}
	t.indexParts()
	if err := s.commit(b, "create topic"); err != nil {
		return Topic{}, err
	}
	st.topics[id] = t
	return t.export(), nil
}

// newPartition adds the partition record to b and returns its state.
func newPartition(b *pebble.Batch, t *topicState, pid uint32, createdAt uint64) *partition {
	p := &partition{key: PartitionKey{t.streamID, t.id, pid}, createdAt: createdAt}
	_ = b.Set(key(kPartition, t.streamID, t.id, pid), appendU64([]byte{recordVersion}, p.createdAt), nil)
	return p
}

func topicByName(st *streamState, name string) (*topicState, bool) {
	for _, t := range st.topics {
		if t.cfg.Name == name {
			return t, true
		}
	}
	return nil, false
}

// UpdateTopic replaces a topic's settings with cfg (verbatim; the server
// merges absent keys first). Errors: ErrInvalidName, ErrStreamNotFound,
// ErrTopicNotFound, ErrTopicExists, ErrClosed.
func (s *Store) UpdateTopic(streamID, topicID uint32, cfg TopicConfig) error {
	if err := checkName(cfg.Name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return err
	}
	if other, found := topicByName(s.streams[streamID], cfg.Name); found && other.id != topicID {
		return fmt.Errorf("stream %d topic %q: %w", streamID, cfg.Name, ErrTopicExists)
	}
	upd := *t
	upd.cfg = cfg
	upd.cfg.Options = append([]byte(nil), cfg.Options...)
	b := s.db.NewBatch()
	_ = b.Set(key(kTopic, streamID, topicID), encodeTopic(&upd), nil)
	if err := s.commit(b, "update topic"); err != nil {
		return err
	}
	t.cfg = upd.cfg
	return nil
}

// DeleteTopic deletes a topic with its partitions, messages, groups and
// offsets, in one batch, then compacts its data range. Errors:
// ErrStreamNotFound, ErrTopicNotFound, ErrClosed.
func (s *Store) DeleteTopic(streamID, topicID uint32) error {
	if err := s.deleteTopic(streamID, topicID); err != nil {
		return err
	}
	return s.compactPrefix(key(kData, streamID, topicID))
}

func (s *Store) deleteTopic(streamID, topicID uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.topicLocked(streamID, topicID); err != nil {
		return err
	}
	b := s.db.NewBatch()
	_ = b.Delete(key(kTopic, streamID, topicID), nil)
	for _, p := range []byte{kPartition, kGroup, kGroupSeq, kData} {
		pre := key(p, streamID, topicID)
		_ = b.DeleteRange(pre, prefixEnd(pre), nil)
	}
	if err := s.commit(b, "delete topic"); err != nil {
		return err
	}
	delete(s.streams[streamID].topics, topicID)
	return nil
}

// PurgeStream deletes every message and stored offset of every partition of
// the stream and resets their offsets to 0, then compacts the stream's data
// range so the disk space comes back. Errors: ErrStreamNotFound, ErrClosed.
func (s *Store) PurgeStream(streamID uint32) error {
	if err := s.purgeStream(streamID); err != nil {
		return err
	}
	return s.compactPrefix(key(kData, streamID))
}

func (s *Store) purgeStream(streamID uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.streamLocked(streamID)
	if err != nil {
		return err
	}
	pre := key(kData, streamID)
	b := s.db.NewBatch()
	_ = b.DeleteRange(pre, prefixEnd(pre), nil)
	if err := s.commit(b, "purge stream"); err != nil {
		return err
	}
	for _, t := range st.topics {
		for _, p := range t.parts {
			p.reset()
		}
	}
	return nil
}

// PurgeTopic deletes every message and stored offset of every partition of
// the topic and resets their offsets to 0, then compacts the topic's data
// range so the disk space comes back. Errors: ErrStreamNotFound,
// ErrTopicNotFound, ErrClosed.
func (s *Store) PurgeTopic(streamID, topicID uint32) error {
	if err := s.purgeTopic(streamID, topicID); err != nil {
		return err
	}
	return s.compactPrefix(key(kData, streamID, topicID))
}

func (s *Store) purgeTopic(streamID, topicID uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return err
	}
	pre := key(kData, streamID, topicID)
	b := s.db.NewBatch()
	_ = b.DeleteRange(pre, prefixEnd(pre), nil)
	if err := s.commit(b, "purge topic"); err != nil {
		return err
	}
	for _, p := range t.parts {
		p.reset()
	}
	return nil
}

// Topic returns a topic. Errors: ErrStreamNotFound, ErrTopicNotFound, ErrClosed.
func (s *Store) Topic(streamID, topicID uint32) (Topic, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return Topic{}, err
	}
	return t.export(), nil
}

// TopicByName returns the stream's topic with the exact name. Errors:
// ErrStreamNotFound, ErrTopicNotFound, ErrClosed.
func (s *Store) TopicByName(streamID uint32, name string) (Topic, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, err := s.streamLocked(streamID)
	if err != nil {
		return Topic{}, err
	}
	t, ok := topicByName(st, name)
	if !ok {
		return Topic{}, fmt.Errorf("stream %d topic %q: %w", streamID, name, ErrTopicNotFound)
	}
	return t.export(), nil
}

// Topics returns the stream's topics ordered by id. Errors:
// ErrStreamNotFound, ErrClosed.
func (s *Store) Topics(streamID uint32) ([]Topic, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, err := s.streamLocked(streamID)
	if err != nil {
		return nil, err
	}
	out := make([]Topic, 0, len(st.topics))
	for _, id := range sortedKeys(st.topics) {
		out = append(out, st.topics[id].export())
	}
	return out, nil
}

// CreatePartitions adds n partitions with ids max+1… (or 0… when the topic
// has none) and returns them. Errors: ErrPartitionsCount (n == 0 or
// > 1000), ErrLimit, ErrStreamNotFound, ErrTopicNotFound, ErrClosed.
func (s *Store) CreatePartitions(streamID, topicID, n uint32) ([]Partition, error) {
	if n == 0 || n > MaxPartitionsPerCall {
		return nil, fmt.Errorf("create %d partitions: %w", n, ErrPartitionsCount)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return nil, err
	}
	first := uint32(0)
	if ids := sortedKeys(t.parts); len(ids) > 0 {
		first = ids[len(ids)-1] + 1
	}
	if uint64(first)+uint64(n) > MaxPartitionID {
		return nil, fmt.Errorf("stream %d topic %d create %d partitions from id %d: %w", streamID, topicID, n, first, ErrLimit)
	}
	b := s.db.NewBatch()
	now := nowMicros()
	added := make([]*partition, 0, n)
	for pid := first; pid < first+n; pid++ {
		added = append(added, newPartition(b, t, pid, now))
	}
	if err := s.commit(b, "create partitions"); err != nil {
		return nil, err
	}
	out := make([]Partition, 0, n)
	for _, p := range added {
		t.parts[p.key.Partition] = p
		out = append(out, Partition{ID: p.key.Partition, CreatedAt: p.createdAt})
	}
	t.indexParts()
	return out, nil
}

// DeletePartitions deletes the n highest partitions with their messages and
// offsets. Errors: ErrPartitionsCount (n == 0, > 1000 or more than the topic
// has), ErrStreamNotFound, ErrTopicNotFound, ErrClosed.
func (s *Store) DeletePartitions(streamID, topicID, n uint32) error {
	if n == 0 || n > MaxPartitionsPerCall {
		return fmt.Errorf("delete %d partitions: %w", n, ErrPartitionsCount)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return err
	}
	ids := sortedKeys(t.parts)
	if int(n) > len(ids) {
		return fmt.Errorf("stream %d topic %d delete %d of %d partitions: %w", streamID, topicID, n, len(ids), ErrPartitionsCount)
	}
	gone := ids[len(ids)-int(n):]
	b := s.db.NewBatch()
	for _, pid := range gone {
		_ = b.Delete(key(kPartition, streamID, topicID, pid), nil)
		pre := dataPrefix(PartitionKey{streamID, topicID, pid})
		_ = b.DeleteRange(pre, prefixEnd(pre), nil)
	}
	if err := s.commit(b, "delete partitions"); err != nil {
		return err
	}
	for _, pid := range gone {
		delete(t.parts, pid)
	}
	t.indexParts()
	return nil
}

// CreateGroup creates a consumer group with the topic's next group id (ids
// are never reused, even after DeleteGroup). Errors: ErrInvalidName,
// ErrStreamNotFound, ErrTopicNotFound, ErrGroupExists, ErrLimit, ErrClosed.
func (s *Store) CreateGroup(streamID, topicID uint32, name string) (Group, error) {
	if err := checkName(name); err != nil {
		return Group{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return Group{}, err
	}
	if _, found := groupByName(t, name); found {
		return Group{}, fmt.Errorf("stream %d topic %d group %q: %w", streamID, topicID, name, ErrGroupExists)
	}
	if t.nextGroup == math.MaxUint32 {
		return Group{}, fmt.Errorf("stream %d topic %d create group: %w", streamID, topicID, ErrLimit)
	}
	g := &Group{StreamID: streamID, TopicID: topicID, ID: t.nextGroup, Name: name}
	b := s.db.NewBatch()
	_ = b.Set(key(kGroup, streamID, topicID, g.ID), appendBytes([]byte{recordVersion}, []byte(name)), nil)
	_ = b.Set(key(kGroupSeq, streamID, topicID), appendU32([]byte{recordVersion}, g.ID+1), nil)
	if err := s.commit(b, "create group"); err != nil {
		return Group{}, err
	}
	t.groups[g.ID] = g
	t.nextGroup = g.ID + 1
	return *g, nil
}

func groupByName(t *topicState, name string) (*Group, bool) {
	for _, g := range t.groups {
		if g.Name == name {
			return g, true
		}
	}
	return nil, false
}

// DeleteGroup deletes a group definition and the group's stored offsets on
// every partition of the topic. Errors: ErrStreamNotFound,
// ErrTopicNotFound, ErrGroupNotFound, ErrClosed.
func (s *Store) DeleteGroup(streamID, topicID, groupID uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return err
	}
	if t.groups[groupID] == nil {
		return fmt.Errorf("stream %d topic %d group %d: %w", streamID, topicID, groupID, ErrGroupNotFound)
	}
	b := s.db.NewBatch()
	_ = b.Delete(key(kGroup, streamID, topicID, groupID), nil)
	for _, p := range t.parts {
		_ = b.Delete(offsetKey(p.key, Consumer{KindGroup, groupID}), nil)
	}
	if err := s.commit(b, "delete group"); err != nil {
		return err
	}
	delete(t.groups, groupID)
	return nil
}

// Group returns a group. Errors: ErrStreamNotFound, ErrTopicNotFound,
// ErrGroupNotFound, ErrClosed.
func (s *Store) Group(streamID, topicID, groupID uint32) (Group, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return Group{}, err
	}
	g := t.groups[groupID]
	if g == nil {
		return Group{}, fmt.Errorf("stream %d topic %d group %d: %w", streamID, topicID, groupID, ErrGroupNotFound)
	}
	return *g, nil
}

// GroupByName returns the topic's group with the exact name. Errors as Group.
func (s *Store) GroupByName(streamID, topicID uint32, name string) (Group, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return Group{}, err
	}
	g, ok := groupByName(t, name)
	if !ok {
		return Group{}, fmt.Errorf("stream %d topic %d group %q: %w", streamID, topicID, name, ErrGroupNotFound)
	}
	return *g, nil
}

// Groups returns the topic's groups ordered by id. Errors: ErrStreamNotFound,
// ErrTopicNotFound, ErrClosed.
func (s *Store) Groups(streamID, topicID uint32) ([]Group, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, err := s.topicLocked(streamID, topicID)
	if err != nil {
		return nil, err
	}
	out := make([]Group, 0, len(t.groups))
	for _, id := range sortedKeys(t.groups) {
		out = append(out, *t.groups[id])
	}
	return out, nil
}
