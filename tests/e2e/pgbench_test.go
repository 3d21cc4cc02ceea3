package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
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

	"github.com/ferryio/ferry/connectors/postgres"
	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/testkit"
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

// pgbID is message o of partition p's id: the bare loop writes the same (as a number).
func pgbID(p uint32, o uint64) [16]byte {
	var id [16]byte
	binary.LittleEndian.PutUint64(id[:8], uint64(p)<<40|o)
	return id
}

// pgbSeries is one way of writing the 300k rows: a ferry run with a sink file, or (run
// set) the bare loop.
type pgbSeries struct {
	name  string
	top   string // connector file lines before [[streams]]
	extra string // plugin_config lines
	run   func(b *testing.B, url, table string) (time.Duration, pgCPU)
	rates []float64
	// CPU seconds per round: the ferry run process, the ferry server, PostgreSQL (the
	// postmaster and its children, read before the connections close).
	cpuRun, cpuServer, cpuPG []float64
	cpuPGBackground          []float64 // of cpuPG, PostgreSQL's own processes (not the client backends)
	// Seconds from a ferry run's start to its first rows committed (start-up: the process,
	// its logins to the server, the sink's Open, the first poll and transaction).
	firsts []float64
	steady []float64 // rows/s after the first commit (the rows left over the time left)
	// Context switches per round (voluntary, involuntary): the ferry run process's threads.
	runSwitches [][2]int64
}

