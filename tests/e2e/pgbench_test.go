package e2e

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
)

// Parameters of BenchmarkPostgresSideBySide.
const (
	pgbPartitions = 3
	pgbPerPart    = 100_000 // 300k rows in all
	pgbBatch      = 1000    // the sink's batch_length, and the bare loop's rows per COPY
)

// pgbPayload is message o of partition p: a JSON object of 200 bytes.
func pgbPayload(p uint32, o uint64) []byte {
	b := fmt.Appendf(nil, `{"p":%d,"o":%d,"user":"u%d","pad":"`, p, o, o%97)
	b = append(b, strings.Repeat("x", 200-len(b)-2)...)
	return append(b, `"}`...)
}

// pgbSeries is one way of writing the 300k rows: a ferry run with a sink file, or (run
// set) the bare loop.
type pgbSeries struct {
	name  string
	top   string // connector file lines before [[streams]]
	extra string // plugin_config lines
	run   func(b *testing.B, db *pgxpool.Pool, url, table string) time.Duration
	rates []float64
}

// BenchmarkPostgresSideBySide writes the same 300,000 JSON messages of 200 bytes, produced
// once to 3 partitions of a real `ferry server` on TCP, into a real PostgreSQL
// (FERRY_POSTGRES_URL, jsonb payloads, the official table layout) with: (a) the official
// sink's way, one transaction per polled batch, one batch at a time; (b) max_in_flight = 3;
// (c) group commit (flush_interval, one transaction per 10,000 rows per partition) with
// max_in_flight = 3; all exactly once (offsets in the table); and (d) a bare pgx COPY
// loop, one connection per partition, the same rows: the target's own limit. Each round
// runs every series once, interleaved (FERRY_BENCH_ROUNDS, default 3); a ferry series is
// timed from the process start until the offsets table covers every message, and checked:
// 300,000 rows, each (partition, offset) once. Run with -benchtime 1x.
func BenchmarkPostgresSideBySide(b *testing.B) {
	db, url := pgDB(b)
	dir := b.TempDir()
	_, addr := startServer(b, "server", dir, filepath.Join(dir, "data"))
	c := dial(b, addr)
	createTopic(b, c, pgbPartitions)
	msgs := make([]iggy.Message, pgbBatch)
	for p := range uint32(pgbPartitions) {
		for base := uint64(0); base < pgbPerPart; base += pgbBatch {
			for i := range msgs {
				msgs[i] = iggy.Message{Payload: pgbPayload(p, base+uint64(i))}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := c.SendMessages(ctx, iggy.Name("s"), iggy.Name("t"), wire.ToPartition(p), msgs)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	series := []*pgbSeries{
		{name: "a_one_batch_per_tx_N1"},
		{name: "b_max_in_flight_3", top: "max_in_flight = 3\n"},
		{name: "c_group_commit_N3", top: "max_in_flight = 3\n", extra: "flush_interval = \"200ms\"\nmax_rows_per_transaction = 10000\n"},
		{name: "d_bare_pgx_copy_loop", run: bareCopyLoop},
	}
	rounds := 3
	if n, err := strconv.Atoi(os.Getenv("FERRY_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for r := range rounds {
		for _, s := range series {
			table := fmt.Sprintf("bench_%s_r%d", s.name[:1], r)
			drop := func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_offsets") }
			drop()
			var d time.Duration
			if s.run != nil {
				d = s.run(b, db, url, table)
			} else {
				d = ferryToPostgres(b, db, url, addr, table, fmt.Sprintf("pg_%s_r%d", s.name[:1], r), s)
			}
			drop()
			s.rates = append(s.rates, float64(pgbPartitions*pgbPerPart)/d.Seconds())
			b.Logf("round %d %s: %.0f rows/s", r, s.name, s.rates[len(s.rates)-1])
		}
	}
	bare := median(series[len(series)-1].rates)
	official := median(series[0].rates)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "series\tmedian rows/s\tmin\tmax\t× bare COPY loop\t× one batch per tx\t\n")
	for _, s := range series {
		m := median(s.rates)
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t\n", s.name, m, slices.Min(s.rates), slices.Max(s.rates), m/bare, m/official)
		b.Run(s.name, func(b *testing.B) {
			b.ReportMetric(m, "rows/s")
			b.ReportMetric(0, "ns/op")
		})
	}
	_ = w.Flush()
}

// median of v (the upper one for an even count).
func median(v []float64) float64 {
	r := slices.Clone(v)
	slices.Sort(r)
	return r[len(r)/2]
}

// ferryToPostgres runs one ferry process with the series' sink file into table until the
// offsets table covers every message, stops it and checks the table.
func ferryToPostgres(b *testing.B, db *pgxpool.Pool, url, addr, table, key string, s *pgbSeries) time.Duration {
	dir := b.TempDir()
	conns := filepath.Join(dir, "pg")
	writeFile(b, filepath.Join(conns, "sink.toml"), fmt.Sprintf(`type = "sink"
key = %q
enabled = true
version = 0
name = "postgres"
path = "builtin:postgres"
offset_commit = "sink_controlled"
%s
[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = %d
poll_interval = "5ms"

[plugin_config]
connection_string = %q
target_table = %q
offsets_table = %q
auto_create_table = true
payload_format = "json"
max_connections = 4
%s`, key, s.top, pgbBatch, url, table, table+"_offsets", s.extra))
	total := int64(pgbPartitions * pgbPerPart)
	progress := "SELECT coalesce(sum(last_offset + 1), 0) FROM " + table + "_offsets"
	start := time.Now()
	run := startFerry(b, key, dir, nil, "run", "--config", remoteConfig(b, dir, addr, conns), "--progress", "0")
	deadline := start.Add(5 * time.Minute)
	for pgCount(db, progress) != total {
		if run.exited() {
			b.Fatalf("%s exited: %v\n%s", key, run.err, tail(run.out.String(), 30))
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: the offsets table covers %d of %d messages after 5 minutes", key, pgCount(db, progress), total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	d := time.Since(start)
	run.stop(15 * time.Second)
	rows := pgCount(db, "SELECT count(*) FROM "+table)
	distinct := pgCount(db, "SELECT count(DISTINCT (iggy_partition_id, iggy_offset)) FROM "+table)
	if rows != total || distinct != total {
		b.Fatalf("%s: %d rows, %d distinct (partition, offset); want %d each", key, rows, distinct, total)
	}
	return d
}

// bareCopyLoop writes the same 300k rows into a table of the sink's layout with pgx's
// CopyFrom, pgbBatch rows per COPY (one transaction each), one connection per partition,
// all at once: timed from connecting to the last commit.
func bareCopyLoop(b *testing.B, _ *pgxpool.Pool, url, table string) time.Duration {
	ctx := context.Background()
	start := time.Now()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id numeric(39,0) PRIMARY KEY,
	iggy_offset bigint, iggy_timestamp timestamptz, iggy_stream text, iggy_topic text, iggy_partition_id integer,
	iggy_checksum bigint, iggy_origin_timestamp timestamptz, payload jsonb, created_at timestamptz DEFAULT now())`); err != nil {
		b.Fatal(err)
	}
	cols := []string{"id", "iggy_offset", "iggy_timestamp", "iggy_stream", "iggy_topic", "iggy_partition_id",
		"iggy_checksum", "iggy_origin_timestamp", "payload"}
	ts := time.Now().UTC()
	var wg sync.WaitGroup
	errs := make([]error, pgbPartitions)
	for p := range uint32(pgbPartitions) {
		wg.Go(func() {
			rows := make([][]any, pgbBatch)
			for base := uint64(0); base < pgbPerPart && errs[p] == nil; base += pgbBatch {
				for i := range rows {
					o := base + uint64(i)
					rows[i] = []any{pgtype.Numeric{Int: big.NewInt(int64(p)<<40 | int64(o)), Valid: true}, int64(o), ts, "s", "t",
						int32(p), int64(o), ts, pgbPayload(p, o)}
				}
				_, errs[p] = pool.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return d
}
