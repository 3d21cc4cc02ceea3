// Package connectors lists Ferry's built-in Go connectors, selected in a connector file with
// `path = "builtin:NAME"`. Each connector lives in its own package under connectors/ and
// imports only sdk and the standard library; this package imports only them and sdk.
package connectors