// BenchmarkPostgresSideBySide writes the same 300,000 JSON messages of 200 bytes, produced
// once to 3 partitions of a real `ferry server` on TCP, into a real PostgreSQL
// (FERRY_POSTGRES_URL, jsonb payloads, the official table layout) with: (a) the official
// sink's way, one transaction per polled batch, one batch at a time; (b) max_in_flight = 3;
// (c) group commit (flush_interval, one transaction per 10,000 rows per partition) with
// max_in_flight = 3; (g) as (b) in COPY's text format (the others use the sink's
// default, binary); all exactly once (offsets in the table), all with the sink's default
// warm_backends. And bare COPY loops, one connection per partition, the same rows, encoded
// by pgx's CopyFrom (d), by hand in COPY's text format (e) and by hand in its binary format
// (f); (h) is (f) with the sink's offsets row statements in each COPY's transaction, (i)
// (f) with each COPY in a transaction of its own, (j) (f) with its connections warmed as
// the sink's are. The fastest loop is the target's own limit, against which every ferry
// series is judged. Each round runs every series once, interleaved; FERRY_BENCH_ROUNDS
// sets the rounds (default 8: the machine's speed moves from round to round, and with 4 or
// 5 rounds the medians of (f) and (j), the same work, differed by up to 14 % within one
// run; more rounds steady every median, though one run of 8 still saw 12 %), and
// FERRY_BENCH_SERIES=b,f runs those series alone. A ferry series is timed from the process
// start until the offsets table covers every message, and checked: 300,000 rows, each
// (partition, offset) once; a loop's table is checked row by row. Run with -benchtime 1x.
func BenchmarkPostgresSideBySide(b *testing.B) {
	db, url := pgDB(b)
	dir := b.TempDir()
	var srv *proc
	var addr string
	if prof := os.Getenv("FERRY_BENCH_PROFILE"); prof != "" { // the server's profile too, written when it stops
		srv = startFerry(b, "server", dir, []string{"FERRY_CPU_PROFILE=" + filepath.Join(prof, "server.pprof")},
			"server", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data"))
		testkit.WaitFor(b, "server address", func() bool {
			m := serverAddrRE.FindStringSubmatch(srv.out.String())
			if m != nil {
				addr = m[1]
			}
			return m != nil || srv.exited()
		})
		defer srv.stop(15 * time.Second)
	} else {
		srv, addr = startServer(b, "server", dir, filepath.Join(dir, "data"))
	}
	c := dial(b, addr)
	createTopic(b, c, pgbPartitions)
	msgs := make([]iggy.Message, pgbBatch)
	for p := range uint32(pgbPartitions) {
		for base := uint64(0); base < pgbPerPart; base += pgbBatch {
			for i := range msgs {
				o := base + uint64(i)
				msgs[i] = iggy.Message{ID: pgbID(p, o), Payload: pgbPayload(p, o)}
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
		{name: "g_max_in_flight_3_copy_text", top: "max_in_flight = 3\n", extra: "copy_format = \"text\"\n"},
		{name: "d_bare_pgx_copy_loop", run: func(b *testing.B, url, table string) (time.Duration, pgCPU) {
			return bareCopyLoop(b, url, table, loopPgx)
		}},
		{name: "e_bare_copy_loop_text", run: func(b *testing.B, url, table string) (time.Duration, pgCPU) {
			return bareCopyLoop(b, url, table, loopText)
		}},
		{name: "f_bare_copy_loop_binary_by_hand", run: func(b *testing.B, url, table string) (time.Duration, pgCPU) {
			return bareCopyLoop(b, url, table, loopBinaryByHand)
		}},
		{name: "h_bare_binary_loop_offsets_row", run: func(b *testing.B, url, table string) (time.Duration, pgCPU) {
			return bareCopyLoop(b, url, table, loopBinaryOffsets)
		}},
		{name: "i_bare_binary_loop_in_tx", run: func(b *testing.B, url, table string) (time.Duration, pgCPU) {
			return bareCopyLoop(b, url, table, loopBinaryInTx)
		}},
		{name: "j_bare_binary_loop_warm", run: func(b *testing.B, url, table string) (time.Duration, pgCPU) {
			return bareCopyLoop(b, url, table, loopBinaryWarm)
		}},
	}
	if only := os.Getenv("FERRY_BENCH_SERIES"); only != "" { // e.g. "b,f": those series alone
		series = slices.DeleteFunc(series, func(s *pgbSeries) bool { return !strings.Contains(","+only+",", ","+s.name[:1]+",") })
	}
	rounds := 8
	if n, err := strconv.Atoi(os.Getenv("FERRY_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	for r := range rounds {
		for _, s := range series {
			table := fmt.Sprintf("bench_%s_r%d", s.name[:1], r)
			drop := func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_offsets") }
			drop()
			// Every series starts right after a checkpoint: one that falls inside a series
			// (every ~1 GB of WAL, a few series) would slow whichever series it met.
			if _, err := db.Exec(context.Background(), "CHECKPOINT"); err != nil {
				b.Fatal(err)
			}
			var d time.Duration
			work0 := readPGWork(b, db)
			srv0, pg0 := procCPU(srv.cmd.Process.Pid), postgresCPU(b)
			srvV0, srvI0 := ctxSwitches(srv.cmd.Process.Pid)
			var cpuRun float64
			var pgEnd pgCPU
			if s.run != nil {
				d, pgEnd = s.run(b, url, table)
			} else {
				d, cpuRun, pgEnd = ferryToPostgres(b, db, url, addr, table, fmt.Sprintf("pg_%s_r%d", s.name[:1], r), s)
			}
			s.cpuRun = append(s.cpuRun, cpuRun)
			s.cpuServer = append(s.cpuServer, procCPU(srv.cmd.Process.Pid)-srv0)
			s.cpuPG = append(s.cpuPG, pgEnd.all-pg0.all)
			s.cpuPGBackground = append(s.cpuPGBackground, pgEnd.background-pg0.background)
			srvV, srvI := ctxSwitches(srv.cmd.Process.Pid)
			// After the readings above, which the wait must not delay. A backend reports its
			// counts at most once a second and as it exits, which may come after the series
			// ended: wait until they cover every row inserted.
			var work pgWork
			if err := testkit.Eventually("PostgreSQL's statistics counting every row", func() bool {
				work = readPGWork(b, db).since(work0)
				return work[pgTuplesInserted] >= pgbPartitions*pgbPerPart
			}); err != nil {
				b.Log(err) // the counts below are short
			}
			drop()
			s.rates = append(s.rates, float64(pgbPartitions*pgbPerPart)/d.Seconds())
			// Context switches a batch (pgbBatch rows): voluntary ones are a process's
			// wake-ups, PostgreSQL's client backends' involuntary ones its COPYs interrupted.
			batches := float64(pgbPartitions * pgbPerPart / pgbBatch)
			pgV, pgI, pgF := pgEnd.switchesSince(pg0)
			run := "–"
			if n := len(s.runSwitches); n > 0 && s.run == nil {
				run = fmt.Sprintf("%.1f/%.1f", float64(s.runSwitches[n-1][0])/batches, float64(s.runSwitches[n-1][1])/batches)
			}
			b.Logf("round %d %s: %.0f rows/s; CPU µs/row: ferry run %.1f, server %.1f, PostgreSQL %.1f; context switches a batch (voluntary/involuntary): ferry run %s, server %.1f/%.1f, PostgreSQL's client backends %.1f/%.1f (and %.0f minor page faults)",
				r, s.name, s.rates[len(s.rates)-1],
				cpuRun/(pgbPartitions*pgbPerPart)*1e6, s.cpuServer[len(s.cpuServer)-1]/(pgbPartitions*pgbPerPart)*1e6,
				s.cpuPG[len(s.cpuPG)-1]/(pgbPartitions*pgbPerPart)*1e6,
				run, float64(srvV-srvV0)/batches, float64(srvI-srvI0)/batches,
				float64(pgV)/batches, float64(pgI)/batches, float64(pgF)/batches)
			b.Logf("round %d %s: PostgreSQL's work a row: %s", r, s.name, work.perRow(pgbPartitions*pgbPerPart))
		}
	}
	// The target's own limit is the fastest bare loop of this run (by median), whichever
	// encoding it used: every ferry series is judged against that one.
	best := series[0]
	for _, s := range series {
		if s.run != nil && (best.run == nil || median(s.rates) > median(best.rates)) {
			best = s
		}
	}
	bare := median(best.rates)
	official := median(series[0].rates)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "series\tmedian rows/s\tmin\tmax\t× best bare loop\t× one batch per tx\tCPU µs/row: ferry run\tferry server\tpostgres\tof it background\tfirst commit s\trows/s after it\t\n")
	perRow := func(v []float64) float64 { return median(v) / (pgbPartitions * pgbPerPart) * 1e6 }
	for _, s := range series {
		m := median(s.rates)
		first, steady := "–", "–"
		if s.firsts != nil {
			first = fmt.Sprintf("%.2f", median(s.firsts))
		}
		if s.steady != nil {
			steady = fmt.Sprintf("%.0f", median(s.steady))
		}
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%.2f\t%s\t%s\t\n", s.name, m, slices.Min(s.rates), slices.Max(s.rates), m/bare, m/official,
			perRow(s.cpuRun), perRow(s.cpuServer), perRow(s.cpuPG), perRow(s.cpuPGBackground), first, steady)
		b.Run(s.name, func(b *testing.B) {
			b.ReportMetric(m, "rows/s")
			b.ReportMetric(0, "ns/op")
		})
	}
	_ = w.Flush()
	fmt.Printf("best bare loop: %s, median %.0f rows/s\n", best.name, bare)
	if f, j := seriesNamed(series, 'f'), seriesNamed(series, 'j'); f != nil && j != nil {
		// (f) and (j) do the same work (warming changes nothing for the loop): how far
		// apart their medians are is how far this run's machine moved, the least
		// difference between two series this run can tell from noise.
		fmt.Printf("noise: (f) and (j) do the same work; their medians differ by %.1f %% in this run\n",
			100*math.Abs(median(f.rates)/median(j.rates)-1))
	}
	for _, s := range series {
		if s.run != nil {
			continue
		}
		m := median(s.rates)
		verdict := "goal met"
		if m < 150_000 || m/bare < 0.8 {
			verdict = "goal NOT met"
		}
		fmt.Printf("%s: median %.0f rows/s (goal ≥ 150000), %.2f × %s (goal ≥ 0.80): %s\n", s.name, m, m/bare, best.name, verdict)
	}
	_ = w.Flush()
}

// seriesNamed is the series whose name starts with letter, or nil when it did not run.
func seriesNamed(series []*pgbSeries, letter byte) *pgbSeries {
	for _, s := range series {
		if s.name[0] == letter {
			return s
		}
	}
	return nil
}

// median of v (the upper one for an even count).
func median(v []float64) float64 {
	r := slices.Clone(v)
	slices.Sort(r)
	return r[len(r)/2]
}

// ferryToPostgres runs one ferry process with the series' sink file into table until the
// offsets table covers every message, stops it and checks the table. It returns the time,
// the process's CPU seconds and PostgreSQL's (postgresCPU), both read before the stop.
func ferryToPostgres(b *testing.B, db *pgxpool.Pool, url, addr, table, key string, s *pgbSeries) (time.Duration, float64, pgCPU) {
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
	var env []string
	if prof := os.Getenv("FERRY_BENCH_PROFILE"); prof != "" { // a CPU profile of each run, for go tool pprof
		env = append(env, "FERRY_CPU_PROFILE="+filepath.Join(prof, key+".pprof"))
	}
	run := startFerry(b, key, dir, env, "run", "--config", remoteConfig(b, dir, addr, conns), "--progress", "0")
	deadline := start.Add(5 * time.Minute)
	first := time.Duration(0)
	for n := pgCount(db, progress); n != total; n = pgCount(db, progress) {
		if n > 0 && first == 0 {
			first = time.Since(start)
		}
		if run.exited() {
			b.Fatalf("%s exited: %v\n%s", key, run.err, tail(run.out.String(), 30))
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: the offsets table covers %d of %d messages after 5 minutes", key, pgCount(db, progress), total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	d := time.Since(start)
	if first == 0 {
		first = d
	}
	s.firsts = append(s.firsts, first.Seconds())
	if d > first {
		s.steady = append(s.steady, float64(total)/(d-first).Seconds()) // an upper bound: the first commit's rows count as after it
	}
	cpu, pg := procCPU(run.cmd.Process.Pid), postgresCPU(b)
	v, i := ctxSwitches(run.cmd.Process.Pid)
	s.runSwitches = append(s.runSwitches, [2]int64{v, i})
	run.stop(15 * time.Second)
	rows := pgCount(db, "SELECT count(*) FROM "+table)
	distinct := pgCount(db, "SELECT count(DISTINCT (iggy_partition_id, iggy_offset)) FROM "+table)
	if rows != total || distinct != total {
		b.Fatalf("%s: %d rows, %d distinct (partition, offset); want %d each", key, rows, distinct, total)
	}
	return d, cpu, pg
}

// loopEncoding is how a bare loop encodes its COPY stream.
type loopEncoding int

const (
	loopPgx           loopEncoding = iota // pgx's CopyFrom: binary, []any rows, a big.Int per id
	loopText                              // COPY's text format, encoded by hand
	loopBinaryByHand                      // COPY's binary format, encoded by hand (no []any, no big.Int)
	loopBinaryOffsets                     // as loopBinaryByHand, each COPY in a transaction with the sink's offsets row statements
	loopBinaryInTx                        // as loopBinaryByHand, each COPY in a transaction of its own (BEGIN, COPY, COMMIT)
	loopBinaryWarm                        // as loopBinaryByHand, each connection warmed as the sink's are (warm_backends)
)

// bareCopyLoop writes the same 300k rows into a table of the sink's layout, pgbBatch rows
// per COPY (one transaction each), one connection per partition, all at once, encoded as
// enc says: timed from connecting to the last commit.
func bareCopyLoop(b *testing.B, url, table string, enc loopEncoding) (time.Duration, pgCPU) {
	ctx := context.Background()
	start := time.Now()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	if enc == loopBinaryWarm {
		pc.AfterConnect = postgres.WarmBackend // the sink's own warm_backends
		enc = loopBinaryByHand
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id numeric(39,0) PRIMARY KEY,
	iggy_offset bigint, iggy_timestamp timestamptz, iggy_stream text, iggy_topic text, iggy_partition_id integer,
	iggy_checksum bigint, iggy_origin_timestamp timestamptz, payload jsonb, created_at timestamptz DEFAULT now())`); err != nil {
		b.Fatal(err)
	}
	if enc == loopBinaryOffsets {
		if _, err := pool.Exec(ctx, `CREATE TABLE `+table+`_offsets (
	connector text NOT NULL, stream text NOT NULL, topic text NOT NULL, partition_id integer NOT NULL,
	last_offset bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(),
	target_database text NOT NULL DEFAULT '', target_schema text NOT NULL DEFAULT '', target_table text NOT NULL DEFAULT '',
	wrote_rows boolean, PRIMARY KEY (connector, stream, topic, partition_id))`); err != nil {
			b.Fatal(err)
		}
	}
	cols := []string{"id", "iggy_offset", "iggy_timestamp", "iggy_stream", "iggy_topic", "iggy_partition_id",
		"iggy_checksum", "iggy_origin_timestamp", "payload"}
	ts := time.Now().UTC()
	var wg sync.WaitGroup
	errs := make([]error, pgbPartitions)
	for p := range uint32(pgbPartitions) {
		wg.Go(func() {
			switch enc {
			case loopText:
				errs[p] = byHandCopyLoop(ctx, pool, table, cols, p, ts, appendTextRows, "")
				return
			case loopBinaryByHand:
				errs[p] = byHandCopyLoop(ctx, pool, table, cols, p, ts, appendBinaryRows, " (FORMAT binary)")
				return
			case loopBinaryOffsets, loopBinaryInTx:
				errs[p] = offsetsCopyLoop(ctx, pool, table, cols, p, ts, enc)
				return
			}
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
	cpu := postgresCPU(b)
	// Every loop writes the same rows: the count, the ids, the payloads and the stamps.
	var sum, want string
	var n, bad int64
	if err := pool.QueryRow(ctx, `SELECT count(*), sum(id)::text, count(*) FILTER (WHERE iggy_timestamp <> $1 OR iggy_origin_timestamp <> $1
		OR payload <> jsonb_build_object('p', iggy_partition_id, 'o', iggy_offset, 'user', 'u' || (iggy_offset % 97), 'pad', payload->>'pad')
		OR id <> (iggy_partition_id::numeric * 1099511627776 + iggy_offset) OR iggy_checksum <> iggy_offset OR iggy_stream <> 's' OR iggy_topic <> 't')
		FROM `+pgx.Identifier{table}.Sanitize(), ts).Scan(&n, &sum, &bad); err != nil {
		b.Fatal(err)
	}
	total := new(big.Int)
	for p := range int64(pgbPartitions) {
		for o := range int64(pgbPerPart) {
			total.Add(total, big.NewInt(p<<40|o))
		}
	}
	want = total.String()
	if n != pgbPartitions*pgbPerPart || sum != want || bad != 0 {
		b.Fatalf("%s: %d rows (want %d), sum of ids %s (want %s), %d rows unlike the others", table, n, pgbPartitions*pgbPerPart, sum, want, bad)
	}
	return d, cpu
}

// byHandCopyLoop is bareCopyLoop's partition p with a COPY stream that appendRows encodes
// by hand into one reused buffer (format: COPY's option for it).
func byHandCopyLoop(ctx context.Context, pool *pgxpool.Pool, table string, cols []string, p uint32, ts time.Time,
	appendRows func(buf []byte, p uint32, base uint64, ts time.Time) []byte, format string) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	sql := "COPY " + pgx.Identifier{table}.Sanitize() + " (" + strings.Join(cols, ", ") + ") FROM STDIN" + format
	var buf []byte
	for base := uint64(0); base < pgbPerPart; base += pgbBatch {
		buf = appendRows(buf[:0], p, base, ts)
		if _, err := conn.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(buf), sql); err != nil {
			return err
		}
	}
	return nil
}

// offsetsCopyLoop is byHandCopyLoop in the binary format with what the sink adds to each
// COPY with exactly_once: a transaction (loopBinaryInTx: that alone), the partition's
// offsets row locked (an upsert) before the rows and updated after them; the statements
// are the sink's.
func offsetsCopyLoop(ctx context.Context, pool *pgxpool.Pool, table string, cols []string, p uint32, ts time.Time, enc loopEncoding) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	offsets := pgx.Identifier{table + "_offsets"}.Sanitize()
	sql := "COPY " + pgx.Identifier{table}.Sanitize() + " (" + strings.Join(cols, ", ") + ") FROM STDIN (FORMAT binary)"
	var buf []byte
	for base := uint64(0); base < pgbPerPart; base += pgbBatch {
		buf = appendBinaryRows(buf[:0], p, base, ts)
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if enc == loopBinaryInTx {
				_, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(buf), sql)
				return err
			}
			var last int64
			if err := tx.QueryRow(ctx, `INSERT INTO `+offsets+` AS o (connector, stream, topic, partition_id, last_offset,
	target_database, target_schema, target_table, wrote_rows)
VALUES ($1, $2, $3, $4, -1, $5, $6, $7, false)
ON CONFLICT (connector, stream, topic, partition_id) DO UPDATE SET last_offset = o.last_offset
RETURNING last_offset`, "loop", "s", "t", int32(p), "ferry", "public", table).Scan(&last); err != nil {
				return err
			}
			if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(buf), sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE `+offsets+` SET last_offset = $5, updated_at = now(), wrote_rows = wrote_rows OR $6
WHERE connector = $1 AND stream = $2 AND topic = $3 AND partition_id = $4`, "loop", "s", "t", int32(p), int64(base+pgbBatch-1), true)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// appendTextRows appends partition p's pgbBatch rows from offset base in COPY's text format.
func appendTextRows(buf []byte, p uint32, base uint64, ts time.Time) []byte {
	stamp := ts.Format("2006-01-02 15:04:05.999999Z07:00")
	for i := range uint64(pgbBatch) {
		o := base + i
		buf = fmt.Appendf(buf, "%d\t%d\t%s\ts\tt\t%d\t%d\t%s\t", int64(p)<<40|int64(o), o, stamp, p, o, stamp)
		for _, c := range pgbPayload(p, o) {
			switch c {
			case '\\', '\t', '\n', '\r':
				buf = append(buf, '\\')
			}
			buf = append(buf, c)
		}
		buf = append(buf, '\n')
	}
	return buf
}

// appendBinaryRows appends partition p's pgbBatch rows from offset base as a whole stream
// in COPY's binary format: what the sink's own encoder writes, without its []any rows.
func appendBinaryRows(buf []byte, p uint32, base uint64, ts time.Time) []byte {
	be := binary.BigEndian
	us := uint64(ts.UnixMicro() - 946_684_800_000_000) // PostgreSQL's epoch is 2000-01-01
	buf = append(buf, "PGCOPY\n\377\r\n\000\x00\x00\x00\x00\x00\x00\x00\x00"...)
	for i := range uint64(pgbBatch) {
		o := base + i
		buf = be.AppendUint16(buf, 9)
		buf = appendNumeric(buf, uint64(p)<<40|o)
		buf = be.AppendUint64(be.AppendUint32(buf, 8), o)
		buf = be.AppendUint64(be.AppendUint32(buf, 8), us)
		buf = append(be.AppendUint32(buf, 1), 's')
		buf = append(be.AppendUint32(buf, 1), 't')
		buf = be.AppendUint32(be.AppendUint32(buf, 4), p)
		buf = be.AppendUint64(be.AppendUint32(buf, 8), o)
		buf = be.AppendUint64(be.AppendUint32(buf, 8), us)
		payload := pgbPayload(p, o)
		buf = append(append(be.AppendUint32(buf, uint32(len(payload)+1)), 1), payload...) // jsonb version 1
	}
	return be.AppendUint16(buf, 0xffff)
}

// appendNumeric appends v as one field in numeric's binary form: base-10000 digits,
// most significant first, trailing zero digits dropped.
func appendNumeric(buf []byte, v uint64) []byte {
	var d [5]uint16 // 2^64 < 10000^5
	n := 0
	for ; v != 0; v /= 10000 {
		d[n] = uint16(v % 10000)
		n++
	}
	low := 0
	for low < n && d[low] == 0 {
		low++
	}
	weight := max(n-1, 0) // zero has no digits, weight 0
	be := binary.BigEndian
	buf = be.AppendUint32(buf, uint32(8+2*(n-low)))
	buf = be.AppendUint16(be.AppendUint16(buf, uint16(n-low)), uint16(weight))
	buf = be.AppendUint16(be.AppendUint16(buf, 0), 0) // positive, display scale 0
	for k := n - 1; k >= low; k-- {
		buf = be.AppendUint16(buf, d[k])
	}
	return buf
}

// procCPU is the user and system CPU seconds process pid has used (0 when it is gone).
func procCPU(pid int) float64 {
	f := statFields(pid)
	if f == nil {
		return 0
	}
	// utime is the 14th field, stime the 15th, in clock ticks (100 a second on Linux).
	u, _ := strconv.ParseFloat(f[11], 64)
	sys, _ := strconv.ParseFloat(f[12], 64)
	return (u + sys) / 100
}

// statFields are the fields of /proc/pid/stat after the command (which may hold spaces)
// in parentheses, the first being the 3rd field, state; nil when the process has ended.
func statFields(pid int) []string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	return strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
}

// minorFaults is process pid's count of minor page faults (0 when it has ended).
func minorFaults(pid int) int64 {
	f := statFields(pid)
	if f == nil {
		return 0
	}
	n, _ := strconv.ParseInt(f[7], 10, 64) // minflt, the 10th field
	return n
}

// ctxSwitches sums the voluntary and involuntary context switches of process pid's
// threads (0, 0 when it has ended).
func ctxSwitches(pid int) (voluntary, involuntary int64) {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(status)) {
			k, v, _ := strings.Cut(line, ":")
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "voluntary_ctxt_switches":
				voluntary += n
			case "nonvoluntary_ctxt_switches":
				involuntary += n
			}
		}
	}
	return voluntary, involuntary
}

