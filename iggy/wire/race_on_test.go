//go:build race

package wire

// raceEnabled is true in -race builds, whose instrumentation changes escape analysis.
const raceEnabled = true
