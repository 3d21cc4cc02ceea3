// Package http is the built-in HTTP sink, path = "builtin:http": a drop-in for upstream
// Iggy's http_sink (its plugin_config keys, defaults, batch modes and metadata envelope),
// at least once, with replays a receiver can recognise.
//
// Every request carries an idempotency key (header Idempotency-Key by default) derived from
// what it holds: the stream, topic and partition, the first and last offset, and the first
// message's server timestamp. A retry sends the same bytes under the same key, and so does
// the replay of a batch after a crash, when the runtime delivers it again from the offset
// stored before it. A partition's offset is committed (offset_commit = "sink_controlled",
// or after_consuming) only after a response with a success status; transient failures
// (connection errors, 408, 429, 5xx) are retried with backoff, honouring Retry-After; other
// 4xx statuses are permanent and go to on_failure (per message in individual mode).
//
// It imports only sdk and the standard library.
package http
