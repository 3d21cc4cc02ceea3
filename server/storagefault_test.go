package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server"
	"github.com/ferryio/ferry/server/servertest"
)

// deleteLiveDir deletes the data directory of a running server: renamed away first, which
// takes it from the server's path in one step, then removed. A plain os.RemoveAll races the
// store's probe, which creates a file in the directory every 5 ms here, and failed
// "directory not empty" a few times in 200 runs under load; nothing can create a file in
// the renamed directory, since the store creates files by the path that is gone.
func deleteLiveDir(t *testing.T, dir string) {
	t.Helper()
	gone := dir + ".deleted"
	if err := os.Rename(dir, gone); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
}

// TestDataDirDeletedUnderServer is issue 14's vanished-data-dir defect (5 more sends
// were acknowledged, then a panic): once the probe finds the directory gone, sends
// answer 4006 CannotSaveMessagesToSegment, polls still serve what was acknowledged,
// the fault is reported, and Close does not hang.
func TestDataDirDeletedUnderServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := servertest.Start(t, servertest.WithDataDir(dir), servertest.WithConfig(func(c *server.Config) {
		c.StorageProbeInterval = 5 * time.Millisecond
	}))
	c := login(t, s)
	st, tp := setup(t, c, 1)
	c.send(st, tp, wire.ToPartition(0), "a", "b")
	deleteLiveDir(t, dir)
	testkit.WaitFor(t, "storage fault", func() bool { return s.StorageFault() != nil })
	if !strings.Contains(s.StorageFault().Error(), "data directory") {
		t.Fatalf("fault: %v", s.StorageFault())
	}
	body, err := wire.AppendSendMessages(nil, st, tp, wire.ToPartition(0), []wire.SendMessage{{Payload: []byte("c")}}, newClientID)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.roundTrip(c.header(wire.CodeSendMessages), body)
	if !errors.Is(err, wire.ErrCannotSaveMessagesToSegment) {
		t.Fatalf("send into a deleted data dir: %v, want 4006", err)
	}
	got := c.poll(wire.PollMessagesRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(1)}, Stream: st, Topic: tp, Partition: wire.PartitionID(0), Strategy: wire.PollOffset(0), Count: 10})
	if strings.Join(got.payloads, ",") != "a,b" {
		t.Fatalf("poll while faulted: %v", got.payloads)
	}
	c.must(wire.PingRequest{})
	_ = s.Close(t.Context()) // may report the missing directory; must return
}

// TestMissingDataDirOnRestart is issue 14's "the restart creates an empty dir with a
// fresh iggy/iggy root": a data dir a server used before that is missing on restart is
// an error, unless InitDataDir (--init) asks for an empty start.
func TestMissingDataDirOnRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := servertest.Start(t, servertest.WithDataDir(dir))
	c := login(t, s)
	st, tp := setup(t, c, 1)
	c.send(st, tp, wire.ToPartition(0), "a")
	closeServer(t, s)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_, err := server.Start(t.Context(), server.Config{Addr: "127.0.0.1:0", DataDir: dir, PasswordIterations: 1000})
	if !errors.Is(err, server.ErrDataDirMissing) || !strings.Contains(err.Error(), "--init") {
		t.Fatalf("restart on the missing dir: %v, want ErrDataDirMissing naming --init", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused start created the dir: %v", err)
	}
	fresh := servertest.Start(t, servertest.WithDataDir(dir), servertest.WithConfig(func(c *server.Config) { c.InitDataDir = true }))
	c2 := login(t, fresh)
	if _, found, err := wire.DecodeStreamDetails(c2.must(wire.GetStreamRequest{Stream: st})); found || err != nil {
		t.Fatalf("the --init start is not empty: found %v, %v", found, err)
	}
}

// TestOffsetStoreOnStorageFault is issue 22's duplicate storm at its source: a group
// member's offset store refused by a storage fault was answered 20 ResourceNotFound,
// which a member reads as "this partition is not yours": it dropped the partition and
// polled it again from the stored offset, for as long as the fault lasted. A storage
// fault answers 4006, from the test hook (Config.WriteFault) and from a real fault (the
// data dir deleted); a store of a partition the member does not own is still 20.
func TestOffsetStoreOnStorageFault(t *testing.T) {
	var faulted atomic.Bool
	dir := filepath.Join(t.TempDir(), "data")
	s := servertest.Start(t, servertest.WithDataDir(dir), servertest.WithWriteFault(func() error {
		if faulted.Load() {
			return errors.New("no space left on device (test fault)")
		}
		return nil
	}), servertest.WithConfig(func(c *server.Config) { c.StorageProbeInterval = 5 * time.Millisecond }))
	t.Cleanup(func() { faulted.Store(false) }) // before the server closes: its final sync is a write
	c := login(t, s)
	st, tp := setup(t, c, 1)
	c.send(st, tp, wire.ToPartition(0), "a", "b", "c")
	c.must(wire.CreateConsumerGroupRequest{Stream: st, Topic: tp, Name: "g"})
	c.must(wire.JoinConsumerGroupRequest{Stream: st, Topic: tp, Group: wire.NamedID("g")})
	store := func(offset uint64) wire.StoreConsumerOffsetRequest {
		return wire.StoreConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Offset: offset}
	}
	del := wire.DeleteConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(0)}
	stored := func() uint64 {
		info, found, err := wire.DecodeConsumerOffsetInfo(c.must(wire.GetConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(0)}))
		if err != nil || !found {
			t.Fatalf("stored offset: %+v found %t: %v", info, found, err)
		}
		return info.StoredOffset
	}
	c.must(store(0))

	faulted.Store(true)
	c.wantErr(store(1), wire.ErrCannotSaveMessagesToSegment)
	c.wantErr(del, wire.ErrCannotSaveMessagesToSegment)
	notOwned := store(1)
	notOwned.Partition = wire.PartitionID(7)
	c.wantErr(notOwned, wire.ErrResourceNotFound)
	c.wantErr(wire.StoreConsumerOffsetRequest{Consumer: groupOf("g"), Stream: st, Topic: tp, Partition: wire.PartitionID(0), Offset: 9}, wire.ErrInvalidOffset)
	if got := stored(); got != 0 {
		t.Fatalf("stored %d during the fault, want 0", got)
	}
	faulted.Store(false)
	c.must(store(1))
	if got := stored(); got != 1 {
		t.Fatalf("stored %d after the fault, want 1", got)
	}

	deleteLiveDir(t, dir)
	testkit.WaitFor(t, "storage fault", func() bool { return s.StorageFault() != nil })
	c.wantErr(store(2), wire.ErrCannotSaveMessagesToSegment)
	c.wantErr(del, wire.ErrCannotSaveMessagesToSegment)
	if got := stored(); got != 1 {
		t.Fatalf("stored %d with the data dir gone, want 1", got)
	}
	_ = s.Close(t.Context()) // may report the missing directory; must return
}
