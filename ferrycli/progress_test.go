package ferrycli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
)

func TestCaughtUp(t *testing.T) {
	sink := func(st connect.State) connect.Status {
		return connect.Status{Kind: connect.KindSink, Key: "out", State: st,
			Stats: connect.Stats{Committed: 10},
			Sink: &config.Sink{Common: config.Common{Key: "out", Path: "builtin:file", PluginConfig: []byte(`{"path":"o.jsonl"}`)},
				Streams: []config.SinkStream{{Stream: "s", Topics: []string{"t"}}}}}
	}
	src := func(st connect.State, sent uint64) connect.Status {
		return connect.Status{Kind: connect.KindSource, Key: "gen", State: st, Stats: connect.Stats{Sent: sent}}
	}
	// The server's view of partition 0 of s/t (and partition 1 where asked).
	server := func(parts ...connect.PartitionOffsets) sinkOffsets {
		return func(key string) ([]connect.PartitionOffsets, error) {
			if key != "out" {
				return nil, errors.New("unknown sink " + key)
			}
			return parts, nil
		}
	}
	part := func(id uint32, current, stored int64, uncommitted uint64) connect.PartitionOffsets {
		return connect.PartitionOffsets{Stream: "s", Topic: "t", Partition: id, Current: current, Stored: stored,
			Lag: uint64(current - stored), Uncommitted: uncommitted}
	}
	down := func(string) ([]connect.PartitionOffsets, error) { return nil, errors.New("connection refused") }
	running, stopped := connect.StateRunning, connect.StateStopped
	for _, tc := range []struct {
		name    string
		sts     []connect.Status
		offsets sinkOffsets
		api     string
		want    string
	}{
		{"source still running", []connect.Status{src(running, 10), sink(running)}, server(part(0, 9, 9, 0)), "", ""},
		{"sink behind", []connect.Status{src(stopped, 10), sink(running)}, server(part(0, 9, 8, 0)), "", ""},
		{"sink in error", []connect.Status{src(stopped, 10), sink(connect.StateError)}, server(part(0, 9, 9, 0)), "", ""},
		{"uncommitted", []connect.Status{src(stopped, 10), sink(running)}, server(part(0, 9, 9, 1)), "", ""},
		{"one partition behind", []connect.Status{src(stopped, 10), sink(running)}, server(part(0, 4, 4, 0), part(1, 4, 3, 0)), "", ""},
		{"no sink", []connect.Status{src(stopped, 10)}, server(part(0, 9, 9, 0)), "", ""},
		{"offsets unreadable", []connect.Status{src(stopped, 10), sink(running)}, down, "", ""},
		{"no partitions", []connect.Status{src(stopped, 0), sink(running)}, server(), "", ""},
		{"caught up, no API", []connect.Status{src(stopped, 10), sink(running)}, server(part(0, 9, 9, 0)), "",
			"ferry: caught up: 10 messages produced, 10 delivered and committed by the sinks (out → o.jsonl); offsets: ferry offsets --stream s --topic t --group iggy-connect-sink-out. Waiting for more; Ctrl-C stops."},
		{"caught up, API", []connect.Status{src(stopped, 10), sink(running)}, server(part(0, 9, 9, 0)), "http://127.0.0.1:8081",
			"ferry: caught up: 10 messages produced, 10 delivered and committed by the sinks (out → o.jsonl); offsets and lag: ferry status --url http://127.0.0.1:8081 (or http://127.0.0.1:8081/ui/). Waiting for more; Ctrl-C stops."},
		// A rerun with everything delivered before: nothing sent, nothing polled, the
		// server's offsets say all is stored. Before, it waited for a poll that never came.
		{"rerun, nothing new", []connect.Status{src(stopped, 0), sink(running)}, server(part(0, 9, 9, 0)), "",
			"ferry: caught up: 10 messages produced (0 by this run), 10 delivered and committed by the sinks (out → o.jsonl); offsets: ferry offsets --stream s --topic t --group iggy-connect-sink-out. Waiting for more; Ctrl-C stops."},
		{"two partitions, no source", []connect.Status{sink(running)}, server(part(0, 4, 4, 0), part(1, 2, 2, 0)), "",
			"ferry: caught up: 8 messages produced (0 by this run), 8 delivered and committed by the sinks (out → o.jsonl); offsets: ferry offsets --stream s --topic t --group iggy-connect-sink-out. Waiting for more; Ctrl-C stops."},
	} {
		got, ok := caughtUp(tc.sts, tc.offsets, tc.api)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: caughtUp = %q, %t; want %q", tc.name, got, ok, tc.want)
		}
	}
}

