package file

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ferryio/ferry/internal/testkit"
)

// fsizeChildEnv names the directory the child of TestWriteFailureTruncates works in.
const fsizeChildEnv = "FERRY_FILE_SINK_FSIZE_DIR"

// TestWriteFailureTruncates makes the kernel cut a batch write short, deterministically:
// a child process (this test binary, running TestWriteFailureChild) lowers its own
// RLIMIT_FSIZE into the middle of the second batch's second record, so write(2) writes
// part of the batch and then fails with EFBIG, as on a full disk.
func TestWriteFailureTruncates(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriteFailureChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fsizeChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestWriteFailureChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestWriteFailureChild is the child half of TestWriteFailureTruncates (skipped unless
// that test runs it). Batch 0..2 is written; with the file size limit inside the next
// batch, 3..5 fails twice with EFBIG and the file holds exactly 0..2 each time. Where the
// file can be made append-only, a third attempt's truncate fails too: the error says so,
// the sink appends nothing more, and reopening it drops the partial record. With the
// limit lifted the retry of 3..5 and then 6..7 succeed: every record once per delivery
// that wrote it, every line a record.
func TestWriteFailureChild(t *testing.T) {
	dir := os.Getenv(fsizeChildEnv)
	if dir == "" {
		t.Skip("the child process of TestWriteFailureTruncates")
	}
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit then fails with EFBIG instead of killing
	path := filepath.Join(dir, "out.jsonl")
	s := open(t, `{"path":"`+path+`"}`, nil)
	ctx := context.Background()
	if err := s.Consume(ctx, topic, part(0), bigMsgs(3000, 0, 1, 2)); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	recLen := uint64(len(before) / 3)
	limit := syscall.Rlimit{Cur: uint64(len(before)) + recLen + recLen/2, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		err := s.Consume(ctx, topic, part(0), bigMsgs(3000, 3, 4, 5))
		if got, rerr := os.ReadFile(path); rerr != nil || !bytes.Equal(got, before) {
			t.Fatalf("attempt %d: the file holds %d bytes (%v), want exactly the %d of records 0..2", attempt, len(got), rerr, len(before))
		}
		// The kernel wrote up to the limit (a record and a half), then refused; records
		// 3..5 are as long as 0..2.
		want := "(" + strconv.FormatUint(limit.Cur-uint64(len(before)), 10) + " of the batch's " + strconv.Itoa(len(before)) + " bytes written)"
		if !errors.Is(err, syscall.EFBIG) || !strings.Contains(err.Error(), want) {
			t.Fatalf("attempt %d past the size limit: %v, want EFBIG and %q", attempt, err, want)
		}
	}
	want := seq(0, 7)
	if appendOnly(t, path, true) {
		// The truncate fails too (an append-only file refuses it): the error says the file
		// now ends with a partial record, and the sink appends nothing more after it.
		err := s.Consume(ctx, topic, part(0), bigMsgs(3000, 3, 4, 5))
		if !errors.Is(err, syscall.EFBIG) || !strings.Contains(err.Error(), "failed too, so it ends with a partial record") {
			t.Fatalf("write and truncate failed: %v", err)
		}
		torn, rerr := os.ReadFile(path)
		if rerr != nil || len(torn) != int(limit.Cur) {
			t.Fatalf("the file holds %d bytes (%v), want %d (up to the limit)", len(torn), rerr, limit.Cur)
		}
		if again := s.Consume(ctx, topic, part(0), msgs(3)); again == nil || again.Error() != err.Error() {
			t.Fatalf("Consume after a failed truncate: %v, want the same error", again)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, torn) {
			t.Fatal("the sink appended after a partial record")
		}
		appendOnly(t, path, false)
		if cerr := s.Close(ctx); cerr == nil || cerr.Error() != err.Error() {
			t.Fatalf("Close of a broken sink: %v", cerr)
		}
		// The restart removes the partial record 4 and keeps the complete record 3 of the
		// failed batch (Open cannot tell batches apart): 3 is in the file twice at the end,
		// once per delivery that wrote it.
		s = open(t, `{"path":"`+path+`"}`, nil)
		if got := records(t, path); !slices.Equal(got, seq(0, 3)) {
			t.Fatalf("after reopening the file holds records %v, want 0..3", got)
		}
		want = []uint64{0, 1, 2, 3, 3, 4, 5, 6, 7}
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(ctx, topic, part(0), bigMsgs(3000, 3, 4, 5)); err != nil {
		t.Fatalf("retry with room: %v", err)
	}
	if err := s.Consume(ctx, topic, part(0), bigMsgs(3000, 6, 7)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := records(t, path); !slices.Equal(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
}

// TestWriteFailureOnFullDisk is the same on a real full file system: a 256 KiB tmpfs
// mounted by the test (root only; skipped where mounting is not permitted) and filled up
// by another file. The batch fails with ENOSPC and the file holds exactly what it held
// before; with room again the retry writes it once.
func TestWriteFailureOnFullDisk(t *testing.T) {
	dir := testkit.Tmpfs(t, "256k", "TestWriteFailureTruncates covers the torn write with RLIMIT_FSIZE")
	path := filepath.Join(dir, "out.jsonl")
	s := open(t, `{"path":"`+path+`"}`, nil)
	ctx := context.Background()
	defer s.Close(ctx)
	if err := s.Consume(ctx, topic, part(0), bigMsgs(3000, 0, 1, 2)); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(dir, "filler")
	testkit.FillDisk(t, filler)
	for attempt := 1; attempt <= 2; attempt++ {
		if err := s.Consume(ctx, topic, part(0), bigMsgs(3000, 3, 4, 5)); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("attempt %d on a full disk: %v, want ENOSPC", attempt, err)
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, before) {
			t.Fatalf("attempt %d: the file holds %d bytes (%v), want exactly the %d of records 0..2", attempt, len(got), err, len(before))
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(ctx, topic, part(0), bigMsgs(3000, 3, 4, 5)); err != nil {
		t.Fatalf("retry with room: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := records(t, path); !slices.Equal(got, seq(0, 5)) {
		t.Fatalf("records %v, want 0..5 once each", got)
	}
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

// fsAppendFL is FS_APPEND_FL of linux/fs.h (x/sys/unix does not name it).
const fsAppendFL = 0x20

// appendOnly sets (on) or clears the file's append-only attribute (chattr +a), under
// which writes append and a truncate fails with EPERM. It reports false, and logs why,
// where that is not permitted (not root, or a file system without the attribute).
func appendOnly(t *testing.T, path string, on bool) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err == nil {
		if on {
			flags |= fsAppendFL
		} else {
			flags &^= fsAppendFL
		}
		err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags))
	}
	if err != nil {
		if on {
			t.Logf("the failed-truncate case is left out: cannot make %s append-only: %v", path, err)
			return false
		}
		t.Fatalf("clear the append-only attribute of %s: %v", path, err)
	}
	return true
}
