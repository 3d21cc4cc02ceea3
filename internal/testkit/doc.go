// Package testkit is the one place Ferry's tests wait, read a file sink's output and set
// up a small file system: every test package uses it instead of writing its own poll loop.
//
// The waits are bounded and poll for a positive signal: WaitFor fails the test with what
// it waited for once Patience has passed, Eventually returns the same failure as an error
// for goroutines that are not the test's. A test that must show that something does NOT
// happen uses Quiet, which names what stays still and for how long; it is the only place
// a test spends wall-clock time on purpose, and it is kept for checks no hook, counter or
// log line can answer.
//
// It imports nothing of Ferry, so the tests of every package, even the lowest, can use it.
// Helpers that start a server, a client or a runtime live in the sub-packages (iggykit,
// runkit), which import what they start.
package testkit
