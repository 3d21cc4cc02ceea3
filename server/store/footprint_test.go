//go:build unix

package store

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Iggy's message header is 64 bytes; the quickstart sends 200 batches of 1000
// messages with 100-byte alphanumeric payloads (examples/quickstart).
const (
	quickstartBatches  = 200
	quickstartPerBatch = 1000
	quickstartPayload  = 100
	messageHeaderSize  = 64
)

// quickstartBatch builds an Iggy-shaped batch of n messages: a 64-byte batch
// header, then per message a 64-byte header and a random alphanumeric payload.
func quickstartBatch(rng *rand.Rand, n, payload int) []byte {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 64, 64+n*(messageHeaderSize+payload))
	binary.LittleEndian.PutUint32(b[48:], uint32(n))
	for i := range n {
		h := make([]byte, messageHeaderSize)
		binary.LittleEndian.PutUint64(h[0:], rng.Uint64()) // checksum
		binary.LittleEndian.PutUint64(h[8:], rng.Uint64()) // id
		binary.LittleEndian.PutUint64(h[24:], uint64(i))   // offset delta
		binary.LittleEndian.PutUint32(h[56:], uint32(payload))
		b = append(b, h...)
		for range payload {
			b = append(b, alnum[rng.IntN(len(alnum))])
		}
	}
	return b
}

// TestQuickstartFootprint writes the quickstart's data (200,000 messages of
// 100 bytes) with the default options, closes the store and fails if the
// directory takes more than twice the bytes of the messages (payload plus
// message header) on disk. Issue 11: the store used to take ~490 MB for it.
func TestQuickstartFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 33 MB")
	}
	dir := t.TempDir()
	s, err := Open(testOpts(dir, nil))
	if err != nil {
		t.Fatal(err)
	}
	tp := setupTopic(t, s, 1)
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	rng := rand.New(rand.NewPCG(1, 2))
	for range quickstartBatches {
		data := quickstartBatch(rng, quickstartPerBatch, quickstartPayload)
		if _, err := s.AppendFunc(k, quickstartPerBatch, stamper(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	held := int64(quickstartBatches * quickstartPerBatch * (messageHeaderSize + quickstartPayload))
	// The disk reserve (DiskReserve, fault.go) is a fixed 64 MiB, not a cost of the data.
	if err := os.Remove(filepath.Join(dir, ballastName)); err != nil {
		t.Fatal(err)
	}
	used := diskUsage(t, dir)
	t.Logf("messages %d bytes, on disk %d bytes: %.2f×", held, used, float64(used)/float64(held))
	if used > 2*held {
		t.Fatalf("on disk %d bytes for %d bytes of messages: %.2f×, want at most 2×", used, held, float64(used)/float64(held))
	}
}

// TestLogsAreNotPreallocated guards the WAL tuning: after memtables were
// flushed and their logs recycled, no log file holds more blocks than it was
// written (a preallocated one holds 1.1 × MemTableSize, 72 MB).
func TestLogsAreNotPreallocated(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOpts(dir, nil))
	tp := setupTopic(t, s, 1)
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 4 {
		for range 10 {
			data := quickstartBatch(rng, quickstartPerBatch, quickstartPayload)
			if _, err := s.AppendFunc(k, quickstartPerBatch, stamper(data)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Flush(); err != nil {
			t.Fatalf("flush %d: %v", round, err)
		}
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("log files %v: %v", logs, err)
	}
	for _, l := range logs {
		fi, err := os.Stat(l)
		if err != nil {
			t.Fatal(err)
		}
		if blocks := fi.Sys().(*syscall.Stat_t).Blocks * 512; blocks > fi.Size()+1<<20 {
			t.Fatalf("%s: %d bytes written, %d allocated", l, fi.Size(), blocks)
		}
	}
}
