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
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ferryio/ferry/internal/icebergtest"
	"github.com/ferryio/ferry/internal/testkit"
)

// icebergSnapshot is the current snapshot's summary of lake.events in the SQL catalog
// catalogName, read from the metadata file the catalog points at: nil before the first
// append, an error while PostgreSQL does not answer (it may be restarting).
func icebergSnapshot(url, catalogName string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close(ctx) }()
	var loc string
	err = conn.QueryRow(ctx, `SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = 'lake' AND table_name = 'events'`, catalogName).Scan(&loc)
	if errors.Is(err, pgx.ErrNoRows) || err != nil && strings.Contains(err.Error(), "does not exist") {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(strings.TrimPrefix(loc, "file://"))
	if err != nil {
		return nil, err
	}
	var md struct {
		Current   *int64 `json:"current-snapshot-id"`
		Snapshots []struct {
			ID      int64             `json:"snapshot-id"`
			Summary map[string]string `json:"summary"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal(b, &md); err != nil {
		return nil, err
	}
	for _, s := range md.Snapshots {
		if md.Current != nil && s.ID == *md.Current {
			return s.Summary, nil
		}
	}
	return nil, nil
}

// icebergWritten is the current snapshot's total-records, -1 while it cannot be read.
func icebergWritten(url, catalogName string) int64 {
	sum, err := icebergSnapshot(url, catalogName)
	if err != nil {
		return -1
	}
	n, _ := strconv.ParseInt(sum["total-records"], 10, 64)
	return n
}

// icebergExact reads lake.events with pyiceberg and fails unless it holds each
// (partition, offset) of parts × perPartition exactly once, with its message's values.
func icebergExact(t *testing.T, url, catalogName, warehouse string, parts uint32, perPartition uint64) icebergtest.Table {
	t.Helper()
	tbl := icebergtest.Read(t, icebergtest.Catalog{Name: catalogName, URL: url, Warehouse: "file://" + warehouse}, "lake.events")
	type key struct{ p, o uint64 }
	seen := map[key]bool{}
	for _, r := range tbl.Rows {
		p, o := icebergNum(t, r["iggy_partition"]), icebergNum(t, r["iggy_offset"])
		if icebergNum(t, r["p"]) != p || icebergNum(t, r["o"]) != o || r["pad"] != fmt.Sprintf("%0*d", soakPad, 0) {
			t.Fatalf("row %v is not its message's (partition %d offset %d)", r, p, o)
		}
		if p >= uint64(parts) || o >= perPartition {
			t.Fatalf("row of partition %d offset %d: never produced", p, o)
		}
		if seen[key{p, o}] {
			t.Fatalf("partition %d offset %d: twice", p, o)
		}
		seen[key{p, o}] = true
	}
	total := uint64(parts) * perPartition
	if uint64(len(tbl.Rows)) != total || uint64(len(seen)) != total {
		t.Fatalf("%d rows, %d distinct (partition, offset); want %d of each", len(tbl.Rows), len(seen), total)
	}
	return tbl
}

// TestIcebergGroupTakeover: two ferry processes in one consumer group append to one
// table (their commits conflict and are retried on fresh metadata); one is SIGKILLed
// mid-stream and the other takes its partitions over from the offsets in the table's
// snapshots. pyiceberg scans each (partition, offset) exactly once.
func TestIcebergGroupTakeover(t *testing.T) {
	_, url := pgDB(t)
	icebergtest.Python(t)
	dir := t.TempDir()
	catalogName := fmt.Sprintf("grp%d", time.Now().UnixNano())
	warehouse := filepath.Join(dir, "warehouse")
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 3)
	start := func(name string) *proc {
		d := filepath.Join(dir, name)
		writeFile(t, filepath.Join(d, "ice", "sink.toml"), icebergSink(url, warehouse, catalogName))
		return startFerry(t, name, d, nil, "run", "--config", remoteConfig(t, d, addr, filepath.Join(d, "ice")), "--progress", "0")
	}
	load := soakLoad{parts: 3, perPartition: 3000, chunk: 100, pause: 250 * time.Millisecond}
	groupTakeover(t, c, load, start, func() int64 { return icebergWritten(url, catalogName) }, func() bool {
		sum, err := icebergSnapshot(url, catalogName)
		return err == nil && sum["ferry.offset.ice.s.t.0"] != "" && sum["ferry.offset.ice.s.t.1"] != "" && sum["ferry.offset.ice.s.t.2"] != ""
	})
	tbl := icebergExact(t, url, catalogName, warehouse, load.parts, load.perPartition)
	t.Logf("%d rows in %d snapshots, %d data files; 0 lost, 0 duplicated", len(tbl.Rows), len(tbl.Snapshots), tbl.Files)
}

// TestIcebergCatalogRestart: the catalog's PostgreSQL restarted twice while the sink runs
// in ferry processes SIGKILLed at seeded moments: once between a kill and the next run
// (Open retries the catalog) and once under a running sink (its flush fails, the rows stay
// buffered and the commit is retried). Nothing is lost, nothing appended twice.
func TestIcebergCatalogRestart(t *testing.T) {
	_, url := pgDB(t)
	icebergtest.Python(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	dir := t.TempDir()
	catalogName := fmt.Sprintf("rst%d", seed)
	warehouse := filepath.Join(dir, "warehouse")
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	createTopic(t, c, 3)
	conns := filepath.Join(dir, "iceberg")
	writeFile(t, filepath.Join(conns, "sink.toml"), icebergSink(url, warehouse, catalogName))
	load := soakLoad{parts: 3, perPartition: 3000, chunk: 100, pause: 500 * time.Millisecond}
	soak := killSoak{
		load: load, dir: dir, kills: 3,
		args: []string{"run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0"},
		rng:  rand.New(rand.NewPCG(seed, 1)), jitter: 300 * time.Millisecond,
		written:  func() int64 { return icebergWritten(url, catalogName) },
		restart:  pgRestart,
		restarts: map[int]bool{1: true, 0: true},
	}
	runs := soak.run(t, c)
	testkit.WaitFor(t, "the last run's sink running", func() bool { return strings.Contains(runs.last.out.String(), `msg="sink running"`) })
	runs.last.stop(30 * time.Second)
	if r := runs.restartedUnder; r != nil && !strings.Contains(r.out.String(), "iceberg sink: flush failed; the rows stay buffered") &&
		!strings.Contains(r.out.String(), "commit to table lake.events") {
		t.Fatalf("the run PostgreSQL restarted under never retried a commit:\n%s", tail(r.out.String(), 30))
	}
	tbl := icebergExact(t, url, catalogName, warehouse, load.parts, load.perPartition)
	t.Logf("3 kills, 2 PostgreSQL restarts: %d rows in %d snapshots; 0 lost, 0 duplicated", len(tbl.Rows), len(tbl.Snapshots))
}
