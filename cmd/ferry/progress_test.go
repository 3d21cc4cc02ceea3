package main

import (
	"testing"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
)

func TestCaughtUp(t *testing.T) {
	sink := func(stored int64) connect.Status {
		return connect.Status{Kind: connect.KindSink, Key: "out", State: connect.StateRunning,
			Stats: connect.Stats{Committed: 10},
			Sink: &config.Sink{Common: config.Common{Key: "out", Path: "builtin:file", PluginConfig: []byte(`{"path":"o.jsonl"}`)},
				Streams: []config.SinkStream{{Stream: "s", Topics: []string{"t"}}}},
			Partitions: []connect.PartitionStatus{{Stream: "s", Topic: "t", Current: 9, Stored: stored}}}
	}
	src := func(st connect.State) connect.Status {
		return connect.Status{Kind: connect.KindSource, Key: "gen", State: st, Stats: connect.Stats{Sent: 10}}
	}
	for _, tc := range []struct {
		name string
		sts  []connect.Status
		api  string
		want string
	}{
		{"source still running", []connect.Status{src(connect.StateRunning), sink(9)}, "", ""},
		{"sink behind", []connect.Status{src(connect.StateStopped), sink(8)}, "", ""},
		{"no sink", []connect.Status{src(connect.StateStopped)}, "", ""},
		{"caught up, no API", []connect.Status{src(connect.StateStopped), sink(9)}, "",
			"ferry: caught up: 10 messages produced, 10 delivered and committed by the sinks (out → o.jsonl); offsets: ferry offsets --stream s --topic t --group iggy-connect-sink-out. Waiting for more; Ctrl-C stops."},
		{"caught up, API", []connect.Status{src(connect.StateStopped), sink(9)}, "http://127.0.0.1:8081",
			"ferry: caught up: 10 messages produced, 10 delivered and committed by the sinks (out → o.jsonl); offsets and lag: ferry status --url http://127.0.0.1:8081 (or http://127.0.0.1:8081/ui/). Waiting for more; Ctrl-C stops."},
	} {
		got, ok := caughtUp(tc.sts, tc.api)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: caughtUp = %q, %t; want %q", tc.name, got, ok, tc.want)
		}
	}
}
