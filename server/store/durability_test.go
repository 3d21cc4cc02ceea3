package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/ferryio/ferry/internal/testkit"
)

func TestReopenRecoversEverything(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncInterval} {
		t.Run(map[FsyncPolicy]string{FsyncAlways: "always", FsyncInterval: "interval"}[policy], func(t *testing.T) {
			dir := t.TempDir()
			o := testOpts(dir, nil)
			o.Fsync = policy
			s, err := Open(o)
			check(t, err)
			tp := setupTopic(t, s, 2)
			must[Stream](t)(s.CreateStream("other"))
			check(t, s.DeleteStream(1))
			must[Stream](t)(s.CreateStream("third"))
			k := PartitionKey{tp.StreamID, tp.ID, 1}
			appended := appendN(t, s, k, 3, 4)
			g0 := must[Group](t)(s.CreateGroup(tp.StreamID, tp.ID, "g0"))
			g1 := must[Group](t)(s.CreateGroup(tp.StreamID, tp.ID, "g1"))
			check(t, s.DeleteGroup(tp.StreamID, tp.ID, g1.ID))
			check(t, s.StoreConsumerOffset(k, Consumer{KindGroup, g0.ID}, 5))
			check(t, s.StoreConsumerOffset(k, Consumer{KindConsumer, 42}, 6))
			must[User](t)(s.CreateUser("alice", "pw", 1, []byte{9}))
			token, _, err := s.CreateToken(0, "x", 0) // alice got id 0 (no root here)
			check(t, err)
			topicBefore := must[Topic](t)(s.Topic(tp.StreamID, tp.ID))
			check(t, s.Close())

			s = mustOpen(t, o)
			if got := must[Topic](t)(s.Topic(tp.StreamID, tp.ID)); !reflect.DeepEqual(got, topicBefore) {
				t.Fatalf("topic after reopen %+v, want %+v", got, topicBefore)
			}
			if sts := must[[]Stream](t)(s.Streams()); len(sts) != 2 || sts[1].ID != 1 || sts[1].Name != "third" {
				t.Fatalf("streams after reopen %+v", sts)
			}
			st := must[PartitionStats](t)(s.Stats(k))
			if st != appended[1].Stats {
				t.Fatalf("stats after reopen %+v, want %+v", st, appended[1].Stats)
			}
			if a := appendN(t, s, k, 1)[0]; a.BaseOffset != 7 || a.BaseTimestamp < st.LastTimestamp {
				t.Fatalf("append after reopen = %+v", a)
			}
			if off, found, _ := s.ConsumerOffset(k, Consumer{KindGroup, g0.ID}); !found || off != 5 {
				t.Fatalf("group offset after reopen %d %v", off, found)
			}
			if off, found, _ := s.ConsumerOffset(k, Consumer{KindConsumer, 42}); !found || off != 6 {
				t.Fatalf("consumer offset after reopen %d %v", off, found)
			}
			if g := must[Group](t)(s.CreateGroup(tp.StreamID, tp.ID, "g2")); g.ID != 2 {
				t.Fatalf("group id after reopen %d, want 2 (never reused)", g.ID)
			}
			if u := must[User](t)(s.Authenticate("alice", "pw")); u.ID != 0 || !bytes.Equal(u.Permissions, []byte{9}) {
				t.Fatalf("user after reopen %+v", u)
			}
			if u := must[User](t)(s.AuthenticateToken(token, 1)); u.Username != "alice" {
				t.Fatalf("token after reopen -> %+v", u)
			}
		})
	}
}

func TestSecondOpenFailsLocked(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir, nil))
	for _, d := range []string{dir, dir + "/", filepath.Join(dir, ".")} {
		_, err := Open(testOpts(d, nil))
		wantErr(t, err, ErrLocked)
		if !strings.Contains(err.Error(), d) {
			t.Fatalf("error %q does not name the directory", err)
		}
	}
	check(t, s.Close())
	s2 := mustOpen(t, testOpts(dir, nil)) // released on Close
	check(t, s2.Close())

	fs := vfs.NewMem() // Pebble's lock on an in-memory FS
	m := mustOpen(t, testOpts("db", fs))
	_, err := Open(testOpts("db", fs))
	wantErr(t, err, ErrLocked)
	check(t, m.Close())
}

