package store

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The data directory holds password hashes and every message: it is private to the
// server's user (directory 0700, files 0600), whatever the umask.

// makePrivate creates dir (0700) if missing and makes it and the files in it private:
// a directory created by an older version (0755, files 0644) is tightened on open.
func makePrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("make the data directory private: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		mode := os.FileMode(0o600)
		if e.IsDir() {
			mode = 0o700
		}
		if err := os.Chmod(p, mode); err != nil {
			return fmt.Errorf("make %s private: %w", p, err)
		}
	}
	return nil
}

// privateFS is the operating system's file system whose new files are 0600 and new
// directories 0700 (Pebble creates them 0666/0755 less the umask).
type privateFS struct{ vfs.FS }

func (f privateFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(name, 0o600); err != nil {
		_ = file.Close()
		return nil, err
	}
	return file, nil
}

func (f privateFS) MkdirAll(dir string, _ os.FileMode) error { return f.FS.MkdirAll(dir, 0o700) }

func (f privateFS) Lock(name string) (io.Closer, error) {
	l, err := f.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(name, 0o600); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}
