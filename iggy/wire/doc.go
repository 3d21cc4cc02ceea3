// Package wire is the codec for the Apache Iggy 0.9 binary protocol (binary protocol
// 0.11.0, packed version 11264), shared by the Ferry client (package iggy) and the
// embedded server (package server).
//
// # What it promises
//
// Wire is a codec and nothing else: it turns values into bytes and bytes into values.
// It does no I/O, starts no goroutines, reads no clock and keeps no global mutable state;
// every function is safe for concurrent use on distinct buffers. Encoders have the form
// Append…(dst, …) []byte (or a method Append(dst) on a request/reply value) and only
// append to dst. Decoders read from a byte slice through a sticky-error [Reader]; they
// never panic, never read past their input, and never allocate more than a small multiple
// of the input's size, whatever the input (counts read from the wire are bounded by the
// remaining bytes before anything is allocated). Every decoder is fuzzed.
//
// Metadata decoders copy what they keep (names, option blocks), so the input buffer may be
// reused. The message hot paths do not: [DecodePollReply] returns [Message] values whose
// Payload and RawHeaders alias the reply body, and [AppendBatch] writes into dst without
// allocating per message.
//
// # Layout
//
//   - frame.go: the 256-byte headers (Request, Reply, Eviction), frame size checks and
//     request header validation; reply.go: the client's reply algorithm in one
//     call and the server's reply builders.
//   - requests.go: the Request interface and DecodeRequest (code → decoder).
//   - ops.go: operations, command codes, which codes are replicated, the result section.
//   - errors.go, eviction.go: every Iggy error code as a *ServerError, error categories,
//     eviction reasons.
//   - reader.go, encodings.go, tlv.go: primitives and the shared encodings (Name,
//     Identifier, Consumer, Partitioning, PollingStrategy, user-header TLV blocks).
//   - one file per command group: system.go, login.go, streams.go, topics.go,
//     partitions.go, offsets.go, groups.go, pat.go, send.go, poll.go, cluster.go.
//   - batch.go, batch_server.go: message batches (producer, server and consumer sides);
//     xxh32.go: the XXH32 hash used for message keys and string consumer ids.
//
// # What it must not import
//
// Only the standard library's pure packages (bytes, encoding/binary, errors, fmt, math,
// math/bits, slices, strconv, unicode/utf8) and github.com/zeebo/xxh3 (TestImports
// enforces the list). It must not import net, os,
// time, sync, math/rand, log/slog or any Ferry package: the dependency direction is
// server → iggy/wire and iggy → iggy/wire, never back.
package wire
