//go:build unix

package store

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
)

// diskUsage is what du reports for dir: the blocks allocated to every file
// under it (a preallocated WAL counts in full), in bytes.
func diskUsage(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) { // Pebble deleted it meanwhile
			return nil
		}
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("disk usage of %s: %v", dir, err)
	}
	return total
}
