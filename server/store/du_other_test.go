//go:build !unix

package store

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// diskUsage sums the sizes of the files under dir.
func diskUsage(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			total += fi.Size()
		}
		if errors.Is(err, fs.ErrNotExist) { // Pebble deleted it meanwhile
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatalf("disk usage of %s: %v", dir, err)
	}
	return total
}
