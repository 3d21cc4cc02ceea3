package metrics

import (
	"context"
	"time"

	"github.com/ferryio/ferry/connect"
)

// fixedSource reports fixed statuses: data, not a model of the runtime.
type fixedSource struct {
	sts            []connect.Status
	sinks, sources int
}

func (f fixedSource) Status() []connect.Status         { return f.sts }
func (f fixedSource) Configured() (sinks, sources int) { return f.sinks, f.sources }

// SinkPartitions answers the status's own partitions, as a runtime whose Iggy cannot be
// read does.
func (f fixedSource) SinkPartitions(_ context.Context, st connect.Status) ([]connect.PartitionStatus, error) {
	return st.Partitions, nil
}

// hist builds a histogram snapshot over bounds from per-bucket counts (len(bounds)+1,
// the last above the highest bound).
func hist(bounds []time.Duration, sum time.Duration, counts ...uint64) connect.Histogram {
	h := connect.Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1), Sum: sum}
	copy(h.Counts, counts)
	for _, c := range h.Counts {
		h.Count += c
	}
	return h
}

// fixture: a running sink s1 with two partitions (one with nothing stored), a source
// gen that stopped at the end of its input, and a sink s2 in state error.
func fixture() fixedSource {
	latency := []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
		20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}
	return fixedSource{sinks: 3, sources: 2, sts: []connect.Status{
		{Key: "s1", Kind: connect.KindSink, State: connect.StateRunning,
			Restart: connect.RestartState{Total: 2},
			Stats: connect.Stats{Polled: 42, Delivered: 40, Committed: 30, ConsumeErrors: 3, FailedBatches: 1,
				DeadLettered: 5, Skipped: 6, Decoded: 1200, DecodeErrors: 3, TransformErrors: 2, Stores: 7, StoreErrors: 2, StoresRefused: 1, Revoked: 4, TopicsRecreated: 2,
				CommitsAccepted: 11, CommitsStale: 12, CommitsOutOfRange: 13, CommitsUnknown: 14,
				Filtered: 8, Retries: 9,
				StoreLatency: hist(latency, 1500*time.Millisecond, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
				Stages: map[string]connect.Histogram{
					connect.StageFFI:   hist(connect.StageBounds, 3*time.Millisecond, 0, 1, 0, 0, 2),
					connect.StageTotal: hist(connect.StageBounds, 7*time.Second, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
				}},
			Partitions: []connect.PartitionStatus{
				{Stream: "st", Topic: "tp", Partition: 0, Polled: 41, Delivered: 39, Done: 29, Stored: 29,
					Pending: 0, Uncommitted: 12, Current: 99, Lag: 70, StoreFailures: 3,
					StoreError: &connect.LastError{Message: "iggy: CannotSaveMessagesToSegment (4006)"}},
				{Stream: "st", Topic: "tp", Partition: 1, Polled: 0, Delivered: -1, Done: -1, Stored: -1,
					Pending: 0, Uncommitted: 1, Current: -1},
			}},
		{Key: "gen", Kind: connect.KindSource, State: connect.StateStopped,
			Stats: connect.Stats{Produced: 100, Sent: 90, SendErrors: 2, StoreErrors: 1, Filtered: 3, Retries: 4,
				Stages: map[string]connect.Histogram{
					connect.StageIggySend: hist(connect.StageBounds, 250*time.Microsecond, 0, 0, 1),
				}}},
		{Key: "s2", Kind: connect.KindSink, State: connect.StateError},
	}}
}
