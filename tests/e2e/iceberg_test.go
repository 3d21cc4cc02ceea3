package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/icebergtest"
	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/testkit"
)

// icebergScale is the size of the SIGKILL test: 3 partitions × 2000 messages and 4 kills
// by default (CI); FERRY_ICEBERG_SOAK=1 (scripts/soak.sh) is the full run, 30000 and 10;
// FERRY_ICEBERG_E2E_MESSAGES and FERRY_ICEBERG_E2E_KILLS set either.
func icebergScale(t *testing.T) (perPartition uint64, kills int) {
	perPartition, kills = 2000, 4
	if os.Getenv("FERRY_ICEBERG_SOAK") == "1" {
		perPartition, kills = 30000, 10
	}
	if v := os.Getenv("FERRY_ICEBERG_E2E_MESSAGES"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 || n%100 != 0 {
			t.Fatalf("FERRY_ICEBERG_E2E_MESSAGES=%q: want a positive multiple of 100", v)
		}
		perPartition = n
	}
	if v := os.Getenv("FERRY_ICEBERG_E2E_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("FERRY_ICEBERG_E2E_KILLS=%q: want a positive number", v)
		}
		kills = n
	}
	return perPartition, kills
}

// icebergSink is the connector file of the Iceberg sink under test: the SQL catalog on
// PostgreSQL, a local warehouse, the table created from the declared schema, a flush
// every 300ms, and Iggy's stored offsets lagging the table by seconds (after a kill,
// Iggy alone would send again what the table holds).
func icebergSink(url, warehouse, catalogName string) string {
	return fmt.Sprintf(`type = "sink"
key = "ice"
enabled = true
version = 0
name = "iceberg"
path = "builtin:iceberg"
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = 1000
poll_interval = "5ms"

[commit]
interval = "3s"
delay = "3s"

[retry]
max_retries = 1000
initial_backoff = "50ms"

[plugin_config]
tables = ["lake.events"]
catalog_type = "sql"
uri = %q
warehouse = %q
catalog_name = %q
include_metadata = true
flush_interval = "300ms"
partition_by = ["identity(p)"]

[[plugin_config.schema]]
name = "p"
type = "long"
required = true

[[plugin_config.schema]]
name = "o"
type = "long"
required = true

[[plugin_config.schema]]
name = "pad"
type = "string"
`, url, warehouse, catalogName)
}

