//go:build unix

package store

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// lockDir takes an exclusive flock on path. flock locks belong to the open
// file description, so a second open in the same process fails as well.
func lockDir(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return f, nil
}
