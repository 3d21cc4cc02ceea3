package connect

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"
)

// fakeStore records stores and fails the first `fail` calls. (A store function is the
// consumer's Commit; the integration tests use the real one.)
type fakeStore struct {
	mu    sync.Mutex
	fail  int
	calls []storeCall
	ok    map[uint32]uint64
}

type storeCall struct {
	partition uint32
	offset    uint64
	failed    bool
}

func (s *fakeStore) store(_ context.Context, p uint32, off uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		s.calls = append(s.calls, storeCall{p, off, true})
		return errors.New("injected store failure")
	}
	s.calls = append(s.calls, storeCall{p, off, false})
	if s.ok == nil {
		s.ok = map[uint32]uint64{}
	}
	s.ok[p] = off
	return nil
}

func (s *fakeStore) get() ([]storeCall, map[uint32]uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[uint32]uint64{}
	for k, v := range s.ok {
		m[k] = v
	}
	return append([]storeCall(nil), s.calls...), m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCommitCoalescing: many commits between two flushes give one store of the highest.
func TestCommitCoalescing(t *testing.T) {
	fs := &fakeStore{}
	l := newCommitLoop(fs.store, time.Hour, Backoff{Initial: time.Millisecond, Max: time.Millisecond}, nil, quietLog, nil)
	tr := newTracker(testKey, nil, 0, l.wake)
	l.track(3, tr)
	tr.polledBatch(0, 99)
	tr.deliveredBatch(99)
	for _, off := range []uint64{3, 10, 57, 99} {
		if err := tr.commit(off); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.flush(context.Background(), l.snapshot()); err != nil {
		t.Fatal(err)
	}
	if err := l.flush(context.Background(), l.snapshot()); err != nil { // nothing pending: no store
		t.Fatal(err)
	}
	calls, _ := fs.get()
	if want := []storeCall{{3, 99, false}}; !reflect.DeepEqual(calls, want) {
		t.Fatalf("stores %v, want %v", calls, want)
	}
	if st := tr.state(); st.Committed != 99 || st.Pending != -1 {
		t.Fatalf("state %+v", st)
	}
}

// TestCommitStoreRetried: a failed store is retried with backoff and never forgotten; a
// higher commit that arrives while it fails supersedes it.
func TestCommitStoreRetried(t *testing.T) {
	fs := &fakeStore{fail: 3}
	c := new(Counters)
	l := newCommitLoop(fs.store, time.Hour, Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond}, c, quietLog, nil)
	tr := newTracker(testKey, c, 0, l.wake)
	tr.flushEach = true // after_consuming: flush right after each batch
	l.track(3, tr)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { l.run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	tr.polledBatch(0, 9)
	tr.resolve(0, 9)
	waitFor(t, "first failed store", func() bool { c, _ := fs.get(); return len(c) >= 1 })
	tr.polledBatch(10, 19)
	tr.resolve(10, 19)
	waitFor(t, "stored 19", func() bool { _, ok := fs.get(); return ok[3] == 19 })
	calls, _ := fs.get()
	if n := len(calls); n != 4 {
		t.Fatalf("%d store calls (%v), want 3 failed + 1 ok", n, calls)
	}
	for i, call := range calls[:3] {
		if !call.failed || (call.offset != 9 && call.offset != 19) {
			t.Fatalf("call %d = %+v", i, call)
		}
	}
	if last := calls[3]; last != (storeCall{3, 19, false}) {
		t.Fatalf("last store %+v, want partition 3 offset 19", last)
	}
	if s := c.Snapshot(); s.StoreErrors != 3 || s.Committed != 20 {
		t.Fatalf("counters %+v, want 3 store errors, 20 committed", s)
	}
}

// TestCommitFinalFlush: revocation writes what is pending with retries, after the entry was
// closed; later commits are rejected.
func TestCommitFinalFlush(t *testing.T) {
	fs := &fakeStore{fail: 2}
	l := newCommitLoop(fs.store, time.Hour, Backoff{Initial: time.Millisecond, Max: time.Millisecond}, nil, quietLog, nil)
	r := newRegistry()
	tr := newTracker(testKey, nil, 0, l.wake)
	if err := r.add(tr); err != nil {
		t.Fatal(err)
	}
	l.track(3, tr)
	tr.polledBatch(0, 9)
	tr.deliveredBatch(9)
	if err := tr.commit(7); err != nil {
		t.Fatal(err)
	}
	got := l.untrack(3)
	r.remove(got.key)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.flushFinal(ctx, map[uint32]*tracker{3: got}); err != nil {
		t.Fatal(err)
	}
	if _, ok := fs.get(); ok[3] != 7 {
		t.Fatalf("stored %v, want 7", ok)
	}
}

// TestCommitFinalFlushGivesUpAtDeadline: a store that never succeeds ends with an error when
// the shutdown budget is spent; nothing is claimed as committed.
func TestCommitFinalFlushGivesUpAtDeadline(t *testing.T) {
	fs := &fakeStore{fail: 1 << 30}
	l := newCommitLoop(fs.store, time.Hour, Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}, nil, quietLog, nil)
	tr := newTracker(testKey, nil, 0, nil)
	l.track(3, tr)
	tr.polledBatch(0, 9)
	tr.resolve(0, 9)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := l.flushFinal(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flushFinal = %v, want deadline exceeded", err)
	}
	if st := tr.state(); st.Committed != -1 || st.Pending != 9 {
		t.Fatalf("state %+v, want nothing committed, 9 pending", st)
	}
}

// TestCommitResumeAfterStore: a paused partition flushes on wake (not on the interval) and
// resumes once the stored offset brings it under max_uncommitted.
func TestCommitResumeAfterStore(t *testing.T) {
	fs := &fakeStore{}
	resumed := make(chan uint32, 1)
	l := newCommitLoop(fs.store, time.Hour, Backoff{Initial: time.Millisecond, Max: time.Millisecond}, nil, quietLog, func(p uint32) { resumed <- p })
	tr := newTracker(testKey, nil, 100, l.wake)
	l.track(3, tr)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { l.run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	if !tr.polledBatch(0, 99) {
		t.Fatal("not paused at 100")
	}
	tr.deliveredBatch(99)
	if err := tr.commit(99); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-resumed:
		if p != 3 {
			t.Fatalf("resumed partition %d", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not resumed")
	}
}