// postgresChildren is the set of the cluster's running processes below its postmaster.
func postgresChildren(b testing.TB) map[int]bool {
	out := map[int]bool{}
	for _, pid := range childPIDs(postmaster(b)) {
		out[pid] = true
	}
	return out
}

// childPIDs are the running processes whose parent is ppid.
func childPIDs(ppid int) []int {
	var out []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		f := statFields(pid)
		if f == nil {
			continue
		}
		if parent, _ := strconv.Atoi(f[1]); parent == ppid { // ppid, the 4th field
			out = append(out, pid)
		}
	}
	return out
}

// postmaster is the pid of the cluster of scripts/postgres.sh (FERRY_POSTGRES_DIR).
func postmaster(b testing.TB) int {
	pidFile, err := os.ReadFile(filepath.Join(os.Getenv("FERRY_POSTGRES_DIR"), "data", "postmaster.pid"))
	if err != nil {
		b.Fatalf("the PostgreSQL cluster's postmaster.pid (FERRY_POSTGRES_DIR): %v", err)
	}
	master, _ := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	return master
}

// waitReaped waits until every process of the cluster that is not in before has ended and
// been reaped by the postmaster, so that postgresCPU counts its time (a walsender's after
// its client left).
func waitReaped(b testing.TB, before map[int]bool) {
	testkit.WaitFor(b, "the cluster's new processes reaped", func() bool {
		for pid := range postgresChildren(b) {
			if !before[pid] {
				return false
			}
		}
		return true
	})
}

