package connect

import (
	"fmt"
	"sync"

	"github.com/ferryio/ferry/sdk"
)

// registry maps (instance, stream, topic, partition) to the partition's commit tracker.
//
// Entries are added when a topic consumer of a sink instance first sees a partition after
// its assignment, and removed on revocation and at stop; a removed tracker is closed, so a
// commit that raced with the removal is rejected too. Safe for concurrent use; no method
// blocks on anything but the registry's and a tracker's mutex.
type registry struct {
	mu sync.RWMutex
	m  map[partitionKey]*tracker
}

func newRegistry() *registry { return &registry{m: map[partitionKey]*tracker{}} }

// add registers t under its key. A live entry under the same key is a programming error.
func (r *registry) add(t *tracker) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[t.key]; dup {
		return fmt.Errorf("commit registry: %s registered twice", t.key)
	}
	r.m[t.key] = t
	return nil
}

// lookup returns the live tracker of key.
func (r *registry) lookup(key partitionKey) (*tracker, bool) {
	r.mu.RLock()
	t, ok := r.m[key]
	r.mu.RUnlock()
	return t, ok
}

// remove deletes key's entry and closes its tracker; it returns the tracker (nil if none)
// so the caller can write what is still pending.
func (r *registry) remove(key partitionKey) *tracker {
	r.mu.Lock()
	t := r.m[key]
	delete(r.m, key)
	r.mu.Unlock()
	if t != nil {
		t.close()
	}
	return t
}

// len is the number of live entries.
func (r *registry) len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.m)
}

// commit routes one commit of a sink instance. It never blocks.
func (r *registry) commit(instance uint32, p sdk.Partition, offset uint64, c *Counters) error {
	t, ok := r.lookup(partitionKey{instance, p})
	if !ok {
		if c != nil {
			c.CommitsUnknownPartition.Add(1)
		}
		return fmt.Errorf("%w: %s offset %d", sdk.ErrCommitUnknownPartition, partitionKey{instance, p}, offset)
	}
	return t.commit(offset)
}

// committer returns the sdk.Committer of one sink instance.
func (r *registry) committer(instance uint32, c *Counters) sdk.Committer {
	return committer{r: r, instance: instance, counters: c}
}

// committer is a sink instance's sdk.Committer: a small value, safe to copy and to call
// from any goroutine (including a native plugin's thread through connect/plugin).
type committer struct {
	r        *registry
	instance uint32
	counters *Counters
}

// Commit implements sdk.Committer.
func (c committer) Commit(p sdk.Partition, offset uint64) error {
	return c.r.commit(c.instance, p, offset, c.counters)
}
