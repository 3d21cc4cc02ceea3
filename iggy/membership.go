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
// events that report assignment changes, the lock-step slot shared by polls and syncs, and
// the member goroutine that keeps the member alive and its assignment fresh.

// join is the member link's onConnect: join the group, creating it if missing.
func (cn *Consumer) join(ctx context.Context, conn *conn) error {
	req := wire.JoinConsumerGroupRequest{Stream: cn.cfg.Stream, Topic: cn.cfg.Topic, Group: cn.group}
	_, err := cn.c.onConn(ctx, conn, req)
	if errors.Is(err, wire.ErrConsumerGroupIDNotFound) {
		_, err = cn.c.onConn(ctx, conn, wire.CreateConsumerGroupRequest{Stream: cn.cfg.Stream, Topic: cn.cfg.Topic, Name: cn.cfg.Group})
		if err == nil || errors.Is(err, wire.ErrConsumerGroupNameAlreadyExists) {
			_, err = cn.c.onConn(ctx, conn, req)
		}
	}
	if err != nil {
		return fmt.Errorf("join group %q: %w", cn.cfg.Group, err)
	}
	cn.mu.Lock()
	cn.needSync = true
	cn.mu.Unlock()
	return nil
}

// sync asks the server for the assignment and applies it; a "not a member" answer
// rejoins once.
func (cn *Consumer) sync(ctx context.Context) error {
	s, err := cn.c.syncOn(ctx, cn.link, cn.cfg.Stream, cn.cfg.Topic, cn.group)
	if errors.Is(err, wire.ErrConsumerGroupMemberNotFound) {
		conn, gerr := cn.link.get(ctx)
		if gerr != nil {
			return gerr
		}
		if err := cn.join(ctx, conn); err != nil {
			return err
		}
		s, err = cn.c.syncOn(ctx, cn.link, cn.cfg.Stream, cn.cfg.Topic, cn.group)
	}
	if err != nil {
		return err
	}
	cn.apply(s.Partitions, s.epoch)
	return nil
}

// apply installs a new assignment and reports the change.
func (cn *Consumer) apply(parts []uint32, epoch uint64) {
	parts = slices.Clone(parts)
	slices.Sort(parts)
	parts = slices.Compact(parts)
	cn.mu.Lock()
	defer cn.mu.Unlock()
	cn.syncEpoch, cn.needSync, cn.lastSync = epoch, false, time.Now()
	var ev AssignmentEvent
	for _, p := range cn.assigned {
		if _, ok := slices.BinarySearch(parts, p); !ok {
			ev.Revoked = append(ev.Revoked, p)
			delete(cn.parts, p)
		}
	}
	for _, p := range parts {
		if _, ok := cn.parts[p]; !ok {
			ev.Assigned = append(ev.Assigned, p)
			cn.parts[p] = &partState{}
		}
	}
	cn.assigned = parts
	if len(ev.Assigned)+len(ev.Revoked) == 0 && cn.gen > 0 {
		return
	}
	cn.gen++
	ev.Generation = cn.gen
	if cn.kept != nil || (cn.outside && (len(cn.deferred) > 0 || slices.Contains(ev.Revoked, cn.held))) {
		cn.deferred = append(cn.deferred, ev) // reported by the next Poll
	} else {
		cn.emitLocked(ev)
	}
	cn.signal()
}

// emitLocked reports ev (cn.mu held).
func (cn *Consumer) emitLocked(ev AssignmentEvent) {
	if cn.closed {
		return
	}
	select {
	case cn.events <- ev:
	default:
		cn.c.cfg.logger.Warn("iggy: consumer events channel full, event dropped", "group", cn.cfg.Group, "generation", ev.Generation)
	}
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
