// Package random is the built-in "random" source: it produces messages with random (or
// seeded, reproducible) alphanumeric payloads at a chosen rate, for demos, tests and
// benchmarks. Its state is the number of messages produced so far, so a restarted source
// continues where the last confirmed batch ended and `count` holds across restarts: at
// least once into Iggy (a crash after a send and before its state was saved sends that
// batch again).
// It imports only sdk and the standard library.
package random
