// Package server is Ferry's embedded single-node Apache Iggy server: it speaks the Iggy
// 0.9 binary protocol (binary protocol 0.11.0) over TCP (optionally TLS) and keeps its
// data durably in package store (Pebble).
//
// # What it promises
//
//   - The server semantics of Iggy's binary protocol: framing, login and
//     sessions, 0-based ids, offsets, polling strategies, auto-commit, consumer groups
//     with cooperative join and full rebalance, heartbeat eviction and the error code of
//     every failure, so official Iggy SDKs work unchanged against it.
//   - One reader goroutine per connection handles its frames strictly in order and writes
//     exactly one frame per request (a Reply, or an Eviction where the protocol says so).
//     A malformed or oversized frame gets an error reply or closes that connection only.
//   - Every acknowledged write is in the store before the reply (synced with
//     FsyncAlways, the default).
//   - Embedding API in the nats-server style: New validates, Start listens, Ready waits,
//     Addr reports the bound address, Close is idempotent, safe on nil and waits for every
//     goroutine (all started through one spawn helper). No signal handling and no global
//     logger: logs go to Config.Logger.
//   - Retention as Iggy's segment cleaner: every Config.RetentionInterval (default
//     1 minute, Iggy's [data_maintenance.messages] interval) each topic's
//     message_expiry and max_topic_size are enforced by removing whole segments
//     (store.EnforceRetention has the rules), never a partition's active segment nor
//     a segment holding offsets after a stored consumer or group offset. A poll
//     below the retained range starts at its first message; segments_count is the
//     real count (1 for an empty partition). EnforceRetention runs a pass on demand
//     and Config.Now is the clock of both message timestamps and retention, so
//     tests expire messages without waiting.
//
// # Where it differs from a real Iggy server
//
//   - One node: GetClusterMetadata answers a one-node roster with this server as the
//     healthy leader; there is no replication.
//   - Not served (S:5 FeatureUnavailable, under the request's operation): DeleteSegments,
//     user management (CreateUser, UpdateUser, DeleteUser, ChangePassword,
//     UpdatePermissions), GetSnapshot, DescribeOptions, GetClient(s), GetUser(s).
//   - Where upstream sends nothing (a faulty batch, an undecodable Join/Leave body, an
//     invalid request header) it answers with the error code, so no client waits for its
//     timeout.
//   - Personal access tokens are stored as their SHA-256, not BLAKE3; only the digest is
//     kept, so this is invisible on the wire.
//   - Not a difference: committed replies to CreateTopic and CreatePartitions carry the
//     internal operations 64 and 65, as upstream's (wire.Operation.CommittedForm); a
//     denial before execution echoes the request's operation.
//
// Lock order (outer to inner): Server.meta → groups.mu → Server.mu → conn.smu →
// conn.wmu → store internals. Partition-plane requests (send, poll, offsets) never take
// Server.meta.
//
// # What it must not import
//
// It builds on github.com/ferryio/ferry/iggy/wire (the codec: every encode and decode
// goes through it) and github.com/ferryio/ferry/server/store. It must not import the
// client (github.com/ferryio/ferry/iggy), the runtime (connect) or anything under cmd.
package server
