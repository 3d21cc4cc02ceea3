package iggy

import (
	"context"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
)

// A Consumer's poll runs on its own goroutine (a pollTask) so that Poll can return when
// its ctx ends without abandoning a request whose reply carries a batch: the task
// finishes the round trip (bounded by the request timeout and the Consumer's life),
// records the outcome under cn.mu (a batch becomes cn.kept), and only then releases
// cn.op, so syncs still never overlap a poll and an assignment never changes while a
// poll reply is handled.

// pollTask is one poll in flight.
type pollTask struct {
	done chan struct{} // closed when the outcome is recorded and cn.op released
	wait time.Duration // without a batch or error: -1 (go on at once)
	err  error         // a failed poll (wrapped)
	// rewound: the poll found its partition gone back (rewind.go); the group's stored
	// offset of it is deleted before cn.op is released.
	rewound bool
}

// launch starts polling pk (cn.op held; the task releases it).
func (cn *Consumer) launch(pk picked) (*pollTask, error) {
	q := wire.PollMessagesRequest{
		Consumer:   wire.Consumer{Kind: wire.ConsumerGroup, ID: cn.group},
		Stream:     cn.cfg.Stream,
		Topic:      cn.cfg.Topic,
		Partition:  wire.PartitionID(pk.p),
		Strategy:   pk.strategy,
		Count:      cn.cfg.BatchSize,
		AutoCommit: cn.cfg.AutoCommit,
	}
	if pk.inline {
		q.Count++ // the overlap message, dropped after the check
	}
	t := &pollTask{done: make(chan struct{}), wait: -1}
	cn.mu.Lock()
	if cn.closed { // checked under cn.mu: Close has not yet waited for the Client's goroutines
		cn.mu.Unlock()
		return nil, cn.pollErr(-1, ErrClosed)
	}
	cn.task = t
	cn.c.wg.Add(1)
	cn.mu.Unlock()
	go func() {
		defer cn.c.wg.Done()
		cn.runPoll(t, pk, &q)
	}()
	return t, nil
}