// A run of sources only printed "delivered 0 (0/s)  committed 0", one of sinks only
// "produced 0 (0/s)  sent 0": each line now holds only its kind's counters.
func TestProgressLineColumnsPerKind(t *testing.T) {
	src := connect.Status{Kind: connect.KindSource, Key: "gen", State: connect.StateRunning, Stats: connect.Stats{Produced: 5, Sent: 5}}
	snk := connect.Status{Kind: connect.KindSink, Key: "out", State: connect.StateRunning, Stats: connect.Stats{Delivered: 3, Committed: 2}}
	for _, tc := range []struct {
		name string
		sts  []connect.Status
		want string
	}{
		{"sources only", []connect.Status{src}, "ferry    1.0s  produced 5 (5/s)  sent 5\n"},
		{"sinks only", []connect.Status{snk}, "ferry    1.0s  delivered 3 (3/s)  committed 2\n"},
		{"both", []connect.Status{src, snk}, "ferry    1.0s  produced 5 (5/s)  sent 5  delivered 3 (3/s)  committed 2\n"},
	} {
		var b strings.Builder
		p := newProgress(&b)
		p.print(sum(tc.sts), p.start.Add(time.Second))
		if b.String() != tc.want {
			t.Errorf("%s: %q; want %q", tc.name, b.String(), tc.want)
		}
	}
}

// A run without sinks never said it was caught up.
func TestSourcesCaughtUp(t *testing.T) {
	src := func(st connect.State, produced, sent uint64) connect.Status {
		return connect.Status{Kind: connect.KindSource, Key: "gen", State: st, Stats: connect.Stats{Produced: produced, Sent: sent}}
	}
	const want = "ferry: caught up: 7 messages sent to Iggy by the sources and acknowledged. Waiting for more; Ctrl-C stops."
	for _, tc := range []struct {
		name string
		sts  []connect.Status
		idle bool
		want string
	}{
		{"running, idle, all sent", []connect.Status{src(connect.StateRunning, 7, 7)}, true, want},
		{"ended", []connect.Status{src(connect.StateStopped, 7, 7)}, false, want},
		{"running, moving", []connect.Status{src(connect.StateRunning, 7, 7)}, false, ""},
		{"running, unsent", []connect.Status{src(connect.StateRunning, 8, 7)}, true, ""},
		{"starting", []connect.Status{src(connect.StateStarting, 0, 0)}, true, ""},
		{"with a sink", []connect.Status{src(connect.StateStopped, 7, 7), {Kind: connect.KindSink, State: connect.StateRunning}}, true, ""},
		{"nothing", nil, true, ""},
	} {
		got, ok := sourcesCaughtUp(tc.sts, tc.idle)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %q, %t; want %q", tc.name, got, ok, tc.want)
		}
	}
	if got := untilIdle(want, 2*time.Second); got != "ferry: caught up: 7 messages sent to Iggy by the sources and acknowledged. Stopping once nothing moves for 2s (--exit-when-idle)." {
		t.Errorf("untilIdle: %q", got)
	}
	if got := untilIdle(want, 0); got != want {
		t.Errorf("untilIdle without --exit-when-idle: %q", got)
	}
}
