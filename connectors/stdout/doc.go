// Package stdout is the built-in "stdout" sink: one line per message on standard output (or
// any io.Writer). Its guarantee is at least once under after_consuming and sink_controlled
// (each batch committed once its lines are written): a crash may print a batch again. It
// imports only sdk and the standard library.
package stdout