// verifyPartition checks that the partition holds exactly the batches
// gen(0..n-1) back to back, with counters that match, and returns n.
func verifyPartition(t *testing.T, s *Store, k PartitionKey, gen func(i int) (uint32, []byte)) int {
	t.Helper()
	r := must[ReadResult](t)(s.Read(k, 0, 1<<31))
	var next, bytesTotal uint64
	for i, b := range r.Batches {
		count, data := gen(i)
		stamped := bytes.Clone(data)
		binary.LittleEndian.PutUint64(stamped[8:], b.BaseOffset)
		binary.LittleEndian.PutUint64(stamped[16:], b.BaseTimestamp)
		if b.BaseOffset != next || b.Count != count || !bytes.Equal(b.Data, stamped) {
			t.Fatalf("batch %d: offset %d count %d (want offset %d count %d), data equal %v",
				i, b.BaseOffset, b.Count, next, count, bytes.Equal(b.Data, stamped))
		}
		next += uint64(count)
		bytesTotal += uint64(len(data))
	}
	if r.Stats.NextOffset != next || r.Stats.Messages != next || r.Stats.Bytes != bytesTotal {
		t.Fatalf("counters %+v disagree with %d stored batches (next %d, bytes %d)", r.Stats, len(r.Batches), next, bytesTotal)
	}
	return len(r.Batches)
}

func crashGen(i int) (uint32, []byte) {
	count := uint32(i%7 + 1)
	return count, fakeBatch(count, 50+i%300, byte(i))
}

// TestCrashKeepsSyncedWrites crashes a crashable in-memory FS while a writer
// appends, keeping a random half of the unsynced data, and checks that every
// append acknowledged (FsyncAlways) or synced (FsyncInterval) before the
// crash is there, and that what is there is whole: batches, index and
// counters agree, batch by batch.
func TestCrashKeepsSyncedWrites(t *testing.T) {
	for _, policy := range []FsyncPolicy{FsyncAlways, FsyncInterval} {
		t.Run(map[FsyncPolicy]string{FsyncAlways: "always", FsyncInterval: "interval"}[policy], func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			o := testOpts("db", fs)
			o.Fsync, o.FsyncInterval = policy, time.Hour // the test syncs by hand
			s := mustOpen(t, o)
			tp := setupTopic(t, s, 1)
			check(t, s.Sync())
			k := PartitionKey{tp.StreamID, tp.ID, 0}

			var durable atomic.Int64 // batches known durable
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					count, data := crashGen(i)
					if _, err := s.AppendFunc(k, count, stamper(bytes.Clone(data))); err != nil {
						t.Error(err)
						return
					}
					if policy == FsyncAlways {
						durable.Store(int64(i + 1))
					} else if i%5 == 4 {
						if err := s.Sync(); err != nil {
							t.Error(err)
							return
						}
						durable.Store(int64(i + 1))
					}
				}
			})
			rng := rand.New(rand.NewPCG(1, uint64(policy)))
			for round := 0; round < 8; round++ {
				testkit.WaitFor(t, fmt.Sprintf("%d appends synced", 20*(round+1)), func() bool { return durable.Load() >= int64(20*(round+1)) })
				before := durable.Load()
				crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng})
				c, err := Open(testOpts("db", crashed))
				check(t, err)
				n := verifyPartition(t, c, k, crashGen)
				if int64(n) < before {
					t.Fatalf("round %d: %d batches after crash, %d were durable", round, n, before)
				}
				t.Logf("round %d: %d durable before crash, %d recovered", round, before, n)
				check(t, c.Close())
			}
			close(stop)
			wg.Wait()
		})
	}
}

