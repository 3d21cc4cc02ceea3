// Package sdk is the Go connector API of Ferry: the only package a connector author imports.
//
// A sink receives batches of consumed messages through [Sink.Consume]; a source produces
// batches through [Source.Read]. Connectors that run in `sink_controlled` commit mode get a
// [Committer] in their [SinkEnv] and decide themselves when an offset may advance; each sink
// declares in its [ConfigSpec] when it does ([SinkCommits]), so the runtime refuses that mode
// for a sink that never would.
//
// The package holds types and contracts only: no runtime, no I/O, no goroutines. It must not
// import any other Ferry package.
package sdk
