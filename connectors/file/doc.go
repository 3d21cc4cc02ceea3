// Package file is the built-in "file" sink: it appends each message as one JSON object per
// line (JSON Lines) to a file and makes it durable with fsync. Its guarantee is at least
// once under sink_controlled, and under after_consuming with fsync_each_batch: a crash
// may repeat the lines written after the last commit, never lose one.
//
// Durability by commit mode:
//   - sink_controlled (SinkEnv.Committer != nil): a goroutine fsyncs every flush_interval and
//     only then commits, per partition, the last offset written before that fsync (kept by
//     sdk.Positions, in delivery order: after a purge, what was written since). An offset is
//     never committed before the line holding it is on disk.
//   - after_consuming / after_polling: Consume returns once the batch is written to the file
//     (the OS has it; it survives a crash of Ferry, not of the machine). Set fsync_each_batch
//     to fsync before Consume returns, so after_consuming's stored offset is never ahead of
//     the disk, at the cost of one fsync per batch. The interval fsync runs as well.
//
// A batch is written whole or not at all: when a write fails part-way (a full disk), the
// file is truncated back to its size before the batch, so it always ends with a complete
// record and the retry appends cleanly; if that truncate fails too, the error says so and
// the sink writes nothing more. Open drops a partial record at the end of the file (a
// write cut short by a crash, or that failed truncate): such a record was never
// acknowledged, so it is redelivered.
//
// It imports only sdk and the standard library.
package file
