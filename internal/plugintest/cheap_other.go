//go:build !linux || !cgo

package plugintest

// CHeapInUse cannot read the C allocator's figures here (it needs glibc's mallinfo2).
func CHeapInUse() (n uint64, ok bool) { return 0, false }
