package ferrycli

import (
	"runtime/debug"
)

// defaultGCPercent is the garbage collector's target when GOGC is not set. A busy Ferry's
// heap is mostly short-lived batch buffers (polled replies, encoded sends, rows), and at Go's
// default of 100 collecting them took a fifth to a third of the runtime's and the embedded
// server's CPU; at 400 a 1M-change CDC run went from 0.78–0.83 to 0.90–0.92 × pg_recvlogical
// and `ferry bench`'s peak RSS from 187 to 210 MB (docs/benchmarks.md). GOGC in the
// environment wins (GOGC=100 for Go's default); GOMEMLIMIT caps the heap as usual.
const defaultGCPercent = 400

// tuneGC applies defaultGCPercent unless the environment (lookup) sets GOGC.
func tuneGC(lookup func(string) (string, bool)) {
	if _, set := lookup("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}
