// Package postcard encodes and decodes the postcard byte layouts that cross Iggy's native
// connector ABI (the layouts Iggy's connector SDK writes; docs/plugins.md): varints, strings, byte vectors, Option,
// the Schema enum, TopicMetadata (with Ferry's appended stream_id/topic_id), MessagesMetadata,
// RawMessages/RawMessage (headers as a nested blob), the header map, ProducedMessages/
// ProducedMessage and ConnectorState.
//
// Promises:
//   - Encoders append to a caller's slice (AppendX(dst, …)), emit minimal varints and produce
//     the bytes Rust's postcard 1.1 + serde produce for the same values (header maps sorted by
//     kind, then raw value bytes, duplicate keys collapsed with the last value winning).
//     Re-encoding into a reused buffer does not allocate.
//   - Decoders follow postcard 1.1's `from_bytes`: they read one value and ignore trailing
//     bytes; varints longer than the type's maximum, or whose last byte overflows the type,
//     are rejected; non-minimal varints are accepted; Option tags other than 0/1 are errors.
//     They never panic, never read past the input, never trust a length or count beyond what
//     the remaining input can hold, and copy every byte they keep (the input may be freed).
//
// It does no I/O, starts no goroutines and has no cgo. It imports only the standard library
// and sdk; it must not import connect, connect/plugin or iggy.
package postcard
