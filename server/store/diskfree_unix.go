//go:build unix

package store

import "syscall"

// freeBytes is the space an unprivileged writer may still use on dir's file system.
func freeBytes(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true //nolint:unconvert // Bsize is int64 on Linux, uint32 elsewhere
}
