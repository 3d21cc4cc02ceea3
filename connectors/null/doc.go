// Package null is the built-in "null" sink: it discards every message and counts them, for
// tests and benchmarks. It imports only sdk and the standard library.
package null