// runPoll performs the poll of t and records its outcome.
func (cn *Consumer) runPoll(t *pollTask, pk picked, q *wire.PollMessagesRequest) {
	defer close(t.done)
	defer cn.releaseOp()
	p, st := pk.p, pk.st
	defer func() {
		if t.rewound {
			ctx, cancel := context.WithTimeout(cn.ctx, cn.c.cfg.timeout)
			cn.clearStored(ctx, p)
			cancel()
		}
	}()
	sent := time.Now()
	b, head, epoch, err := cn.c.poll(cn.ctx, cn.link, q)
	var check *pollBuf // the mark's message, polled after an idle partition brought messages
	var checkHead wire.PollReply
	if err == nil && pk.mark.set && !pk.inline && len(b.msgs) > 0 && head.PartitionID == p {
		cq := *q
		cq.Strategy, cq.Count = wire.PollOffset(pk.mark.offset), 1
		var cerr error
		if check, checkHead, _, cerr = cn.c.poll(cn.ctx, cn.link, &cq); cerr != nil {
			cn.c.putBuf(b)
			b, err = nil, cerr
		}
	}
	if check != nil {
		defer cn.c.putBuf(check)
	}
	if err == nil && cn.pollHook != nil && len(b.msgs) > 0 && (!pk.inline || b.msgs[len(b.msgs)-1].Offset > pk.mark.offset) {
		cn.pollHook(p)
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	cn.task = nil
	if err != nil {
		cn.needSync = true
		t.err = cn.pollErr(int64(p), err)
		return
	}
	if epoch != cn.syncEpoch {
		cn.needSync = true // answered on a login not synced yet: resync, but keep the data
	}
	switch {
	case head.PartitionID == wire.ResyncPartition: // not ours (any more): nothing was polled
		cn.needSync = true
		cn.c.putBuf(b)
		return
	case head.PartitionID != p:
		cn.needSync = true
		cn.c.cfg.logger.Warn("iggy: poll reply for another partition, ignored", "group", cn.cfg.Group, "asked", p, "got", head.PartitionID)
		cn.c.putBuf(b)
		return
	}
	if pk.life != cn.incarnation {
		cn.c.putBuf(b) // polled from the old topic before the member found it replaced
		return
	}
	owned := cn.parts[p] == st // always, since syncs wait for cn.op; kept as a guard
	msgs := b.msgs
	if pk.mark.set && owned && st.seeks == pk.seeks && !cn.closed {
		var why string
		current := head.CurrentOffset
		switch {
		case pk.inline:
			msgs, why = overlap(pk.mark, current, msgs)
		case check != nil:
			current = max(current, checkHead.CurrentOffset)
			_, why = overlap(pk.mark, checkHead.CurrentOffset, check.msgs)
		case current < pk.mark.offset: // an empty reply from next
			_, why = overlap(pk.mark, current, nil)
		}
		if why != "" {
			cn.rewindLocked(p, st, current, why)
			cn.c.putBuf(b)
			t.rewound = true
			return
		}
	}
	if pk.inline && owned {
		st.checkDue = time.Now().Add(idleCheckEvery)
	}
	if len(msgs) == 0 {
		if owned {
			st.emptyUntil = time.Now().Add(cn.cfg.PollInterval)
			st.streaming = false
		}
		cn.c.putBuf(b)
		return
	}
	if cn.closed || (owned && st.seeks != pk.seeks) {
		cn.c.putBuf(b) // closed, or the caller moved the position meanwhile (Seek)
		return
	}
	last := msgs[len(msgs)-1].Offset
	if owned {
		st.prev = st.mark
		st.next, st.hasPos, st.mark, st.streaming = last+1, true, markOf(&msgs[len(msgs)-1]), true
		if pk.strategy.Kind == wire.PollingNext && st.storedKnown && msgs[0].Offset <= st.stored {
			// The group's stored offset went below what the member read at assignment
			// (a purge cleared it meanwhile): it is no floor for this assignment's stores.
			st.storedKnown, st.unsureSet = false, false
		}
	}
	if cn.cfg.AutoCommit && (!st.storedKnown || last > st.stored) {
		st.stored, st.storedKnown = last, true // the server stored it with the poll
	}
	b.batch = Batch{Partition: p, CurrentOffset: head.CurrentOffset, Sent: sent, Messages: msgs, buf: b, c: cn.c}
	cn.kept = b
}

// collect waits for t and delivers its batch; if ctx ends first it returns ctx's error
// and leaves t running (its batch will be kept for the next Poll).
func (cn *Consumer) collect(ctx context.Context, t *pollTask) (*Batch, time.Duration, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		cn.mu.Lock()
		cn.outlived++
		cn.mu.Unlock()
		return nil, 0, cn.pollErr(-1, ctx.Err())
	}
	if t.err != nil {
		return nil, 0, t.err
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if b := cn.deliverLocked(); b != nil {
		return b, 0, nil
	}
	return nil, t.wait, nil
}

// resume starts a Poll call: it waits for a poll an earlier call left in flight and
// returns the batch kept from it, if any (changes made since that poll are reported by
// the next Poll call, after it). Otherwise (nil, nil): Poll goes on, reporting first.
func (cn *Consumer) resume(ctx context.Context) (*Batch, error) {
	cn.mu.Lock()
	t := cn.task
	cn.mu.Unlock()
	if t != nil {
		select {
		case <-t.done:
		case <-ctx.Done():
			return nil, cn.pollErr(-1, ctx.Err())
		case <-cn.ctx.Done():
			return nil, cn.pollErr(-1, ErrClosed)
		}
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.deliverLocked(), nil
}

// deliverLocked hands out the kept batch, if any (cn.mu held).
func (cn *Consumer) deliverLocked() *Batch {
	b := cn.kept
	if b == nil {
		return nil
	}
	cn.kept = nil
	return &b.batch
}
