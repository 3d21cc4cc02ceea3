//go:build linux && cgo

package plugintest

/*
#include <malloc.h>

static size_t ferry_c_heap_in_use(void) {
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}
*/
import "C"

// CHeapInUse reports the bytes the C allocator (glibc malloc, which the C and Rust plugins
// both use) has handed out and not yet had back, over all arenas and mmapped chunks. A leak
// test compares it before and after many cycles: unlike the process's resident size it does
// not move when the allocator keeps freed pages or the Go runtime grows, so only memory that
// was allocated and never freed shows up. ok is false where it cannot be read.
func CHeapInUse() (n uint64, ok bool) {
	return uint64(C.ferry_c_heap_in_use()), true
}
