package main

import (
	"fmt"
	"io"
	"time"

	"github.com/ferryio/ferry/connect"
)

// totals sums the counters of every connector.
type totals struct {
	produced, sent         uint64 // sources
	polled, delivered      uint64 // sinks
	committed              uint64 // sinks: offsets stored by the runtime
	errors                 uint64 // send errors + consume errors + store errors
	sourcesActive, failing int
	restarting             int // connectors waiting for a scheduled restart
}

func sum(sts []connect.Status) totals {
	var t totals
	for _, s := range sts {
		switch s.Kind {
		case "source":
			t.produced += s.Stats.Produced
			t.sent += s.Stats.Sent
			t.errors += s.Stats.SendErrors
			if s.State == connect.StateStarting || s.State == connect.StateRunning || s.State == connect.StateStopping {
				t.sourcesActive++
			}
		default:
			t.polled += s.Stats.Polled
			t.delivered += s.Stats.Delivered
			t.committed += s.Stats.Committed
			t.errors += s.Stats.ConsumeErrors + s.Stats.StoreErrors
		}
		if s.State == connect.StateError {
			t.failing++
		}
		if !s.Restart.NextRetry.IsZero() {
			t.restarting++
		}
	}
	return t
}

// moved reports whether any counter differs.
func (t totals) moved(o totals) bool {
	return t.produced != o.produced || t.sent != o.sent || t.polled != o.polled ||
		t.delivered != o.delivered || t.committed != o.committed
}

// progress prints one line per tick: totals and per-second rates since the last tick.
type progress struct {
	w     io.Writer
	start time.Time
	last  totals
	at    time.Time
}

func newProgress(w io.Writer) *progress {
	now := time.Now()
	return &progress{w: w, start: now, at: now}
}

func (p *progress) print(t totals, now time.Time) {
	dt := now.Sub(p.at).Seconds()
	rate := func(cur, prev uint64) float64 {
		if dt <= 0 || cur < prev {
			return 0
		}
		return float64(cur-prev) / dt
	}
	line := fmt.Sprintf("ferry %6.1fs  produced %d (%.0f/s)  sent %d  delivered %d (%.0f/s)  committed %d",
		now.Sub(p.start).Seconds(), t.produced, rate(t.produced, p.last.produced), t.sent,
		t.delivered, rate(t.delivered, p.last.delivered), t.committed)
	if t.errors > 0 {
		line += fmt.Sprintf("  errors %d", t.errors)
	}
	if t.failing > 0 {
		line += fmt.Sprintf("  connectors in error %d", t.failing)
	}
	fmt.Fprintln(p.w, line)
	p.last, p.at = t, now
}
