package ferrycli

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile writes a CPU profile of the whole process to the file named by
// FERRY_CPU_PROFILE, for `go tool pprof` (docs/benchmarks.md); the returned func ends it.
// A process that exits on a second signal, or is killed, leaves no profile.
func startCPUProfile() func() {
	path := os.Getenv("FERRY_CPU_PROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ferry: FERRY_CPU_PROFILE %s: %v\n", path, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
