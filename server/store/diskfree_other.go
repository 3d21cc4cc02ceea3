//go:build !unix

package store

// freeBytes is unknown off unix.
func freeBytes(string) (int64, bool) { return 0, false }
