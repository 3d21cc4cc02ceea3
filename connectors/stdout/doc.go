// Package stdout is the built-in "stdout" sink: one line per message on standard output (or
// any io.Writer). It imports only sdk and the standard library.
package stdout
