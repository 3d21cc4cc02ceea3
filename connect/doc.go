// Package connect is Ferry's connectors runtime: it runs sinks (Iggy → target) and sources
// (target → Iggy) described by connect/config, and owns when a sink's offsets advance.
// docs/architecture.md is the map of this package: the life of one message, who owns which
// state, the lifecycle of a connector.
//
// # What it promises
//
//   - Commit modes as commitPolicy decides them (policy.go; the table of docs/delivery.md):
//     after_polling (the server stores with each poll; at-most-once), after_consuming (a
//     batch is done once Consume returned nil for all of it) and sink_controlled (the sink
//     says which offsets are done through an [sdk.Committer]); both at-least-once.
//   - A done offset is stored commit.delay after it became done (at most
//     commit.interval), coalesced per partition, one store in flight per partition, at
//     once when urgent (paused, close to max_uncommitted, draining, stopping). A failed
//     store is retried with backoff and never forgotten; failure and backoff are per
//     partition. A store refused because the partition is not ours any more is final for
//     that partition only. No store moves a partition's offset below what this member
//     stored or was assigned at.
//   - A commit is validated (never beyond what was delivered, never at or below what is
//     done, only for a partition in the table) and never blocks; after the partition was
//     released or the sink stopped it fails with [sdk.ErrCommitUnknownPartition].
//   - Assignment changes arrive in band from iggy.Consumer.Poll and are never dropped; a
//     revoked partition drains (its polled batches are still delivered and its commits
//     stored at once) until everything polled is stored or shutdown_timeout passes.
//   - A failed Consume (error or panic) is retried with capped exponential backoff,
//     nothing done meanwhile; then on_failure: stop (status error, nothing done),
//     dead_letter (the batch is sent with ferry-* headers and confirmed, then done) or
//     skip (done, logged, counted).
//   - Backpressure: at most commit.max_uncommitted messages per partition are polled and
//     not yet stored; past it the partition is paused until its stores catch up.
//   - The whole stop of a connector is bounded by one shutdown_timeout (lifecycle.go):
//     stop polling → finish the batch being consumed → the sink's Close (may still
//     commit) → store what is done → leave the groups. Nothing waits for a Consume or
//     Close that ignores its context past it; what it cuts short is redelivered.
//   - Status errors (LastError) do not repeat the connector's key: Status carries Kind and
//     Key ("open: plugin …", not "sink KEY: open: …").
//   - Every goroutine ends when Stop returns nil, except a call into a connector that
//     ignores its context (it ends when the connector returns).
//
// # File map
//
//   - runtime.go, status.go: the Runtime API ferrycli (the command line) uses; iggy_backend.go: [New],
//     [Options] and the adapter over the iggy client (backend.go is its interface).
//   - sink_runner.go (one sink connector), sink_topic.go (one stream × topic of it),
//     partitions.go and stores.go (the partition table and its store loop), policy.go,
//     deliver.go (a batch: poison, Consume with retries the sdk's errors steer, its
//     settlement), failure.go (the failure policy: on_failure, dead letters, for sinks and
//     sources), convert.go (wire messages to sdk messages), payload.go (decode by schema,
//     transforms, re-encode; connect/schema, connect/transform).
//   - source.go, source_payload.go (encode to the stream schema, transforms, per-message
//     failures), state.go: sources.
//   - lifecycle.go, retry.go: the stop signalling and the retry helper every runner uses.
//   - native.go (cgo only): [NativeSinkLoader] and [NativeSourceLoader] over
//     connect/plugin.
//
// # Tests
//
// The pipeline tests (pipeline_test.go, rebalance_test.go, storm_test.go) run the whole
// runtime over the real client against the real embedded server (server/servertest, TCP
// on loopback); the partition table and the batch processor have unit tests.
// BenchmarkSinkPipeline compares the raw poll loop with each commit mode;
// convert_bench_test.go measures the converter (raw zero-copy, json with transforms).
//
// # What it must not import
//
// server, connectors/*, ferrycli and cmd/* (tests may: servertest, the null and file sinks): connect sits
// below ferrycli and above iggy, sdk, connect/config and connect/plugin. Only native.go
// needs cgo; without cgo the package builds without [NativeSinkLoader] and
// [NativeSourceLoader], and native plugins come in through [Options.LoadSinkPlugin] and
// [Options.LoadSourcePlugin].
package connect
