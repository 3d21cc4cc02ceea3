// Package connect is Ferry's connectors runtime: it runs sinks (Iggy → target) and sources
// (target → Iggy) described by connect/config, and owns when a sink's offsets advance.
//
// # What it promises
//
//   - Commit modes exactly as DESIGN.md: after_polling (the server stores on poll; the
//     runtime stores nothing, at-most-once), after_consuming (the runtime stores a batch's
//     last offset after Consume returned nil for the whole batch) and sink_controlled (the
//     sink stores through an [sdk.Committer]).
//   - Commits are validated per partition (never beyond what was delivered, never at or
//     below what is committed or pending, only for partitions still owned), coalesced
//     (highest wins), written on the [commit] interval and at shutdown, retried with backoff
//     and never forgotten: a pending offset stays until it is stored or superseded.
//   - A Committer never blocks and never calls into the sink: it validates, records and
//     signals. After the sink stopped, or a revoked partition was released (below), Commit
//     returns an error wrapping [sdk.ErrCommitUnknownPartition] and changes nothing.
//   - Rebalance (a partition revoked from this member): it is no longer polled; the
//     in-flight batch finishes (revocations are handled between batches), and the batches
//     of it already polled (at most two: queued, and held by the poll goroutine) are still
//     delivered — the server keeps a partition pending revocation with its owner until the
//     group's stored offset covers what the group polled. Its commit entry stays open for a
//     drain: every commit the sink makes is accepted as before and stored at once. The
//     partition is released (registry entry removed, later commits rejected with
//     ErrCommitUnknownPartition) as soon as everything polled from it is stored
//     (committed ≥ polled ≥ delivered), or when the drain deadline passes: shutdown_timeout
//     after the revocation (default 10 s, below the server's 30 s rebalancing timeout);
//     what is then still uncommitted is redelivered to the next owner. A stop during a drain
//     keeps the entry open through the sink's Close. after_polling releases at once.
//   - A failed Consume (error or panic) is retried with capped exponential backoff (the
//     first retry waits the initial delay), nothing committed meanwhile; then on_failure
//     applies: stop (status error, nothing committed), dead_letter (the batch is sent with
//     ferry-* headers and confirmed before its offsets are committed) or skip (committed,
//     logged, counted).
//   - Backpressure: at most commit.max_uncommitted messages per partition are polled and
//     not yet stored; past it the partition is paused until its commits are stored.
//   - Shutdown: stop polling → finish the in-flight batch (bounded by shutdown_timeout;
//     an abandoned batch is never committed, and only then is the abandon warning logged)
//     → sink Close (may still commit) → close the registry entries (draining ones too) and
//     write pending commits → leave the consumer group.
//   - Status errors (LastError) do not repeat the connector's key: Status carries Kind and
//     Key ("open: plugin …", not "sink KEY: open: …").
//   - Every goroutine ends when Stop returns nil.
//
// # File map
//
//   - tracker.go: per-partition commit state and validation.
//   - registry.go: (instance, stream, topic, partition) → tracker; the sdk.Committer.
//   - commitloop.go: the per-topic-consumer writer of pending offsets.
//   - backoff.go, failure.go: retry with backoff, panic recovery, on_failure policies.
//   - backend.go, sink_runner.go, sink_topic.go, convert.go: the sink pipeline over a
//     consumer-group member (iggy.Consumer through iggy_backend.go).
//   - runtime.go, status.go: the Runtime API used by cmd/ferry; iggy_backend.go: [New],
//     [Options] and the adapter over the iggy client.
//   - native.go (cgo only): [NativeSinkLoader] and [NativeSourceLoader], the plugin loaders
//     over connect/plugin.
//
// Commit pacing: after_consuming stores a success soon, at most once per 10 ms (or
// commit.interval if shorter) per topic consumer, because a store takes a turn on the
// member connection the polls need; any mode stores at once when a partition is paused
// or within three batches of max_uncommitted.
//
// # Tests
//
// The pipeline tests (pipeline_test.go, rebalance_test.go) run the whole runtime over
// the real client against the real embedded server (server/servertest, TCP on
// loopback); tracker, registry, commit loop and failure policy have unit tests.
// BenchmarkSinkPipeline compares the raw poll loop with each commit mode.
//
// # What it must not import
//
// server, connectors/* and cmd/* (tests may: servertest, the null sink): connect sits
// below cmd/ferry and above iggy, sdk, connect/config and connect/plugin. Only native.go
// needs cgo; without cgo the package builds without [NativeSinkLoader] and
// [NativeSourceLoader], and native plugins come in through [Options.LoadSinkPlugin] and
// [Options.LoadSourcePlugin].
package connect