// TestCrashMetadataAtomic crashes after a metadata change acknowledged with
// FsyncAlways and checks it is fully there (stream, topic, partitions and
// counters), and that a delete is fully gone.
func TestCrashMetadataAtomic(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := mustOpen(t, testOpts("db", fs))
	tp := setupTopic(t, s, 3)
	k := PartitionKey{tp.StreamID, tp.ID, 2}
	appendN(t, s, k, 4)
	st2 := must[Stream](t)(s.CreateStream("doomed"))
	doomed := must[Topic](t)(s.CreateTopic(st2.ID, 2, TopicConfig{Name: "x"}))
	appendN(t, s, PartitionKey{doomed.StreamID, doomed.ID, 1}, 2)
	check(t, s.DeleteStream(st2.ID))
	must[[]Partition](t)(s.CreatePartitions(tp.StreamID, tp.ID, 2))
	rng := rand.New(rand.NewPCG(7, 7))
	for range 5 {
		c, err := Open(testOpts("db", fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng})))
		check(t, err)
		if got := partitionIDs(must[Topic](t)(c.Topic(tp.StreamID, tp.ID))); got != "[0 1 2 3 4]" {
			t.Fatalf("partitions after crash %s", got)
		}
		if sts := must[[]Stream](t)(c.Streams()); len(sts) != 1 {
			t.Fatalf("streams after crash %+v", sts)
		}
		if n := verifyPartition(t, c, k, func(int) (uint32, []byte) { return 4, fakeBatch(4, 100, 0) }); n != 1 {
			t.Fatalf("%d batches after crash", n)
		}
		check(t, c.Close())
	}
}

func TestIntervalSyncLoopRuns(t *testing.T) {
	fs := vfs.NewCrashableMem()
	o := testOpts("db", fs)
	o.Fsync, o.FsyncInterval = FsyncInterval, 5*time.Millisecond
	s := mustOpen(t, o)
	tp := setupTopic(t, s, 1)
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	appendN(t, s, k, 3)
	// Without any explicit Sync the loop makes the append durable.
	testkit.WaitFor(t, "the appends to be durable through the 5ms sync interval", func() bool {
		c, err := Open(testOpts("db", fs.CrashClone(vfs.CrashCloneCfg{})))
		check(t, err)
		st, err := c.Stats(k)
		check(t, c.Close())
		return err == nil && st.NextOffset == 3
	})
}

// TestCrashLosesOnlyUnsynced pins the FsyncInterval promise exactly: after a
// crash that keeps no unsynced data, the synced appends are all there and
// the unsynced ones are all gone; keeping a random part of the unsynced data
// yields a whole prefix.
func TestCrashLosesOnlyUnsynced(t *testing.T) {
	fs := vfs.NewCrashableMem()
	o := testOpts("db", fs)
	o.Fsync, o.FsyncInterval = FsyncInterval, time.Hour
	s := mustOpen(t, o)
	tp := setupTopic(t, s, 1)
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	for i := range 10 {
		count, data := crashGen(i)
		must[Appended](t)(s.AppendFunc(k, count, stamper(bytes.Clone(data))))
	}
	check(t, s.Sync())
	for i := 10; i < 20; i++ {
		count, data := crashGen(i)
		must[Appended](t)(s.AppendFunc(k, count, stamper(bytes.Clone(data))))
	}
	c := mustOpen(t, testOpts("db", fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})))
	if n := verifyPartition(t, c, k, crashGen); n != 10 {
		t.Fatalf("recovered %d batches, want exactly the 10 synced", n)
	}
	check(t, c.Close())
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10 {
		c := mustOpen(t, testOpts("db", fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rng})))
		if n := verifyPartition(t, c, k, crashGen); n < 10 || n > 20 {
			t.Fatalf("recovered %d batches, want 10..20", n)
		}
		check(t, c.Close())
	}
	check(t, s.Close()) // Close syncs
	c = mustOpen(t, testOpts("db", fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})))
	if n := verifyPartition(t, c, k, crashGen); n != 20 {
		t.Fatalf("after Close recovered %d batches, want 20", n)
	}
}
