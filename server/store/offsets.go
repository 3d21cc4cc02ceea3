package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// lockOffsets resolves the partition and checks the consumer, then locks
// the partition. On success the caller must call the returned unlock.
func (s *Store) lockOffsets(k PartitionKey, c Consumer) (*partition, func(), error) {
	if c.Kind != KindConsumer && c.Kind != KindGroup {
		return nil, nil, fmt.Errorf("consumer kind %d: %w", c.Kind, ErrInvalidConsumer)
	}
	s.mu.RLock()
	p, err := s.partitionLocked(k)
	if err == nil && c.Kind == KindGroup && s.streams[k.Stream].topics[k.Topic].groups[c.ID] == nil {
		err = fmt.Errorf("%v group %d: %w", k, c.ID, ErrGroupNotFound)
	}
	if err != nil {
		s.mu.RUnlock()
		return nil, nil, err
	}
	p.mu.Lock()
	return p, func() { p.mu.Unlock(); s.mu.RUnlock() }, nil
}

func (s *Store) getOffset(k PartitionKey, c Consumer) (uint64, bool, error) {
	v, closer, err := s.db.Get(offsetKey(k, c))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: get offset %v consumer %d/%d: %w", k, c.Kind, c.ID, err)
	}
	defer func() { _ = closer.Close() }()
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: offset %v consumer %d/%d", ErrCorrupt, k, c.Kind, c.ID)
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// ConsumerOffset returns the consumer's stored offset on the partition;
// found is false when none is stored. For KindGroup the group must exist.
// Errors: ErrInvalidConsumer, ErrStreamNotFound, ErrTopicNotFound,
// ErrPartitionNotFound, ErrGroupNotFound, ErrClosed.
func (s *Store) ConsumerOffset(k PartitionKey, c Consumer) (offset uint64, found bool, err error) {
	_, unlock, err := s.lockOffsets(k, c)
	if err != nil {
		return 0, false, err
	}
	defer unlock()
	return s.getOffset(k, c)
}

// StoreConsumerOffset sets the consumer's stored offset exactly (it may move
// backwards). Errors: ErrOffsetOutOfRange (partition empty or offset past
// the current offset), and those of ConsumerOffset.
func (s *Store) StoreConsumerOffset(k PartitionKey, c Consumer, offset uint64) error {
	p, unlock, err := s.lockOffsets(k, c)
	if err != nil {
		return err
	}
	defer unlock()
	if p.stats.Messages == 0 || offset >= p.stats.NextOffset {
		return fmt.Errorf("%v store offset %d (next offset %d, %d messages): %w", k, offset, p.stats.NextOffset, p.stats.Messages, ErrOffsetOutOfRange)
	}
	return s.putOffset(k, c, offset)
}

// AdvanceConsumerOffset stores max(stored, offset), Iggy's auto-commit rule,
// and returns the offset stored afterwards. Errors as StoreConsumerOffset.
func (s *Store) AdvanceConsumerOffset(k PartitionKey, c Consumer, offset uint64) (uint64, error) {
	p, unlock, err := s.lockOffsets(k, c)
	if err != nil {
		return 0, err
	}
	defer unlock()
	if p.stats.Messages == 0 || offset >= p.stats.NextOffset {
		return 0, fmt.Errorf("%v advance offset to %d (next offset %d): %w", k, offset, p.stats.NextOffset, ErrOffsetOutOfRange)
	}
	old, found, err := s.getOffset(k, c)
	if err != nil {
		return 0, err
	}
	if found && old >= offset {
		return old, nil
	}
	return offset, s.putOffset(k, c, offset)
}

func (s *Store) putOffset(k PartitionKey, c Consumer, offset uint64) error {
	b := s.db.NewBatch()
	_ = b.Set(offsetKey(k, c), appendU64(nil, offset), nil)
	return s.commit(b, "store consumer offset")
}

// DeleteConsumerOffset deletes the consumer's stored offset. Errors:
// ErrConsumerOffsetNotFound, and those of ConsumerOffset.
func (s *Store) DeleteConsumerOffset(k PartitionKey, c Consumer) error {
	_, unlock, err := s.lockOffsets(k, c)
	if err != nil {
		return err
	}
	defer unlock()
	if _, found, err := s.getOffset(k, c); err != nil {
		return err
	} else if !found {
		return fmt.Errorf("%v consumer %d/%d: %w", k, c.Kind, c.ID, ErrConsumerOffsetNotFound)
	}
	b := s.db.NewBatch()
	_ = b.Delete(offsetKey(k, c), nil)
	return s.commit(b, "delete consumer offset")
}
