// Package e2e holds Ferry's process-level tests: they build the real ferry binary once
// (TestMain) and run it as child processes: `ferry run --embedded`, `ferry server`,
// `ferry offsets`, killed with SIGKILL mid-stream and restarted, and check exact outcomes
// from the file sink's output and the stored offsets.
//
// The package has no non-test code and talks to Ferry only through the binary, its files,
// its exit codes and its HTTP API, like a user. The only Ferry packages it imports are the
// Go client (iggy, iggy/wire), only to put data on a server before a run, as any producer
// would, and internal/browsertest, the headless browser that opens the status page.
package e2e
