//go:build race

package server_test

// raceEnabled: the race detector multiplies memory use (5–10× by its documentation).
const raceEnabled = true
