package ferrycli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/connect/config"
)

// totals sums the counters of every connector.
type totals struct {
	produced, sent         uint64 // sources
	polled, delivered      uint64 // sinks
	committed              uint64 // sinks: offsets stored by the runtime
	errors                 uint64 // send errors + consume errors + store errors
	sourcesActive, failing int
	sources, sinks         int    // connectors of each kind, whatever their state
	restarting             int    // connectors waiting for a scheduled restart
	restarts               uint64 // restarts so far, automatic and requested
}

func sum(sts []connect.Status) totals {
	var t totals
	for _, s := range sts {
		switch s.Kind {
		case "source":
			t.sources++
			t.produced += s.Stats.Produced
			t.sent += s.Stats.Sent
			t.errors += s.Stats.SendErrors
			if s.State == connect.StateStarting || s.State == connect.StateRunning || s.State == connect.StateStopping {
				t.sourcesActive++
			}
		default:
			t.sinks++
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
		t.restarts += s.Restart.Total
	}
	return t
}

// moved reports whether any counter differs, or a connector restarted (a restarted
// connector is announced caught up again once it is).
func (t totals) moved(o totals) bool {
	return t.produced != o.produced || t.sent != o.sent || t.polled != o.polled ||
		t.delivered != o.delivered || t.committed != o.committed || t.restarts != o.restarts
}

// progress prints one line per tick: totals and per-second rates since the last tick.
type progress struct {
	w      io.Writer
	apiURL string // the HTTP API's, for the caught-up line ("" when off)
	start  time.Time
	last   totals
	at     time.Time
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
	// A run of sources only says nothing of deliveries, one of sinks only nothing of
	// production: a column of zeros there reads as something stuck.
	line := fmt.Sprintf("ferry %6.1fs", now.Sub(p.start).Seconds())
	if t.sources > 0 || t.sinks == 0 {
		line += fmt.Sprintf("  produced %d (%.0f/s)  sent %d", t.produced, rate(t.produced, p.last.produced), t.sent)
	}
	if t.sinks > 0 || t.sources == 0 {
		line += fmt.Sprintf("  delivered %d (%.0f/s)  committed %d", t.delivered, rate(t.delivered, p.last.delivered), t.committed)
	}
	if t.errors > 0 {
		line += fmt.Sprintf("  errors %d", t.errors)
	}
	if t.failing > 0 {
		line += fmt.Sprintf("  connectors in error %d", t.failing)
	}
	fmt.Fprintln(p.w, line)
	p.last, p.at = t, now
}

// sinkOffsets reads a sink's partitions from the server: current and stored offsets, and
// what it has polled and not stored (Runtime.Offsets).
type sinkOffsets func(key string) ([]connect.PartitionOffsets, error)

// serverOffsets reads a sink's offsets through rt, each read bounded by offsetsTimeout.
func serverOffsets(ctx context.Context, rt *connect.Runtime) sinkOffsets {
	return func(key string) ([]connect.PartitionOffsets, error) {
		octx, cancel := context.WithTimeout(ctx, offsetsTimeout)
		defer cancel()
		return rt.Offsets(octx, key)
	}
}

// offsetsTimeout bounds one read of a sink's offsets for the caught-up line.
const offsetsTimeout = 10 * time.Second

// caughtUp reports whether the run has nothing left to do: every source ended (or there
// is none), at least one sink runs, and every partition of every sink is stored, as the
// server says, up to its current offset with nothing uncommitted. The server's offsets
// count what earlier runs stored too, so a rerun with nothing new, or a sink restarted
// through the API, is caught up as well. offsets is called only once the statuses allow
// it. It returns the line that says so: how many messages, where file sinks wrote them,
// how to see the offsets.
func caughtUp(sts []connect.Status, offsets sinkOffsets, apiURL string) (string, bool) {
	var sinks []*connect.Status
	var sent uint64
	for i := range sts {
		s := &sts[i]
		switch s.Kind {
		case connect.KindSource:
			if s.State == connect.StateStarting || s.State == connect.StateRunning || s.State == connect.StateStopping {
				return "", false
			}
			sent += s.Stats.Sent
		case connect.KindSink:
			if s.State != connect.StateRunning {
				return "", false
			}
			sinks = append(sinks, s)
		}
	}
	if len(sinks) == 0 {
		return "", false
	}
	type partKey struct {
		stream, topic string
		id            uint32
	}
	inTopics := map[partKey]uint64{} // messages in each partition the sinks read
	var stored uint64
	var files []string
	var first *connect.PartitionOffsets
	for _, s := range sinks {
		parts, err := offsets(s.Key)
		if err != nil || len(parts) == 0 {
			return "", false
		}
		for i, p := range parts {
			if p.Lag != 0 || p.Uncommitted != 0 {
				return "", false
			}
			inTopics[partKey{p.Stream, p.Topic, p.Partition}] = uint64(p.Current + 1)
			stored += uint64(p.Stored + 1)
			if first == nil {
				first = &parts[i]
			}
		}
		if s.Sink != nil && s.Sink.Path == "builtin:file" {
			var pc struct{ Path string }
			if json.Unmarshal(s.Sink.PluginConfig, &pc) == nil && pc.Path != "" {
				files = append(files, s.Key+" → "+pc.Path)
			}
		}
	}
	var produced uint64
	for _, n := range inTopics {
		produced += n
	}
	line := fmt.Sprintf("ferry: caught up: %d messages produced", produced)
	if sent != produced {
		line += fmt.Sprintf(" (%d by this run)", sent)
	}
	line += fmt.Sprintf(", %d delivered and committed by the sinks", stored)
	if len(files) > 0 {
		line += " (" + strings.Join(files, ", ") + ")"
	}
	if apiURL != "" {
		line += fmt.Sprintf("; offsets and lag: ferry status --url %s (or %s/ui/)", apiURL, apiURL)
	} else if cfg := sinks[0].Sink; cfg != nil && len(cfg.Streams) > 0 {
		group := cfg.Streams[0].ConsumerGroup
		if group == "" {
			group = config.DefaultConsumerGroup(cfg.Key)
		}
		line += fmt.Sprintf("; offsets: ferry offsets --stream %s --topic %s --group %s", first.Stream, first.Topic, group)
	}
	return line + "." + waitingTail, true
}

// sourcesCaughtUp is caughtUp for a run without sinks: every source ended, or every one
// still running has had Iggy acknowledge all it read and idle says nothing moved since the
// last look (a CDC source waiting for changes). It returns the line that says so.
func sourcesCaughtUp(sts []connect.Status, idle bool) (string, bool) {
	var sent uint64
	n := 0
	for _, s := range sts {
		switch s.Kind {
		case connect.KindSink:
			return "", false
		case connect.KindSource:
			n++
			active := s.State == connect.StateStarting || s.State == connect.StateRunning || s.State == connect.StateStopping
			if active && (!idle || s.State != connect.StateRunning || s.Stats.Sent != s.Stats.Produced) {
				return "", false
			}
			sent += s.Stats.Sent
		}
	}
	if n == 0 {
		return "", false
	}
	return fmt.Sprintf("ferry: caught up: %d messages sent to Iggy by the sources and acknowledged. Waiting for more; Ctrl-C stops.", sent), true
}

// waitingTail is how a caught-up line ends; exitIdle replaces it when the run ends by itself.
const waitingTail = " Waiting for more; Ctrl-C stops."

// untilIdle ends a caught-up line with what a run with --exit-when-idle does next.
func untilIdle(line string, exitIdle time.Duration) string {
	if exitIdle <= 0 {
		return line
	}
	return strings.TrimSuffix(line, waitingTail) + fmt.Sprintf(" Stopping once nothing moves for %s (--exit-when-idle).", exitIdle)
}
