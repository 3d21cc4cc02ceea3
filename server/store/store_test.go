package store

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.DiscardHandler)

// testOpts are options for a test store; PBKDF2 is cheap so tests stay fast.
func testOpts(dir string, fs vfs.FS) Options {
	return Options{Dir: dir, FS: fs, Logger: quiet, PasswordIterations: 1}
}

// openMem opens a store on a fresh in-memory file system.
func openMem(t testing.TB) *Store {
	t.Helper()
	return mustOpen(t, testOpts("db", vfs.NewMem()))
}

func mustOpen(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open(%s): %v", o.Dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func must[T any](t testing.TB) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error = %v, want %v", err, want)
	}
}

// fakeBatch builds a batch shaped like an Iggy one: a 64-byte header with
// base_offset at 8, base_timestamp at 16 and message_count at 48, then
// payload bytes derived from seed.
func fakeBatch(count uint32, payload int, seed byte) []byte {
	b := make([]byte, 64+payload)
	binary.LittleEndian.PutUint32(b[48:], count)
	for i := 64; i < len(b); i++ {
		b[i] = seed + byte(i)
	}
	return b
}

// stamper stamps base offset and timestamp into a fakeBatch.
func stamper(data []byte) StampFunc {
	return func(base, ts uint64) ([]byte, error) {
		binary.LittleEndian.PutUint64(data[8:], base)
		binary.LittleEndian.PutUint64(data[16:], ts)
		return data, nil
	}
}

// setupTopic creates stream "s" and topic "t" with n partitions.
func setupTopic(t testing.TB, s *Store, n uint32) Topic {
	t.Helper()
	st := must[Stream](t)(s.CreateStream("s"))
	return must[Topic](t)(s.CreateTopic(st.ID, n, TopicConfig{Name: "t"}))
}

func TestOpenNeedsDir(t *testing.T) {
	_, err := Open(Options{})
	if err == nil {
		t.Fatal("Open with empty Dir succeeded")
	}
}

func TestCloseIdempotentAndClosedErrors(t *testing.T) {
	s := openMem(t)
	tp := setupTopic(t, s, 1)
	check(t, s.Close())
	check(t, s.Close())
	var nilStore *Store
	check(t, nilStore.Close())
	k := PartitionKey{tp.StreamID, tp.ID, 0}
	_, err := s.CreateStream("x")
	wantErr(t, err, ErrClosed)
	_, err = s.Read(k, 0, 1)
	wantErr(t, err, ErrClosed)
	_, err = s.AppendFunc(k, 1, stamper(fakeBatch(1, 1, 0)))
	wantErr(t, err, ErrClosed)
	_, err = s.Streams()
	wantErr(t, err, ErrClosed)
	wantErr(t, s.Sync(), ErrClosed)
}
