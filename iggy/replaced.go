package iggy

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferryio/ferry/iggy/wire"
)

// A topic deleted and created again under the same name is a new topic: Iggy deletes the
// topic's consumer groups, their members and their stored offsets with it, gives the new
// topic the lowest free id (often the old one again) and a new creation time, and starts
// its group ids from 0 again. So a member of the old topic's group sees the same stream,
// topic and group names, often the same ids, and a fresh group that stored nothing; if
// it went on polling from its local positions it would skip the new topic's first
// messages. The Consumer notices the replacement on every rejoin (the old group took its
// membership with it: a sync answers "not a member", a poll asks to resync, a store is
// refused) by reading the topic's identity after joining, and then forgets every
// position, floor and kept batch of the old topic.

// TopicIdentity tells a topic from a topic of the same name created after it was
// deleted: the id may be reused, the creation time is new.
type TopicIdentity struct {
	ID        uint32
	CreatedAt uint64 // µs since the Unix epoch, as the server reports it
}

func (t TopicIdentity) String() string { return fmt.Sprintf("id %d created_at %d", t.ID, t.CreatedAt) }

// TopicReplacement is the topic a Consumer was consuming (Old) and the topic of the same
// name it found instead on rejoining (New).
type TopicReplacement struct{ Old, New TopicIdentity }

// ErrTopicReplaced is returned by Consumer.StoreOffsetIn, without sending anything, for an
// offset of an earlier incarnation of the topic (it was deleted and created again since):
// it does not describe the new topic's messages. A member request (a poll, a store) whose
// reconnect found the topic replaced fails with it too, unsent (it also matches
// ErrNotConnected; Poll retries by itself). Not retriable for a store.
var ErrTopicReplaced = errors.New("iggy: the topic was deleted and created again")

// errReplacedOnConnect fails a reconnect that found the topic replaced, so that no
// request queued for the old topic (a poll from an old position, a store of an old
// offset) is sent to the new one; the next connect proceeds.
var errReplacedOnConnect = fmt.Errorf("%w: %w", errFailRequest, ErrTopicReplaced)

// readTopic reads the identity of the consumed topic on conn (after joining its group,
// so the identity is at least as new as the group joined).
func (cn *Consumer) readTopic(ctx context.Context, conn *conn) (TopicIdentity, error) {
	p, err := cn.c.onConn(ctx, conn, wire.GetTopicRequest{Stream: cn.cfg.Stream, Topic: cn.cfg.Topic})
	if err != nil {
		return TopicIdentity{}, err
	}
	t, found, err := wire.DecodeTopicDetails(p)
	if err != nil {
		return TopicIdentity{}, decodeErr(err)
	}
	if !found {
		return TopicIdentity{}, wire.ErrTopicIDNotFound
	}
	return TopicIdentity{ID: t.ID, CreatedAt: t.CreatedAt}, nil
}

// noteTopicLocked records the topic identity read at a join (cn.mu held) and reports
// whether it differs from the one known: then every position, stored-offset floor,
// pause and kept batch of the old topic is dropped, the incarnation grows, and the next
// report carries the replacement (every old partition revoked, the new assignment
// assigned afresh, each polled from the new group's stored offset, or 0).
func (cn *Consumer) noteTopicLocked(id TopicIdentity) bool {
	if !cn.topicKnown {
		cn.topic, cn.topicKnown = id, true
		return false
	}
	if id == cn.topic {
		return false
	}
	if cn.replaced == nil {
		cn.replaced = &TopicReplacement{Old: cn.topic}
	}
	cn.replaced.New = id
	cn.c.cfg.logger.Debug("iggy: the consumed topic was deleted and created again; every partition starts afresh",
		"stream", cn.cfg.Stream.String(), "topic", cn.cfg.Topic.String(), "group", cn.cfg.Group,
		"old_topic_id", cn.topic.ID, "old_created_at", cn.topic.CreatedAt, "new_topic_id", id.ID, "new_created_at", id.CreatedAt)
	cn.topic = id
	cn.incarnation++
	cn.topicLife = cn.incarnation
	clear(cn.rewoundAt)
	cn.rewinds = nil
	clear(cn.parts)
	clear(cn.former)
	clear(cn.paused)
	cn.assigned = nil
	if cn.kept != nil {
		cn.c.putBuf(cn.kept)
		cn.kept = nil
	}
	cn.needSync = true
	cn.changedLocked()
	return true
}

// Topic returns the identity of the consumed topic as of the last join, and the
// Consumer's incarnation of it: 0 at first, +1 each time the topic was found replaced.
func (cn *Consumer) Topic() (TopicIdentity, uint64) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.topic, cn.incarnation
}
