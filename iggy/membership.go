package iggy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// Group membership of a Consumer: joining on every (re)connect, assignment syncs, the
// lock-step slot shared by polls, syncs and stores, and the member goroutine that keeps
// the member alive and its assignment fresh.

// join is the member link's onConnect: join the group, creating it if missing, and read
// the topic's identity. A reconnect that finds the topic replaced fails (after forgetting
// the old topic's positions), so that the request that caused it, meant for the old
// topic, is not sent to the new one; the next connect proceeds.
func (cn *Consumer) join(ctx context.Context, conn *conn) error {
	replaced, err := cn.joinGroup(ctx, conn)
	if err == nil && replaced {
		return errReplacedOnConnect
	}
	return err
}

// joinGroup joins the group (creating it if missing) and reads the topic's identity; it
// reports whether that identity is not the one known (the topic was replaced).
func (cn *Consumer) joinGroup(ctx context.Context, conn *conn) (bool, error) {
	req := wire.JoinConsumerGroupRequest{Stream: cn.cfg.Stream, Topic: cn.cfg.Topic, Group: cn.group}
	_, err := cn.c.onConn(ctx, conn, req)
	if errors.Is(err, wire.ErrConsumerGroupIDNotFound) {
		_, err = cn.c.onConn(ctx, conn, wire.CreateConsumerGroupRequest{Stream: cn.cfg.Stream, Topic: cn.cfg.Topic, Name: cn.cfg.Group})
		if err == nil || errors.Is(err, wire.ErrConsumerGroupNameAlreadyExists) {
			_, err = cn.c.onConn(ctx, conn, req)
		}
	}
	if err != nil {
		return false, fmt.Errorf("join group %q: %w", cn.cfg.Group, err)
	}
	id, err := cn.readTopic(ctx, conn)
	if err != nil {
		return false, fmt.Errorf("read the topic of group %q: %w", cn.cfg.Group, err)
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	cn.needSync = true
	return cn.noteTopicLocked(id), nil
}

// sync asks the server for the assignment and applies it; a "not a member" answer
// rejoins once. Called holding cn.op. It reads the group's stored offset of each
// partition newly assigned and, when the group's generation changed, of each partition
// kept, so that apply can tell a partition that was owned by another member in between
// (its stored offset moved under this member) from one that stayed ours.
func (cn *Consumer) sync(ctx context.Context) error {
	s, err := cn.c.syncOn(ctx, cn.link, cn.cfg.Stream, cn.cfg.Topic, cn.group)
	if errors.Is(err, wire.ErrConsumerGroupMemberNotFound) {
		conn, gerr := cn.link.get(ctx)
		if gerr != nil {
			return gerr
		}
		if _, err := cn.joinGroup(ctx, conn); err != nil {
			return err
		}
		s, err = cn.c.syncOn(ctx, cn.link, cn.cfg.Stream, cn.cfg.Topic, cn.group)
	}
	if err != nil {
		return err
	}
	parts := slices.Clone(s.Partitions)
	slices.Sort(parts)
	parts = slices.Compact(parts)
	cn.mu.Lock()
	genChanged := s.Generation != cn.serverGen
	var toRead []uint32
	for _, p := range parts {
		if cn.parts[p] == nil || genChanged {
			toRead = append(toRead, p)
		}
	}
	cn.mu.Unlock()
	reads := make(map[uint32]storedRead, len(toRead))
	for _, p := range toRead {
		r, err := cn.readStored(ctx, p)
		if err != nil {
			return fmt.Errorf("read stored offset of partition %d: %w", p, err)
		}
		reads[p] = r
	}
	cn.apply(parts, s.Generation, reads, s.epoch)
	return nil
}

// readStored reads the group's stored offset of partition p on the member connection.
func (cn *Consumer) readStored(ctx context.Context, p uint32) (storedRead, error) {
	o, found, err := cn.c.getOffset(ctx, cn.link, wire.Consumer{Kind: wire.ConsumerGroup, ID: cn.group}, cn.cfg.Stream, cn.cfg.Topic, p)
	if err != nil {
		return storedRead{}, err
	}
	return storedRead{offset: o.StoredOffset, found: found}, nil
}

// apply installs a new assignment (sorted, unique). A partition gets a new partState
// when it is newly assigned, or when it was kept but its stored offset is not what this
// member knows (lost and regained); the next report tells the caller.
func (cn *Consumer) apply(parts []uint32, serverGen uint64, reads map[uint32]storedRead, epoch uint64) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	cn.syncEpoch, cn.needSync, cn.lastSync, cn.serverGen = epoch, false, time.Now(), serverGen
	next := make(map[uint32]*partState, len(parts))
	changed := false
	for _, p := range parts {
		st := cn.parts[p]
		if r, ok := reads[p]; ok {
			if st != nil && !st.matches(r) {
				cn.c.cfg.logger.Warn("iggy: partition was owned by another member since the last sync; starting it afresh",
					"group", cn.cfg.Group, "partition", p, "stored", r.offset, "known", st.stored)
				st = nil
			}
			if st == nil {
				st = &partState{stored: r.offset, storedKnown: r.found}
				changed = true
			}
		}
		next[p] = st
	}
	for p, st := range cn.parts {
		if next[p] != st {
			cn.retireLocked(p, st)
			changed = true
		}
	}
	cn.parts, cn.assigned = next, parts
	if changed || cn.gen == 0 {
		cn.changedLocked()
	}
}

// retireLocked ends assignment st of partition p (cn.mu held): its floor stays for
// StoreOffset (a revoked partition's last offsets may still be stored), and its pause
// ends with it (a later assignment starts unpaused).
func (cn *Consumer) retireLocked(p uint32, st *partState) {
	cn.former[p] = st
	delete(cn.paused, p)
}

// changedLocked records a change of the owned partitions (cn.mu held): a new local
// generation, to be reported by the next Poll, which it wakes.
func (cn *Consumer) changedLocked() {
	cn.gen++
	cn.dirty = true
	cn.signal()
}

// acquire takes cn.op, giving up when ctx ends or the Consumer closes.
func (cn *Consumer) acquire(ctx context.Context) error {
	select {
	case cn.op <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-cn.ctx.Done():
		return ErrClosed
	}
}

func (cn *Consumer) releaseOp() { <-cn.op }

// sinceSync returns the time since the last successful sync.
func (cn *Consumer) sinceSync() time.Duration {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return time.Since(cn.lastSync)
}

func (cn *Consumer) signal() {
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}

// member re-syncs the assignment every syncEvery (a request, so it is also the
// keepalive), independent of Poll but never during one of its round trips; a tick is
// skipped when a sync (e.g. by Poll) completed within the last half interval.
func (cn *Consumer) member() {
	defer cn.c.wg.Done()
	defer close(cn.hbDone)
	every := cn.c.cfg.syncEvery()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-cn.ctx.Done():
			return
		case <-t.C:
		}
		if cn.sinceSync() < every/2 {
			continue
		}
		ctx, cancel := context.WithTimeout(cn.ctx, cn.c.cfg.timeout)
		err := cn.acquire(ctx)
		if err == nil {
			if cn.sinceSync() >= every/2 {
				err = cn.sync(ctx)
			}
			cn.releaseOp()
		}
		if err != nil && cn.ctx.Err() == nil {
			cn.c.cfg.logger.Warn("iggy: consumer assignment sync failed", "group", cn.cfg.Group, "err", err)
		}
		cancel()
	}
}
