package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
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
	run   func(b *testing.B, url, table string) (time.Duration, float64)
	rates []float64
	// CPU seconds per round: the ferry run process, the ferry server, PostgreSQL (the
	// postmaster and its children, read before the connections close).
	cpuRun, cpuServer, cpuPG []float64
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
	srv, addr := startServer(b, "server", dir, filepath.Join(dir, "data"))
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
		{name: "d_bare_pgx_copy_loop", run: func(b *testing.B, url, table string) (time.Duration, float64) {
			return bareCopyLoop(b, url, table, false)
		}},
		{name: "e_bare_copy_loop_text", run: func(b *testing.B, url, table string) (time.Duration, float64) {
			return bareCopyLoop(b, url, table, true)
		}},
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
			srv0, pg0 := procCPU(srv.cmd.Process.Pid), postgresCPU(b)
			var cpuRun, pgEnd float64
			if s.run != nil {
				d, pgEnd = s.run(b, url, table)
			} else {
				d, cpuRun, pgEnd = ferryToPostgres(b, db, url, addr, table, fmt.Sprintf("pg_%s_r%d", s.name[:1], r), s)
			}
			s.cpuRun = append(s.cpuRun, cpuRun)
			s.cpuServer = append(s.cpuServer, procCPU(srv.cmd.Process.Pid)-srv0)
			s.cpuPG = append(s.cpuPG, pgEnd-pg0)
			drop()
			s.rates = append(s.rates, float64(pgbPartitions*pgbPerPart)/d.Seconds())
			b.Logf("round %d %s: %.0f rows/s", r, s.name, s.rates[len(s.rates)-1])
		}
	}
	bare := median(series[3].rates)
	official := median(series[0].rates)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "series\tmedian rows/s\tmin\tmax\t× bare COPY loop\t× one batch per tx\tCPU µs/row: ferry run\tferry server\tpostgres\t\n")
	perRow := func(v []float64) float64 { return median(v) / (pgbPartitions * pgbPerPart) * 1e6 }
	for _, s := range series {
		m := median(s.rates)
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%.0f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t\n", s.name, m, slices.Min(s.rates), slices.Max(s.rates), m/bare, m/official,
			perRow(s.cpuRun), perRow(s.cpuServer), perRow(s.cpuPG))
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
// offsets table covers every message, stops it and checks the table. It returns the time,
// the process's CPU seconds and PostgreSQL's (postgresCPU), both read before the stop.
func ferryToPostgres(b *testing.B, db *pgxpool.Pool, url, addr, table, key string, s *pgbSeries) (time.Duration, float64, float64) {
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
	cpu, pg := procCPU(run.cmd.Process.Pid), postgresCPU(b)
	run.stop(15 * time.Second)
	rows := pgCount(db, "SELECT count(*) FROM "+table)
	distinct := pgCount(db, "SELECT count(DISTINCT (iggy_partition_id, iggy_offset)) FROM "+table)
	if rows != total || distinct != total {
		b.Fatalf("%s: %d rows, %d distinct (partition, offset); want %d each", key, rows, distinct, total)
	}
	return d, cpu, pg
}

// bareCopyLoop writes the same 300k rows into a table of the sink's layout with pgx's
// CopyFrom (COPY's binary format), pgbBatch rows per COPY (one transaction each), one
// connection per partition, all at once: timed from connecting to the last commit. With
// text, it sends COPY's text format instead (the same rows, encoded by hand).
func bareCopyLoop(b *testing.B, url, table string, text bool) (time.Duration, float64) {
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
			if text {
				errs[p] = textCopyLoop(ctx, pool, table, cols, p, ts)
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
	return d, postgresCPU(b)
}

// textCopyLoop is bareCopyLoop's partition p in COPY's text format.
func textCopyLoop(ctx context.Context, pool *pgxpool.Pool, table string, cols []string, p uint32, ts time.Time) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	sql := "COPY " + pgx.Identifier{table}.Sanitize() + " (" + strings.Join(cols, ", ") + ") FROM STDIN"
	stamp := ts.Format("2006-01-02 15:04:05.999999Z07:00")
	var buf bytes.Buffer
	for base := uint64(0); base < pgbPerPart; base += pgbBatch {
		buf.Reset()
		for i := range uint64(pgbBatch) {
			o := base + i
			fmt.Fprintf(&buf, "%d\t%d\t%s\ts\tt\t%d\t%d\t%s\t", int64(p)<<40|int64(o), o, stamp, p, o, stamp)
			for _, c := range pgbPayload(p, o) {
				switch c {
				case '\\', '\t', '\n', '\r':
					buf.WriteByte('\\')
				}
				buf.WriteByte(c)
			}
			buf.WriteByte('\n')
		}
		if _, err := conn.Conn().PgConn().CopyFrom(ctx, &buf, sql); err != nil {
			return err
		}
	}
	return nil
}

// procCPU is the user and system CPU seconds process pid has used (0 when it is gone).
func procCPU(pid int) float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) in parentheses: state is 3rd,
	// ppid 4th, utime 14th, stime 15th, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	sys, _ := strconv.ParseFloat(f[12], 64)
	return (u + sys) / 100
}

// postgresChildren is the set of the cluster's running processes below its postmaster.
func postgresChildren(b testing.TB) map[int]bool {
	pidFile, err := os.ReadFile(filepath.Join(os.Getenv("FERRY_POSTGRES_DIR"), "data", "postmaster.pid"))
	if err != nil {
		b.Fatalf("the PostgreSQL cluster's postmaster.pid (FERRY_POSTGRES_DIR): %v", err)
	}
	master, _ := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	out := map[int]bool{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if ppid, _ := strconv.Atoi(f[1]); ppid == master {
			out[pid] = true
		}
	}
	return out
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
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	u, _ := strconv.ParseFloat(f[13], 64)
	sys, _ := strconv.ParseFloat(f[14], 64)
	return (u + sys) / 100
}

// postgresCPU is the CPU seconds used so far by the cluster of scripts/postgres.sh
// (FERRY_POSTGRES_DIR): its postmaster, the processes it started that still run, and those
// that ended (a walsender, a closed connection's backend: the postmaster waited for them,
// so their time is in its children's fields).
func postgresCPU(b testing.TB) float64 {
	pidFile, err := os.ReadFile(filepath.Join(os.Getenv("FERRY_POSTGRES_DIR"), "data", "postmaster.pid"))
	if err != nil {
		b.Fatalf("the PostgreSQL cluster's postmaster.pid (FERRY_POSTGRES_DIR): %v", err)
	}
	master, _ := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	total := procCPU(master) + childrenCPU(master)
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		if ppid, _ := strconv.Atoi(f[1]); ppid == master {
			total += procCPU(pid)
		}
	}
	return total
}
