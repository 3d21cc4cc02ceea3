// Package ui is the status page of the HTTP API (GET /ui): static files embedded in the
// binary, so users need no build step. The page reads the API's JSON routes from the
// browser (docs/http-api.md).
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the page's files; mount it under /ui/ with the prefix stripped.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.FileServer(http.FS(sub))
}
