package testkit

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"testing"
)

// ReadLines returns the lines of the file at path (a file sink's output): nil when the file
// does not exist yet, so a WaitFor on its length may start before the sink has opened it. A
// last line without its newline is returned as it stands. Other errors fail the test.
func ReadLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	defer func() { _ = f.Close() }() // opened read-only: closing loses nothing
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return lines
}
