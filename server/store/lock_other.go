//go:build !unix

package store

import "io"

// lockDir is a no-op off unix; Pebble's own LOCK file still applies.
func lockDir(string) (io.Closer, error) { return io.NopCloser(nil), nil }
