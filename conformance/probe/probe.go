// Package probe holds the source of the conformance suite's probe sink plugin (c/probe.c),
// embedded so that `ferry conformance` can compile it with the system's C compiler
// wherever it runs.
package probe

import _ "embed"

// Source is c/probe.c.
//
//go:embed c/probe.c
var Source []byte
