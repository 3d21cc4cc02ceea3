// Package native holds end-to-end tests of native sink plugins run by the connectors
// runtime: C plugins built with gcc at test time (examples/plugins/c and
// connect/plugin/testdata/c/probe.c), loaded through connect.NativeSinkLoader, fed by the
// real embedded server over TCP with the real client. It also benchmarks a native C null
// sink against the built-in Go null sink through the same pipeline.
//
// It has no non-test code and is imported by nothing. Its tests need cgo and gcc (they
// skip without gcc).
package native
