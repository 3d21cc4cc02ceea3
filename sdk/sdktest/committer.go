// Package sdktest is the test kit for Go connectors, Ferry's own and anyone's: a
// [Committer] that judges a sink's commits by the runtime's rules, the environments a
// connector is opened with, messages to feed it, and drivers ([SinkHarness],
// [SourceHarness]) that run a connector against its real target through assignments,
// rebalances and a crash at every step, then check the guarantee it states with a reader
// the test supplies.
//
// It imports only the sdk: a connector's tests need nothing of the runtime.
package sdktest

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ferryio/ferry/sdk"
)

// Committer is a [sdk.Committer] that applies the runtime's rules, so a sink tested with
// it meets the same answers as under `ferry run`: a commit is valid only for a partition
// the sink owns, for an offset it was given ([Committer.Deliver]) and above what is
// already committed; anything else is refused with the runtime's error
// ([sdk.ErrCommitUnknownPartition], [sdk.ErrCommitOutOfRange], [sdk.ErrCommitStale]).
// It records every commit and every refusal. Safe for concurrent use.
type Committer struct {
	mu      sync.Mutex
	parts   map[sdk.Partition]*owned
	commits []Commit
	refused []Commit
	changed chan struct{} // closed and replaced at every commit
}

// Commit is one commit a sink made, with the runtime's answer.
type Commit struct {
	Partition sdk.Partition
	Offset    uint64
	Err       error
}

type owned struct {
	next      uint64 // the first offset not delivered yet
	done      uint64 // the first offset not committed (offset + 1 of the last commit)
	committed bool
}

// NewCommitter returns a Committer that owns no partition yet.
func NewCommitter() *Committer {
	return &Committer{parts: map[sdk.Partition]*owned{}, changed: make(chan struct{})}
}

// Assign makes p the sink's from offset from: everything before it counts as done (as
// when the runtime resumes a partition from its stored offset or a seek).
func (c *Committer) Assign(p sdk.Partition, from uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parts[p] = &owned{next: from, done: from}
}

// Revoke takes p away: its commits are refused as unknown until it is assigned again.
func (c *Committer) Revoke(p sdk.Partition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.parts, p)
}

// RevokeAll takes every partition away (the sink stopped, or crashed).
func (c *Committer) RevokeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.parts = map[sdk.Partition]*owned{}
}

// Deliver records that msgs of partition p were handed to the sink (the runtime's
// "delivered"). A partition not assigned yet is assigned from the first of them.
func (c *Committer) Deliver(p sdk.Partition, msgs []sdk.ConsumedMessage) {
	if len(msgs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.parts[p]
	if !ok {
		o = &owned{next: msgs[0].Offset, done: msgs[0].Offset}
		c.parts[p] = o
	}
	if last := msgs[len(msgs)-1].Offset; last+1 > o.next {
		o.next = last + 1
	}
}

// Commit implements [sdk.Committer] with the runtime's rules.
func (c *Committer) Commit(p sdk.Partition, offset uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	o, ok := c.parts[p]
	switch {
	case !ok:
		err = fmt.Errorf("%w: stream %d topic %d partition %d", sdk.ErrCommitUnknownPartition, p.StreamID, p.TopicID, p.PartitionID)
	case offset >= o.next:
		err = fmt.Errorf("%w: offset %d, delivered up to %d", sdk.ErrCommitOutOfRange, offset, int64(o.next)-1)
	case offset+1 <= o.done:
		err = fmt.Errorf("%w: offset %d, committed up to %d", sdk.ErrCommitStale, offset, int64(o.done)-1)
	}
	rec := Commit{Partition: p, Offset: offset, Err: err}
	if err != nil {
		c.refused = append(c.refused, rec)
		return err
	}
	o.done, o.committed = offset+1, true
	c.commits = append(c.commits, rec)
	close(c.changed)
	c.changed = make(chan struct{})
	return nil
}

// Committed returns the last offset committed for p while it was owned, and whether
// there was one since it was assigned.
func (c *Committer) Committed(p sdk.Partition) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.parts[p]
	if !ok || !o.committed {
		return 0, false
	}
	return o.done - 1, true
}

// Done returns the first offset of p not committed (what the runtime would resume from:
// the assigned offset when nothing was committed since), and whether p is owned.
func (c *Committer) Done(p sdk.Partition) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.parts[p]
	if !ok {
		return 0, false
	}
	return o.done, true
}

// Commits returns every accepted commit, in order.
func (c *Committer) Commits() []Commit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Commit(nil), c.commits...)
}

// Refused returns every refused commit, in order, with the runtime's error.
func (c *Committer) Refused() []Commit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Commit(nil), c.refused...)
}

// OutOfRange returns the refused commits that the runtime would call a bug of the sink:
// offsets never delivered. A sink's test usually asserts there are none.
func (c *Committer) OutOfRange() []Commit {
	var out []Commit
	for _, r := range c.Refused() {
		if isOutOfRange(r.Err) {
			out = append(out, r)
		}
	}
	return out
}

// Owned lists the partitions owned, sorted.
func (c *Committer) Owned() []sdk.Partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]sdk.Partition, 0, len(c.parts))
	for p := range c.parts {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}

// WaitCommitted waits until p's committed offset is at least offset (commits made in the
// background: a flush timer, an upload) and fails tb if it is not after Patience; it
// then requires exactly offset, so a commit past it fails too.
func (c *Committer) WaitCommitted(tb TB, p sdk.Partition, offset uint64) {
	tb.Helper()
	deadline := time.NewTimer(Patience)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		o, ok := c.parts[p]
		got, have := uint64(0), ok && o.committed
		if have {
			got = o.done - 1
		}
		ch := c.changed
		c.mu.Unlock()
		if have && got >= offset {
			if got != offset {
				tb.Fatalf("partition %d committed %d, want %d", p.PartitionID, got, offset)
			}
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			tb.Fatalf("timed out after %v waiting for partition %d to commit %d (committed: %d, %v)", Patience, p.PartitionID, offset, got, have)
			return
		}
	}
}

// Patience bounds every wait of this package.
var Patience = 30 * time.Second

// TB is the part of testing.TB the kit uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	Name() string
}

func less(a, b sdk.Partition) bool {
	if a.StreamID != b.StreamID {
		return a.StreamID < b.StreamID
	}
	if a.TopicID != b.TopicID {
		return a.TopicID < b.TopicID
	}
	return a.PartitionID < b.PartitionID
}

func isOutOfRange(err error) bool { return errors.Is(err, sdk.ErrCommitOutOfRange) }