// icebergRows is the current snapshot's total-records of lake.events, read from the
// metadata file the SQL catalog points at (0 before the first append).
func icebergRows(t *testing.T, url, catalogName string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var loc string
	err = conn.QueryRow(ctx, `SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = 'lake' AND table_name = 'events'`, catalogName).Scan(&loc)
	if errors.Is(err, pgx.ErrNoRows) || err != nil && strings.Contains(err.Error(), "does not exist") {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(strings.TrimPrefix(loc, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Current   *int64 `json:"current-snapshot-id"`
		Snapshots []struct {
			ID      int64             `json:"snapshot-id"`
			Summary map[string]string `json:"summary"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	for _, s := range md.Snapshots {
		if md.Current != nil && s.ID == *md.Current {
			n, _ := strconv.ParseUint(s.Summary["total-records"], 10, 64)
			return n
		}
	}
	return 0
}

// TestIcebergExactlyOnceUnderSIGKILL: the Iceberg sink in ferry processes SIGKILLed at
// seeded random moments while 3 partitions are produced, then run to the end. pyiceberg
// (SqlCatalog on the same PostgreSQL) scans exactly 3N rows, 3N distinct (partition,
// offset), each row's values its message's; the last snapshot's offsets are N-1 per
// partition, and so are the offsets Iggy stored for the connector's group.
func TestIcebergExactlyOnceUnderSIGKILL(t *testing.T) {
	_, url := pgtest.Connect(t)
	icebergtest.Python(t)
	perPartition, kills := icebergScale(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, 3 × %d messages, %d kills", seed, perPartition, kills)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	catalogName := fmt.Sprintf("e2e%d", seed)
	warehouse := filepath.Join(dir, "warehouse")
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 3)
	conns := filepath.Join(dir, "iceberg")
	writeFile(t, filepath.Join(conns, "sink.toml"), icebergSink(url, warehouse, catalogName))
	args := []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"}

	// The last hundred of each partition come only after the last kill, so the last run
	// delivers and commits, and Iggy stores, the partitions' last offsets.
	var wg sync.WaitGroup
	var prodErr error
	head := perPartition - 100
	wg.Go(func() { prodErr = produceN(c, 3, head, 300*time.Millisecond) })
	total := 3 * perPartition
	written := func() uint64 { return icebergRows(t, url, catalogName) }
	run := startFerry(t, "run 0", dir, nil, args...)
	for i := 1; i <= kills; i++ {
		before := written()
		testkit.WaitFor(t, fmt.Sprintf("run %d writing", i-1), func() bool {
			return run.exited() || written() > before || before == 3*head
		})
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		if run.exited() {
			t.Fatalf("run %d exited by itself: %v\n%s", i-1, run.err, tail(run.out.String(), 30))
		}
		run.kill()
		t.Logf("kill %d: %d rows in the table", i, written())
		run = startFerry(t, fmt.Sprintf("run %d", i), dir, nil, args...)
	}
	wg.Wait()
	if prodErr != nil {
		t.Fatal(prodErr)
	}
	if err := producePadded(c, 3, head, perPartition, 0, soakPad); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "every message in the table", func() bool {
		if run.exited() {
			t.Fatalf("last run exited: %v\n%s", run.err, tail(run.out.String(), 30))
		}
		return written() >= total
	})
	testkit.WaitFor(t, "the last run's sink running", func() bool {
		return strings.Contains(run.out.String(), `msg="sink running"`)
	})
	// A graceful stop stores every committed offset in Iggy at once (the commit delay is 3s).
	group := wire.Consumer{Kind: wire.ConsumerGroup, ID: iggy.Name("iggy-connect-sink-ice")}
	stored := func(p uint32) (iggy.ConsumerOffset, bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.GetOffset(ctx, group, iggy.Name("s"), iggy.Name("t"), p)
	}
	run.stop(30 * time.Second)

	tbl := icebergtest.Read(t, icebergtest.Catalog{Name: catalogName, URL: url, Warehouse: "file://" + warehouse}, "lake.events")
	type key struct{ p, o uint64 }
	seen := map[key]bool{}
	for _, r := range tbl.Rows {
		p, o := icebergNum(t, r["iggy_partition"]), icebergNum(t, r["iggy_offset"])
		if icebergNum(t, r["p"]) != p || icebergNum(t, r["o"]) != o || r["pad"] != fmt.Sprintf("%0*d", soakPad, 0) || r["iggy_stream"] != "s" || r["iggy_topic"] != "t" {
			t.Fatalf("row %v is not its message's (partition %d offset %d)", r, p, o)
		}
		if seen[key{p, o}] {
			t.Fatalf("partition %d offset %d: twice", p, o)
		}
		seen[key{p, o}] = true
	}
	if uint64(len(tbl.Rows)) != total || uint64(len(seen)) != total {
		t.Fatalf("%d rows, %d distinct (partition, offset); want %d of each", len(tbl.Rows), len(seen), total)
	}
	last := tbl.Snapshots[len(tbl.Snapshots)-1]
	for p := range uint32(3) {
		k := fmt.Sprintf("ferry.offset.ice.s.t.%d", p)
		if last[k] != strconv.FormatUint(perPartition-1, 10) {
			t.Errorf("the last snapshot's %s = %q, want %d", k, last[k], perPartition-1)
		}
		off, found, err := stored(p)
		if err != nil || !found || off.StoredOffset != perPartition-1 {
			t.Errorf("partition %d: Iggy's stored offset %+v (found %t, %v), want %d, as the snapshot", p, off, found, err, perPartition-1)
		}
	}
	t.Logf("%d kills: %d rows in %d snapshots, %d data files; 0 lost, 0 duplicated", kills, len(tbl.Rows), len(tbl.Snapshots), tbl.Files)
}

func icebergNum(t *testing.T, v any) uint64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v is not a number", v)
	}
	u, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
