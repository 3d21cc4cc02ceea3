package connect

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryio/ferry/connect/schema"
)

// TestStateFileAtomic: a crash between writing the temporary file and the rename leaves the
// old state; the stale temporary file does not confuse load and the next save replaces it.
func TestStateFileAtomic(t *testing.T) {
	dir := t.TempDir()
	f := newStateFile(dir, "gen")
	if got, want := f.path, filepath.Join(dir, "source_gen.state"); got != want {
		t.Fatalf("path = %s, want %s", got, want)
	}
	if b, err := f.load(); err != nil || b != nil {
		t.Fatalf("load of a missing file = %q, %v; want nil, nil", b, err)
	}
	if err := f.save([]byte("old")); err != nil {
		t.Fatal(err)
	}
	// Crash point: the new bytes are durable in the temporary file, the rename never ran.
	if err := f.writeTemp([]byte("new-but-uncommitted")); err != nil {
		t.Fatal(err)
	}
	if b, err := f.load(); err != nil || !bytes.Equal(b, []byte("old")) {
		t.Fatalf("after a crash before rename: load = %q, %v; want old", b, err)
	}
	if _, err := os.Stat(f.tmpPath()); err != nil {
		t.Fatalf("temporary file should be left behind by the simulated crash: %v", err)
	}
	// Recovery: a shorter state over the longer stale temporary file (O_TRUNC).
	if err := f.save([]byte("n2")); err != nil {
		t.Fatal(err)
	}
	if b, err := f.load(); err != nil || !bytes.Equal(b, []byte("n2")) {
		t.Fatalf("load = %q, %v; want n2", b, err)
	}
	if _, err := os.Stat(f.tmpPath()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file still present after save: %v", err)
	}
	st, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode = %v, want 0600", st.Mode().Perm())
	}
}

func TestStateFileEmptyAndMissingDir(t *testing.T) {
	dir := t.TempDir()
	f := newStateFile(dir, "k")
	if err := os.WriteFile(f.path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := f.load(); err != nil || b != nil {
		t.Fatalf("empty file: load = %q, %v; want nil, nil", b, err)
	}
	missing := newStateFile(filepath.Join(dir, "nope"), "k")
	nope := filepath.Join(dir, "nope")
	_, err := missing.load()
	if want := "Cannot open state file " + filepath.Join(nope, "source_k.state") + ": its directory " + nope +
		": stat " + nope + ": no such file or directory"; !errors.Is(err, errStateOpen) || !errors.Is(err, fs.ErrNotExist) || err.Error() != want {
		t.Fatalf("missing directory: err = %v, want %q wrapping errStateOpen and fs.ErrNotExist", err, want)
	}
	if err := missing.save([]byte("x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("save into a missing directory: err = %v, want fs.ErrNotExist", err)
	}
}

// TestEncodePayload: a source's payloads without transforms, as the runner encodes them.
func TestEncodePayload(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		in, want string
		wantErr  bool
	}{
		{"json", "json", `{"a":1}`, `{"a":1}`, false},
		{"json", "json", `{"a":`, "", true},
		{"text", "json", `he said "<hi>"`, `"he said \"<hi>\""`, false},
		{"raw", "json", `[1,2]`, `[1,2]`, false},
		{"raw", "json", "\x00", "", true},
		{"json", "text", `{"a":1}`, `{"a":1}`, false},
		{"raw", "text", "\xff", "", true},
		{"proto", "raw", "\x08\x01", "\x08\x01", false},
		{"proto", "proto", "\x08\x01", "\x08\x01", false},
		{"json", "avro", `{}`, "", true},
		{"", "text", "x", "x", false},
	} {
		got, err := schema.Encode(nil, sdkSchema(tc.from), sdkSchema(tc.to), nil, []byte(tc.in))
		if (err != nil) != tc.wantErr || string(got) != tc.want {
			t.Errorf("Encode(%s→%s, %q) = %q, %v; want %q, err=%v", tc.from, tc.to, tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
