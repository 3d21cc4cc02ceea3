// Package ferry holds what belongs to the whole project rather than to one part of it:
// its version. It imports nothing of the module.
package ferry

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version is the project's version as the VERSION file at the repository root states it,
// embedded at build time: a plain `go build` reports it without any flag (the release
// build may still override cmd/ferry's with -ldflags -X, see README).
func Version() string { return strings.TrimSpace(versionFile) }
