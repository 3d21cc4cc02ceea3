package metrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/connect"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/internal/testkit/iggykit"
	"github.com/ferryio/ferry/internal/testkit/runkit"
)

// widePartitions is the partition count of the wide topic: the embedded server's
// default cap for one topic.
const widePartitions = 10_000

// wideSink is a sink of wide/t in group "wide" whose built-in does not exist: it never
// starts, and its lag is read from Iggy alone, for every partition.
const wideSink = `type = "sink"
key = "wide"
enabled = true
version = 0
name = "wide"
path = "builtin:missing"

[[streams]]
stream = "wide"
topics = ["t"]
schema = "raw"
consumer_group = "wide"
`

// wideLag is what the wide fixture holds in partition p: p%7+1 messages in every tenth
// partition, the group's stored offset (p%7)/2 in every twentieth; current and stored are
// -1 when there are none.
func wideLag(p uint32) (current, stored int64, lag uint64) {
	current, stored = -1, -1
	if p%10 == 0 {
		current = int64(p % 7)
	}
	if p%20 == 0 {
		stored = int64(p%7) / 2
	}
	if current < 0 {
		return current, stored, 0
	}
	return current, stored, uint64(current - stored)
}

// wideRuntime starts a server with a topic of widePartitions partitions filled and
// stored as wideLag says, and a runtime with wideSink over it.
func wideRuntime(tb testing.TB) (*iggykit.Env, *connect.Runtime) {
	tb.Helper()
	kit := iggykit.Start(tb)
	kit.Topic("wide", "t", widePartitions)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, t := iggy.Name("wide"), iggy.Name("t")
	for p := uint32(0); p < widePartitions; p += 10 {
		msgs := make([]iggy.Message, p%7+1)
		for i := range msgs {
			msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, "p%d-%d", p, i)}
		}
		if _, err := kit.Admin.SendMessages(ctx, s, t, wire.ToPartition(p), msgs); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := kit.Admin.CreateConsumerGroup(ctx, s, t, "wide"); err != nil {
		tb.Fatal(err)
	}
	g := iggy.Name("wide")
	if err := kit.Admin.JoinConsumerGroup(ctx, s, t, g); err != nil { // the only member owns every partition
		tb.Fatal(err)
	}
	for p := uint32(0); p < widePartitions; p += 20 {
		_, stored, _ := wideLag(p)
		if err := kit.Admin.StoreOffset(ctx, wire.Consumer{Kind: wire.ConsumerGroup, ID: g}, s, t, p, uint64(stored)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := kit.Admin.LeaveConsumerGroup(ctx, s, t, g); err != nil {
		tb.Fatal(err)
	}
	return kit, runkit.StartFiles(tb, kit.Dial(), map[string]string{"wide.toml": wideSink})
}

// TestLagOfAWideTopic: a sink of a topic of 10,000 partitions gets one ferry_sink_lag
// series per partition, each with the exact lag (a sample checked), and Offsets the same
// figures (no timing is asserted). Before, the 10,000 reads of the group's offsets took longer than the read's
// 5 s budget: no ferry_sink_lag at all, and Offsets failed.
func TestLagOfAWideTopic(t *testing.T) {
	_, rt := wideRuntime(t)
	// The first caller waits 5 s at most for the first read; on a slow machine the read
	// goes on after that, and is kept for the next callers: wait until it is.
	var offs []connect.PartitionOffsets
	testkit.WaitFor(t, "the first read of the wide topic's offsets", func() bool {
		var err error
		offs, err = rt.Offsets(context.Background(), "wide")
		return err == nil
	})
	body := serve(t, Handler(rt), "")
	if n := strings.Count(body, "\nferry_sink_lag{"); n != widePartitions {
		t.Fatalf("%d ferry_sink_lag series, want %d", n, widePartitions)
	}
	if n := strings.Count(body, "\nferry_sink_offsets_age_seconds{"); n != 1 || !strings.Contains(body, "\nferry_sink_offsets_age_seconds{connector_key=\"wide\",stream=\"wide\",topic=\"t\"} ") {
		t.Errorf("%d ferry_sink_offsets_age_seconds series, want the one of wide/t", n)
	}
	sample := []uint32{0, 1, 9, 10, 20, 30, 40, 70, 140, 4990, 5000, 9980, 9990, 9999}
	for _, p := range sample {
		current, stored, lag := wideLag(p)
		labels := fmt.Sprintf(`{connector_key="wide",partition="%d",stream="wide",topic="t"}`, p)
		want := map[string]string{"ferry_sink_lag": fmt.Sprint(lag)}
		if current >= 0 {
			want["ferry_sink_current_offset"] = fmt.Sprint(current)
		}
		if stored >= 0 {
			want["ferry_sink_stored_offset"] = fmt.Sprint(stored)
		}
		for fam, v := range want {
			if line := fam + labels + " " + v; !strings.Contains(body, "\n"+line+"\n") {
				t.Errorf("partition %d: no line %s", p, line)
			}
		}
		for _, fam := range []string{"ferry_sink_current_offset", "ferry_sink_stored_offset"} {
			if _, ok := want[fam]; !ok && strings.Contains(body, "\n"+fam+labels+" ") {
				t.Errorf("partition %d has a %s series, want none", p, fam)
			}
		}
	}
	if len(offs) != widePartitions {
		t.Fatalf("offsets: %d entries, want %d", len(offs), widePartitions)
	}
	for _, p := range sample {
		current, stored, lag := wideLag(p)
		want := connect.PartitionOffsets{Stream: "wide", Topic: "t", Partition: p, Current: current, Stored: stored, Lag: lag}
		got := offs[p]
		if got.ReadAt.IsZero() {
			t.Errorf("offsets of partition %d: no ReadAt", p)
		}
		got.ReadAt = time.Time{}
		if got != want {
			t.Errorf("offsets of partition %d: %+v, want %+v", p, got, want)
		}
	}
}

// BenchmarkScrapeWideTopic is one scrape of Handler over a real runtime with a sink of a
// topic of 10,000 partitions, on the embedded server over TCP:
//
//   - fresh: the first scrape after the sink's restart, which forgot the kept offsets:
//     it waits for a whole read of the topic (GetTopic and 10,000 GetConsumerOffset);
//   - due: a scrape when the kept read is more than a second old (Prometheus scrapes
//     every 15 s or so): before, it waited for a whole read too.
//
// lag_series is the fewest ferry_sink_lag series a scrape held (10,000 when every
// partition's lag was there every time).
func BenchmarkScrapeWideTopic(b *testing.B) {
	_, rt := wideRuntime(b)
	h := Handler(rt)
	var series int // the fewest ferry_sink_lag series a scrape of this sub-benchmark had
	scrape := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
		series = min(series, strings.Count(w.Body.String(), "\nferry_sink_lag{"))
	}
	b.Run("fresh", func(b *testing.B) {
		series = widePartitions
		for b.Loop() {
			b.StopTimer()
			if err := rt.Restart(context.Background(), connect.KindSink, "wide"); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			scrape()
		}
		b.ReportMetric(float64(series), "lag_series")
	})
	b.Run("due", func(b *testing.B) {
		scrape()
		series = widePartitions
		for b.Loop() {
			b.StopTimer()
			time.Sleep(1100 * time.Millisecond) // the kept read is past its second
			b.StartTimer()
			scrape()
		}
		b.ReportMetric(float64(series), "lag_series")
	})
}