// childrenCPU is the user and system CPU seconds of the ended children process pid waited
// for (cutime and cstime, the 16th and 17th fields; 0 when it is gone).
func childrenCPU(pid int) float64 {
	f := statFields(pid)
	if f == nil {
		return 0
	}
	u, _ := strconv.ParseFloat(f[13], 64)
	sys, _ := strconv.ParseFloat(f[14], 64)
	return (u + sys) / 100
}

// pgWork is what PostgreSQL's statistics count of the work it did (pg_stat_wal and the
// database's pg_stat_database row): the same rows should cost the same whoever writes
// them, so a series whose CPU a row differs while these do not differs in how, not what.
type pgWork [7]int64

const pgTuplesInserted = 3 // pgWork's index of tuples inserted

var pgWorkNames = [...]string{"WAL records", "WAL bytes", "full-page images", "tuples inserted", "tuples updated",
	"blocks hit", "blocks read"}

func readPGWork(b *testing.B, db *pgxpool.Pool) pgWork {
	var w pgWork
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.QueryRow(ctx, `SELECT w.wal_records, w.wal_bytes::bigint, w.wal_fpi, d.tup_inserted, d.tup_updated,
	d.blks_hit, d.blks_read FROM pg_stat_wal w, pg_stat_database d WHERE d.datname = current_database()`).Scan(
		&w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6]); err != nil {
		b.Fatal(err)
	}
	return w
}

