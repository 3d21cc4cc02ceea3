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
//   - One request in flight per connection (lock-step: the server answers one request
//     at a time, in order); the reply must echo the request number and the operation — or the
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
//     the server may have applied them (a resent batch may be duplicated). A transient
//     57 TransientNotCommitted is replayed (the identical frame) on the same connection
//     every 50 ms within the budget; a 58 TransientNotAccepted (not executed) is sent
//     again every 50 ms, to the cluster leader if it moved (Leader awareness). Every
//     Eviction ends the connection.
//   - Every connection ends up on the cluster leader (Leader awareness, below).
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
// # Leader awareness
//
// Dial's address is one "host:port" or several seed addresses of one cluster separated
// by commas ("a:8090, b:8090"); a new connection tries the leader (once one is known),
// then the seeds in order, and uses the first that accepts it and the login. Right after
// the login, before anything else runs on it (a Consumer's join), it reads the cluster
// metadata (GetClusterMetadata), as the official SDKs do, and:
//
//   - one node, an error status or an undecodable roster: it stays (the embedded server
//     answers a one-node roster; a server without code 12 is used as it is, with a WARN);
//   - several nodes and a healthy leader at this node (same IP and TCP port, localhost
//     counting as 127.0.0.1): it stays, and the leader is remembered;
//   - a healthy leader elsewhere: one INFO line names this node and the leader
//     ("iggy: connected to a node that is not the cluster leader, reconnecting to the
//     leader", node=…, leader=…), the connection is closed and the client connects and
//     logs in at the leader's IP and TCP port (the transport in use; TLS too, its
//     ServerName the leader's host unless WithTLS named one), and checks again there: at
//     most 3 redirects per connect, then it stays with a WARN. A leader that cannot be
//     reached fails the connect with an error naming the leader and the node that named
//     it (Dial: ErrNotConnected; later reconnects retry with backoff, starting over with
//     the seeds, so a new roster is seen): a follower would refuse every write;
//   - no healthy leader (an election in progress): the roster is read again every
//     250 ms for up to 5 s, then the connection stays on its node with a WARN.
//
// The leader is shared by all the Client's connections (the pool and every Consumer's),
// so after the first redirect they connect to it directly. A leader change is followed
// in two ways: a request answered 58 TransientNotAccepted (a follower's answer to
// replicated requests) makes its connection read the roster at once (and again at most
// every 2 s while 58 goes on); and every reconnect reads it. When a roster names a new
// leader, every connection of the Client on another node is retired: it finishes the
// request it has in flight and closes (one INFO line each), and the next request on
// that link connects to the leader; a Consumer rejoins its group there and resyncs. The
// request refused with 58 was not executed, so it is sent to the leader at once, even a
// create or a send.
//
// # Layout
//
//   - options.go: Opt and defaults; errors.go: sentinels, OpError, Retriable.
//   - conn.go: one connection, its writer and reader; link.go: a connection that
//     reconnects, the request budget and retry rules; client.go: Dial, login, pool;
//     leader.go: seeds, the roster check after login, following the leader.
//   - admin.go (streams, topics, partitions), groups.go (offsets, groups),
//     messages.go (send, poll), consumer.go, membership.go and polltask.go (the
//     Consumer's group membership and its polls in flight), producer.go.
//
// # Lock order
//
// Consumer.closeMu → Consumer.op → Consumer.mu → link.mu. Client.mu, Producer.mu, the
// route's mutex (the leader) and conn state are leaves (nothing else is taken while
// holding them): a leader change copies the list of links under Client.mu, releases it,
// then takes each link.mu in turn. No lock is held
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
