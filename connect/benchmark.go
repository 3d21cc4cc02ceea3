package connect

import (
	"fmt"
	"log/slog"
	"time"
)

// BenchmarkTarget is the log target of the per-batch benchmark events of a connector with
// benchmark = true: the "target" attribute of each event, as Iggy's runtime names it, so
// tools that filter Iggy's logs on it read Ferry's unchanged.
const BenchmarkTarget = "iggy_connectors::benchmark"

// benchLog writes the benchmark events of one connector instance. Its logger is the
// runtime's own, without the runner's attributes, so an event carries exactly Iggy's
// fields (in JSON logs: top-level keys beside time, level and msg). A nil *benchLog, the
// connector without benchmark = true, writes nothing.
type benchLog struct {
	log *slog.Logger
}

// newBenchLog returns the benchmark writer of a connector: nil unless on.
func newBenchLog(on bool, base *slog.Logger) *benchLog {
	if !on {
		return nil
	}
	return &benchLog{log: base}
}

// enabled logs, once per started instance, that the connector emits benchmark events.
func (b *benchLog) enabled(kind string, id uint32, key string) {
	if b == nil {
		return
	}
	b.log.Info(fmt.Sprintf("Benchmark mode enabled for %s connector with ID: %d, key: %s. Per-batch events on target '%s'.",
		kind, id, key, BenchmarkTarget), "target", BenchmarkTarget)
}

// sinkBatch is one batch as a sink delivered it, for its benchmark event. Stage times end
// where the next begins: prepare (decode and transforms) from start to prepared, the
// sink's Consume (ffi, with its retries) from prepared to consumed; total from start to
// the event.
type sinkBatch struct {
	key, stream, topic    string
	partition             uint32
	currentOffset         uint64
	size, processed       int
	start, prepared, done time.Time
}

// sink writes the event of one sink batch. Ferry decodes payloads while it prepares them,
// so decode_us is 0 and the decode time is inside prepare_us.
func (b *benchLog) sink(e sinkBatch) {
	if b == nil {
		return
	}
	now := time.Now()
	b.log.Info("benchmark", "target", BenchmarkTarget,
		"connector_type", KindSink, "connector_key", e.key, "stream", e.stream, "topic", e.topic,
		"partition_id", e.partition, "current_offset", e.currentOffset,
		"batch_size", e.size, "processed_count", e.processed,
		"decode_us", uint64(0), "prepare_us", micros(e.prepared.Sub(e.start)),
		"ffi_us", micros(e.done.Sub(e.prepared)), "total_us", micros(now.Sub(e.start)))
}

// sourceBatch is one batch as a source handled it, for its benchmark event. The send and
// save durations are zero when the stage did not run; saved reports a state saved.
type sourceBatch struct {
	key, stream, topic string
	size, sent         int
	start              time.Time
	prepare, send      time.Duration
	save               time.Duration
	saved              bool
}

// source writes the event of one source batch. Ferry checks and encodes payloads in one
// pass, so decode_us is 0 and that time is inside prepare_us.
func (b *benchLog) source(e sourceBatch) {
	if b == nil {
		return
	}
	save := uint64(0)
	if e.saved {
		save = micros(e.save)
	}
	b.log.Info("benchmark", "target", BenchmarkTarget,
		"connector_type", KindSource, "connector_key", e.key, "stream", e.stream, "topic", e.topic,
		"batch_size", e.size, "sent_count", e.sent,
		"decode_us", uint64(0), "prepare_us", micros(e.prepare), "iggy_send_us", micros(e.send),
		"state_saved", e.saved, "state_save_us", save, "total_us", micros(time.Since(e.start)))
}

// micros is d in whole microseconds, never negative.
func micros(d time.Duration) uint64 {
	if d < 0 {
		return 0
	}
	return uint64(d.Microseconds())
}
