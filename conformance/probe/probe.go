// Package probe holds the sources of the conformance suite's probe plugins — the sink
// (c/probe.c) and the source (c/source.c) — embedded so that `ferry conformance` can
// compile them with the system's C compiler wherever it runs.
package probe

import _ "embed"

// Source is c/probe.c, the probe sink.
//
//go:embed c/probe.c
var Source []byte

// SourcePlugin is c/source.c, the probe source.
//
//go:embed c/source.c
var SourcePlugin []byte

// JSONHeader is c/probe_json.h, included by both (written beside them before compiling).
//
//go:embed c/probe_json.h
var JSONHeader []byte
