// Package store is the durable storage of Ferry's embedded single-node
// Iggy-compatible server, built on Pebble.
//
// # Promise
//
//   - Metadata (streams, topics, partitions, consumer-group definitions, users,
//     personal access tokens), message batches and stored consumer offsets
//     survive a restart: [Open] recovers all of it, including every
//     partition's next offset, message count and size.
//   - Every acknowledged operation is written as exactly one Pebble batch
//     (the change plus the counters it moves), so a crash can never leave a
//     torn or half-applied operation behind. With [FsyncAlways] that batch is
//     committed with pebble.Sync before the method returns; with
//     [FsyncInterval] the write-ahead log is synced on an interval and on
//     [Store.Close].
//   - Ids follow the Iggy server rules: streams and topics take the lowest
//     free 0-based id, partitions are 0..n-1 and grow at the top, consumer
//     group ids are per topic and never reused, users take the lowest free id
//     (root is 0). Names are unique per parent, matched exactly.
//   - Offsets are gap-free: appends to one partition are serialized and each
//     batch gets base offset = previous last offset + 1 (0 when empty).
//     Appends to different partitions run in parallel.
//   - One process, one owner: opening a directory that is already open (in
//     this process or another) fails with [ErrLocked].
//   - Every exported method is safe for concurrent use.
//   - Segments: a partition's offsets are split into segments as Iggy's log
//     is: the active (last) segment takes appends until it holds
//     TopicConfig.SegmentSize bytes or more (default 1 GiB, Iggy's
//     segment_size); the next append opens a new one. Each segment's first
//     and last offset, size and newest timestamp are in metadata, written in
//     the append's own batch ([Store.Segments]).
//   - Retention ([Store.EnforceRetention]) removes whole segments from the
//     front: those whose newest message is older than message_expiry, and,
//     while a topic is above max_topic_size, the topic's oldest. Never the
//     active segment, never one holding an offset after the lowest stored
//     consumer or group offset of its partition (Iggy's consumer barrier).
//     Removal is DeleteRange tombstones in one batch, then a compaction of
//     the range so the disk space comes back; purge and delete compact too.
//     Reads below the first retained offset start at it.
//
// # Disk footprint
//
// Pebble is tuned for a small embedded store (tuning.go): WAL files are not
// preallocated (Pebble gives each 1.1 × MemTableSize, 72 MB, up front), so a
// log takes the bytes written to it. The quickstart's 200,000 messages of 100
// bytes take 1.00× their bytes on disk (15.75× before);
// TestQuickstartFootprint fails above 2×. Under sustained writes the log is
// at most about five memtables (64 MiB each: active, queued, kept for
// recycling) above the tables.
//
// Message batches are opaque byte slices. The store never decodes them; the
// caller (the server) stamps base_offset, base_timestamp and the checksum
// through the callback of [Store.AppendFunc] and passes the message count.
// Group membership is not persisted (it does not survive a restart upstream
// either); group definitions and their stored offsets are.
//
// # Must not import
//
// This package must not import github.com/ferryio/ferry/iggy/wire nor
// github.com/ferryio/ferry/iggy: the wire codec belongs to the server layer
// above, and the client must never be a dependency of the server.
//
// # Key layout
//
// All keys are big-endian so that Pebble's byte order is numeric order.
//
//	's' stream                         -> stream record
//	't' stream topic                   -> topic record
//	'p' stream topic partition         -> partition record
//	'g' stream topic group             -> group record
//	'G' stream topic                   -> next group id (u32)
//	'u' user                           -> user record
//	'a' user name                      -> personal access token record
//	'd' stream topic partition 'b' base_offset           -> batch bytes
//	'd' stream topic partition 'i' base_offset           -> count, base_timestamp, size
//	'd' stream topic partition 'T' base_timestamp offset -> (empty)
//	'd' stream topic partition 'S' first_offset          -> last offset, size, newest timestamp
//	'd' stream topic partition 'c' kind consumer_id      -> stored offset (u64)
//	'd' stream topic partition 's'                       -> next offset, messages, bytes, last timestamp
//
// Deleting a stream, topic or partition, purging, or removing segments is a
// handful of DeleteRange tombstones in one batch, followed by a compaction of
// the range.
//
// The 'T' secondary index answers "first batch with base_timestamp >= t" with
// one seek instead of a scan over every batch of the partition. It is correct
// because the store keeps base timestamps non-decreasing per partition (see
// [Store.AppendFunc]), so timestamp order equals offset order.
package store
