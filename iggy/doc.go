// Package iggy is Ferry's Go client for the Apache Iggy 0.9 binary protocol (TCP,
// optionally TLS): low-level typed calls, a high-level consumer-group member
// (Consumer) and a batching Producer.
//
// # What it promises
//
//   - Dial logs in (password or personal access token) and refuses a server whose
//     protocol version differs, naming both versions. A Client is safe for concurrent
//     use: plain requests are spread over a small pool of connections (WithPoolSize),
//     each Consumer has its own, so polls and commits of different consumers never
//     wait for each other.
//   - One request in flight per connection (lock-step, §1.8 of the protocol
//     reference); the reply must echo the request number and the operation — or the
//     internal form a real server commits it as (CreateTopic → 64, CreatePartitions →
//     65, DeleteSegments → 68: wire.Operation.AnsweredBy) — or the connection is dropped.
//     Each connection has one writer and one reader goroutine; a failure kills the
//     connection and the request in flight gets one ErrOutcomeUnknown. Every request
//     is bounded by its context and WithRequestTimeout (30 s). A caller whose context
//     ends while its reply is outstanding gets ErrOutcomeUnknown wrapping ctx's error
//     at once, but the connection is kept (for a group member it is the membership):
//     the late reply is read and discarded (it must echo the request number and
//     operation, or the connection is dropped), and the next request on that
//     connection waits for it. Only a frame not fully written, or a reply not read,
//     within the request timeout drops the connection.
//   - Lost connections are replaced with backoff, a new login and a new client id;
//     groups are rejoined and resynced. Reads (gets, polls, syncs, offset stores) are
//     retried transparently; creates, deletes and sends return ErrOutcomeUnknown when
//     the server may have applied them (a resent batch may be duplicated). Transient
//     replies 57/58 are replayed on the same connection every 50 ms within the budget.
//     Every Eviction ends the connection.
//   - Errors are *OpError values naming the command and the stream/topic/partition;
//     they unwrap to the wire package's *ServerError values and classes (errors.Is
//     with wire.ErrNotFound, wire.ErrStreamIDNotFound, …) or to this package's
//     sentinels. Retriable and SafeToRetry answer "may I try again?".
//   - A Consumer re-syncs its assignment every WithAssignmentSync (1 s), lock-step with
//     its polls and stores, and reports every change in band (ConsumerConfig.
//     OnAssignmentChange, called by Poll before it polls under the new assignment;
//     nothing is dropped). It never throws away a batch the server returned (the group
//     would keep a revoked partition pending revocation for it), not even when Poll's
//     context ends mid-request (the batch is kept for the next Poll). StoreOffset never
//     moves the group's offset below what the member knows it stored or was assigned
//     at. See Consumer.Poll and AssignmentChange.
//   - The poll path allocates nothing per message: replies are read into reused
//     buffers and messages are views into them until Batch.Release.
//   - Close ends every goroutine the package started.
//
// # Layout
//
//   - options.go: Opt and defaults; errors.go: sentinels, OpError, Retriable.
//   - conn.go: one connection, its writer and reader; link.go: a connection that
//     reconnects, the request budget and retry rules; client.go: Dial, login, pool.
//   - admin.go (streams, topics, partitions), groups.go (offsets, groups),
//     messages.go (send, poll), consumer.go, membership.go and polltask.go (the
//     Consumer's group membership and its polls in flight), producer.go.
//
// # Lock order
//
// Consumer.closeMu → Consumer.op → Consumer.mu → link.mu. Client.mu, Producer.mu and
// conn state are leaves (nothing else is taken while holding them). No lock is held
// during I/O or while waiting on a channel, except Consumer.op: a channel semaphore held
// across one poll, assignment-sync or offset-store round trip of that Consumer (acquired with the
// caller's context and the Consumer's life, so Close never waits behind it; a poll's
// task holds it until the reply is recorded, even after its Poll call returned, and
// ends with the Consumer's life), and link.mu is released before dialing.
//
// # What it must not import
//
// Only the standard library and github.com/ferryio/ferry/iggy/wire (the codec; this
// package never encodes or decodes protocol bytes itself). It must not import the
// server, the runtime (connect) or anything under cmd; its tests may import
// server/servertest.
package iggy