func (w pgWork) since(start pgWork) pgWork {
	for i := range w {
		w[i] -= start[i]
	}
	return w
}

func (w pgWork) perRow(rows int) string {
	parts := make([]string, len(w))
	for i, n := range w {
		parts[i] = fmt.Sprintf("%s %.3f", pgWorkNames[i], float64(n)/float64(rows))
	}
	return strings.Join(parts, ", ")
}

// pgCPU is CPU seconds PostgreSQL used: all of it, and of that its own processes (the
// postmaster and its running background workers: WAL writer, checkpointer, autovacuum…),
// the rest being the client backends.
type pgCPU struct {
	all, background float64
	// Context switches (voluntary, involuntary) and minor page faults of each client
	// backend alive at the reading: a COPY the scheduler interrupts shows in the
	// involuntary switches, memory a backend's allocator took from the kernel afresh in
	// the faults.
	switches map[int][3]int64
}

// switchesSince sums the context switches and minor faults of the client backends alive
// at c since start (a backend that started after it counts from zero).
func (c pgCPU) switchesSince(start pgCPU) (voluntary, involuntary, faults int64) {
	for pid, n := range c.switches {
		s := start.switches[pid]
		voluntary += n[0] - s[0]
		involuntary += n[1] - s[1]
		faults += n[2] - s[2]
	}
	return voluntary, involuntary, faults
}

// postgresCPU is the CPU used so far by the cluster of scripts/postgres.sh
// (FERRY_POSTGRES_DIR): its postmaster, the processes it started that still run, and those
// that ended (a walsender, a closed connection's backend: the postmaster waited for them,
// so their time is in its children's fields, counted as clients').
func postgresCPU(b testing.TB) pgCPU {
	master := postmaster(b)
	c := pgCPU{all: procCPU(master) + childrenCPU(master), background: procCPU(master), switches: map[int][3]int64{}}
	for _, pid := range childPIDs(master) {
		cpu := procCPU(pid)
		c.all += cpu
		// A client backend's title names its client: "postgres: user db 127.0.0.1(port) …".
		if title, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); !strings.Contains(string(title), "(") {
			c.background += cpu
		} else {
			v, i := ctxSwitches(pid)
			c.switches[pid] = [3]int64{v, i, minorFaults(pid)}
		}
	}
	return c
}
