package file

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

// Issue 22's torn JSON line: on a full disk the file sink left
// `{"stream":"s3","topic":"t1","partition{"stream":…` in the middle of its file. A
// failed or partial write is truncated back to the last complete record before Consume
// returns, so the retry appends cleanly and every line stays a JSON object.

// bigMsgs are messages whose records are about size bytes each, so a batch of them
// spans pages and any write limit falls inside a record.
func bigMsgs(size int, offsets ...uint64) []sdk.ConsumedMessage {
	out := msgs(offsets...)
	for i := range out {
		out[i].Payload = []byte(`{"pad":"` + strings.Repeat("x", size) + `"}`)
	}
	return out
}

// records reads the sink's file: it must end with a newline and every line must parse as a
// Record; it returns the offsets in file order.
func records(t *testing.T, path string) []uint64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("%s ends with a partial record: %q", path, data[max(len(data)-80, 0):])
	}
	if len(data) == 0 {
		return nil
	}
	var out []uint64
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var r Record
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil || dec.More() {
			t.Fatalf("line %d of %s is not one record (%v): %q", i+1, path, err, line[:min(len(line), 120)])
		}
		out = append(out, r.Offset)
	}
	return out
}

// TestOpenDropsPartialTail: a file that ends with a partial record (a process killed in
// the middle of a write, or a truncate that failed after a failed write) loses that
// record at Open, and only it; the next batch starts on a line of its own.
func TestOpenDropsPartialTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	s := open(t, `{"path":"`+path+`"}`, nil)
	ctx := context.Background()
	if err := s.Consume(ctx, topic, part(0), msgs(0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"stream":"orders","topic":"eu","partition`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, `{"path":"`+path+`"}`, nil)
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, whole) {
		t.Fatalf("after Open the file is %q (%v), want the two complete records", got, err)
	}
	if err := s.Consume(ctx, topic, part(0), msgs(2)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := records(t, path); !slices.Equal(got, []uint64{0, 1, 2}) {
		t.Fatalf("records %v, want 0 1 2", got)
	}

	// A file with no newline at all holds no complete record: it is emptied.
	if err := os.WriteFile(path, []byte(`{"stream":"or`), 0o644); err != nil {
		t.Fatal(err)
	}
	s = open(t, `{"path":"`+path+`"}`, nil)
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("a file holding only a partial record: %v %v, want it empty", fi, err)
	}
}
