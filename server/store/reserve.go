package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNoRoomForReserve is matched by Open's error when a data directory that holds no
// database yet has no room for its disk reserve (Options.DiskReserve); the error is a
// *ReserveError. Open then leaves nothing behind: a store that cannot keep its reserve
// could not turn a full disk into refused writes, and opening a database that does not
// exist read-only (as a full disk under existing data is opened) is impossible.
var ErrNoRoomForReserve = errors.New("store: no room for the disk reserve")

// ReserveError says how much room the disk reserve needed and how much there was.
type ReserveError struct {
	Dir       string
	Need      int64 // the reserve's size, Options.DiskReserve
	Free      int64 // free on Dir's file system after the attempt; valid when FreeKnown
	FreeKnown bool
	Err       error // the write's error (ENOSPC)
}

func (e *ReserveError) Error() string {
	free := "unknown space"
	if e.FreeKnown {
		free = formatBytes(e.Free)
	}
	return fmt.Sprintf("no room for its %s disk reserve: %s free on its volume (%v)", formatBytes(e.Need), free, e.Err)
}

func (e *ReserveError) Unwrap() []error { return []error{ErrNoRoomForReserve, e.Err} }

// formatBytes writes n in the largest binary unit it reaches, one decimal.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// createdPaths records what Open is about to create in the operating system's file
// system (the data directory and missing parents, the lock file), so that an Open that
// fails before the database exists can remove it again.
type createdPaths struct {
	dirs []string // missing directories, the data directory first
	lock string   // the lock file, when it did not exist
}

func recordCreated(dir, lock string) createdPaths {
	var c createdPaths
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		c.dirs = append(c.dirs, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if _, err := os.Stat(lock); errors.Is(err, fs.ErrNotExist) {
		c.lock = lock
	}
	return c
}

// undo removes what was created, the innermost first; a directory that is not empty
// (someone else's file appeared) is left.
func (c createdPaths) undo() {
	if c.lock != "" {
		_ = os.Remove(c.lock)
	}
	for _, d := range c.dirs {
		if os.Remove(d) != nil {
			return
		}
	}
}
