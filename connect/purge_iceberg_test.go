package connect

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/icebergtest"
	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server/servertest"
)

// TestPurgedTopicIceberg: the Iceberg sink keeps each partition's last offset in the
// table's snapshot summaries, so after a purge it resumed past the new messages (the
// runtime sought past the table's 99) or dropped them as written already. Now the summary
// also keeps the timestamp of the message at that offset: a purge noticed while running,
// or one made while the runtime was stopped (the checked seek finds another message at
// 99), rewinds the partition, and the sink writes it in generation 1. pyiceberg reads the
// 100 rows before and the 150 after, each once; the last snapshot says offset 149 of
// generation 1 with the new message 149's timestamp.
func TestPurgedTopicIceberg(t *testing.T) {
	for _, during := range []string{"running", "stopped"} {
		t.Run(during, func(t *testing.T) { purgedTopicIceberg(t, during) })
	}
}

func purgedTopicIceberg(t *testing.T, during string) {
	_, url := pgtest.Connect(t)
	icebergtest.Python(t)
	g := &pollGate{}
	env := newIggyEnv(t, servertest.WithReplyDelay(g.hold))
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 100, func(i int) []byte { return fmt.Appendf(nil, `{"old":%d}`, i) })
	warehouse := t.TempDir()
	catalogName := fmt.Sprintf("purge_%s_%d", during, time.Now().UnixNano())
	doc := fmt.Sprintf(`type = "sink"
key = "ice"
enabled = true
version = 0
name = "Iceberg sink"
path = "builtin:iceberg"
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = 50
poll_interval = "5ms"
consumer_group = "g"

[plugin_config]
tables = ["lake.events"]
catalog_type = "sql"
uri = %q
warehouse = %q
catalog_name = %q
include_metadata = true
flush_interval = "50ms"

[[plugin_config.schema]]
name = "old"
type = "long"

[[plugin_config.schema]]
name = "new"
type = "long"
`, url, warehouse, catalogName)
	file := filepath.Join(t.TempDir(), "ice.toml")
	rt, logs := startSinkFileLogged(t, env, file, doc)
	defer func() { stopRuntime(t, rt) }()
	testkit.WaitFor(t, "the group's offset at 99", func() bool {
		o, ok := env.Stored("g", "s", "t", 0)
		return ok && o == 99
	})
	if during == "running" {
		g.close(t)
	} else {
		stopRuntime(t, rt)
	}
	if err := env.Admin.PurgeTopic(bg(t), iggy.Name("s"), iggy.Name("t")); err != nil {
		t.Fatal(err)
	}
	env.Fill("s", "t", 0, 150, func(i int) []byte { return fmt.Appendf(nil, `{"new":%d}`, i) })
	if during == "running" {
		g.open()
	} else {
		rt, logs = startSinkFileLogged(t, env, file, doc)
	}
	testkit.WaitFor(t, "the group's offset at 149", func() bool {
		o, ok := env.Stored("g", "s", "t", 0)
		return ok && o == 149
	})
	tbl := icebergtest.Read(t, icebergtest.Catalog{Name: catalogName, URL: url, Warehouse: "file://" + warehouse}, "lake.events")
	var got, want []string
	for _, r := range tbl.Rows {
		got = append(got, fmt.Sprintf("%v old=%v new=%v", r["iggy_offset"], r["old"], r["new"]))
	}
	for i := range 100 {
		want = append(want, fmt.Sprintf("%d old=%d new=<nil>", i, i))
	}
	for i := range 150 {
		want = append(want, fmt.Sprintf("%d old=<nil> new=%d", i, i))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("pyiceberg read %d rows, want the 100 before and the 150 after, once each; logs:\n%s", len(got), logs.String())
	}
	b, err := env.Dial().NewConsumer(bg(t), iggy.ConsumerConfig{Stream: iggy.Name("s"), Topic: iggy.Name("t"), Group: "probe", BatchSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := b.Poll(bg(t))
	if err != nil {
		t.Fatal(err)
	}
	wantTS := batch.Messages[len(batch.Messages)-1].Timestamp
	batch.Release()
	_ = b.Close(bg(t))
	last := tbl.Snapshots[len(tbl.Snapshots)-1]
	if last["ferry.offset.ice.s.t.0"] != "149" || last["ferry.generation.ice.s.t.0"] != "1" || last["ferry.timestamp.ice.s.t.0"] != strconv.FormatUint(wantTS, 10) {
		t.Fatalf("the last snapshot's summary %v; want offset 149, generation 1, timestamp %d (the new message 149's)", last, wantTS)
	}
	if st := rt.Status()[0].Stats; st.PartitionRewinds != 1 {
		t.Fatalf("partition rewinds %d; want 1", st.PartitionRewinds)
	}
	if !strings.Contains(logs.String(), `msg="iceberg sink: partition went back to offset 0 (purged)`) {
		t.Fatalf("no WARN of the sink's rewind; logs:\n%s", logs.String())
	}
}
