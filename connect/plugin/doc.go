// Package plugin loads Iggy's native connector plugins (shared libraries built with Iggy's
// Rust connector SDK, or any C ABI implementation of include/iggy_connector.h) and adapts
// them to the sdk.Sink and sdk.Source interfaces. It is the only package with cgo.
//
// Promises:
//   - [Open] dlopens a library once per resolved path per process and never dlcloses it.
//     Missing files, files dlopen refuses and missing symbols are distinct errors
//     ([ErrNotFound], [ErrNotLibrary], [ErrMissingSymbol] via *SymbolError).
//   - Sinks: the four G3/G4 sink symbols are required; iggy_sink_set_commit_callback is
//     optional and required only when the sink is opened with a Committer. Sources: G4
//     (iggy_source_handle_v2 + iggy_source_batch_result) is preferred, G3
//     (iggy_source_handle) is the fallback. The generic G1/G2 names are not supported.
//   - Every instance gets a new plugin id from one process-global counter starting at 1.
//   - Buffers passed to plugins are never NULL (empty ones point at a static byte), except
//     the source state, which is NULL when there is none. They are Go memory without Go
//     pointers, passed straight to the one cgo call per Consume (no C copy); they are valid
//     only until that call returns (a plugin copies what it keeps, as with Iggy's runtime).
//     Consume encodes into per-topic buffers reused from batch to batch.
//   - Callbacks (log, commit, send) are static //export functions; they never block, never
//     call a plugin export, and never let a Go panic cross into C.
//   - TopicMetadata carries Ferry's appended stream_id/topic_id (connect/plugin/postcard).
//
// Plugin logs: the ABI's log callback carries no plugin id, so each library gets its own C
// trampoline (one of a fixed table of 63; later libraries share an unattributed one) and a
// line is attributed to the library; when exactly one instance of that library is live, the
// line goes to that instance's logger (which carries the connector key), otherwise to
// slog.Default() with the plugin path and the keys of the live instances. Plugin log
// filtering happens inside the plugin (RUST_LOG, read at the library's first open).
//
// It imports sdk and connect/plugin/postcard; it must not import connect, iggy or server.
package plugin
