package ferrycli

import (
	"errors"
	"testing"

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
