package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestPostgresCDCThroughput measures, in one run, how fast a bulk insert of
// FERRY_CDC_BENCH_ROWS rows (default 1,000,000, one transaction) reaches Iggy through the
// CDC source (a ferry server and a ferry run process, 3 partitions), beside how fast
// pg_recvlogical streams the same WAL from a pgoutput slot of its own to /dev/null, once
// before Ferry and once after (the machine is shared: the ratio is taken against the faster
// of the two, the stricter limit). Every slot exists before the insert and decodes the same
// WAL, one after the other. Each process's CPU per change is reported beside. It runs only
// with FERRY_CDC_BENCH=1 (scripts/bench.sh sets it) and fails unless every row arrived once.
func TestPostgresCDCThroughput(t *testing.T) {
	if os.Getenv("FERRY_CDC_BENCH") == "" {
		t.Skip("FERRY_CDC_BENCH is not set: the CDC throughput run is part of scripts/bench.sh")
	}
	rows := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("FERRY_CDC_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	recv, err := filepath.Glob("/usr/lib/postgresql/*/bin/pg_recvlogical")
	if err != nil || len(recv) == 0 {
		t.Fatal("pg_recvlogical not found under /usr/lib/postgresql/*/bin")
	}
	db, url := pgDB(t)
	ctx := context.Background()
	name := fmt.Sprintf("bench_cdc_%d", time.Now().UnixNano()%1_000_000)
	for _, q := range []string{
		"CREATE TABLE " + name + " (id int PRIMARY KEY, v int NOT NULL, note text)",
		"CREATE PUBLICATION " + name + "_pub FOR TABLE " + name,
		"SELECT pg_create_logical_replication_slot('" + name + "', 'pgoutput')",
		"SELECT pg_create_logical_replication_slot('" + name + "_recv', 'pgoutput')",
		"SELECT pg_create_logical_replication_slot('" + name + "_recv2', 'pgoutput')",
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(ctx, testkit.Patience)
		defer cancel()
		for _, s := range []string{name, name + "_recv", name + "_recv2"} {
			if err := pgtest.DropSlot(dctx, db, s); err != nil {
				t.Log(err)
			}
		}
		_, _ = db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name+"_pub")
		_, _ = db.Exec(ctx, "DROP TABLE IF EXISTS "+name)
	})
	start := time.Now()
	if _, err := db.Exec(ctx, "INSERT INTO "+name+" SELECT g, g, 'row ' || g FROM generate_series(1, $1) g", rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("insert of %d rows: %s", rows, time.Since(start).Round(time.Millisecond))
	var end string
	if err := db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&end); err != nil {
		t.Fatal(err)
	}

	// pg_recvlogical: the server's decoding and the wire, nothing else. It returns its time,
	// its own CPU seconds and PostgreSQL's.
	recvlogical := func(slot string) (time.Duration, float64, float64) {
		procs, pg0 := postgresChildren(t), postgresCPU(t).all
		start := time.Now()
		cmd := exec.Command(recv[0], "-d", url, "-S", slot, "--start", "-E", end, "--no-loop",
			"-o", "proto_version=1", "-o", "publication_names="+name+"_pub", "-f", "/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pg_recvlogical: %v\n%s", err, out)
		}
		d := time.Since(start)
		waitReaped(t, procs) // its walsender, whose time then counts
		return d, (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), postgresCPU(t).all - pg0
	}
	recvTime, recvCPU, recvPG := recvlogical(name + "_recv")

	// Ferry: the source from the slot to a 3-partition topic, every change acknowledged.
	dir := t.TempDir()
	prof := os.Getenv("FERRY_BENCH_PROFILE") // a CPU profile of each process, for go tool pprof
	var runEnv []string
	if prof != "" {
		t.Setenv("FERRY_CPU_PROFILE", filepath.Join(prof, "cdc-server.pprof"))
		runEnv = []string{"FERRY_CPU_PROFILE=" + filepath.Join(prof, "cdc-run.pprof")}
	}
	srv, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.CreateStream(cctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(cctx, iggy.Name("s"), "cdc", cdcPartitions); err != nil {
		t.Fatal(err)
	}
	cancel()
	conns := filepath.Join(dir, "pg")
	batch := 5000
	if v, err := strconv.Atoi(os.Getenv("FERRY_CDC_BENCH_BATCH")); err == nil && v > 0 {
		batch = v
	}
	src := strings.Replace(cdcSource(url, name, []string{name}), "batch_size = 500\n", fmt.Sprintf("batch_size = %d\n", batch), 1)
	src = strings.Replace(src, "batch_length = 1000\n", fmt.Sprintf("batch_length = %d\n", batch), 1)
	src += "publication = \"" + name + "_pub\"\n"
	inFlight := 4 // batches read and not yet acknowledged, as cdcSource (the source accepts any number)
	if v, err := strconv.Atoi(os.Getenv("FERRY_CDC_BENCH_IN_FLIGHT")); err == nil && v > 0 {
		inFlight = v
	}
	src = strings.Replace(src, "max_in_flight = 4\n", fmt.Sprintf("max_in_flight = %d\n", inFlight), 1)
	writeFile(t, filepath.Join(conns, "cdc.toml"), src)
	srv0, pg0 := procCPU(srv.cmd.Process.Pid), postgresCPU(t).all
	start = time.Now()
	run := startFerry(t, "run", dir, runEnv, "run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0")
	var first time.Duration // until the first change is in Iggy: the process's start
	testkit.WaitFor(t, "every row in the topic", func() bool {
		if run.exited() {
			t.Fatalf("run exited: %v\n%s", run.err, tail(run.out.String(), 20))
		}
		n := topicMessages(c, "cdc")
		if n > 0 && first == 0 {
			first = time.Since(start)
		}
		return n >= uint64(rows)
	})
	ferryTime := time.Since(start)
	runCPU, srvCPU, ferryPG := procCPU(run.cmd.Process.Pid), procCPU(srv.cmd.Process.Pid)-srv0, postgresCPU(t).all-pg0
	run.stop(30 * time.Second)
	if n := topicMessages(c, "cdc"); n != uint64(rows) {
		t.Fatalf("topic holds %d messages, want %d", n, rows)
	}
	srv.stop(30 * time.Second) // a clean exit writes its CPU profile
	recvTime2, recvCPU2, recvPG2 := recvlogical(name + "_recv2")
	rate := func(d time.Duration) float64 { return float64(rows) / d.Seconds() }
	us := func(cpu float64) float64 { return cpu * 1e6 / float64(rows) }
	for _, r := range []struct {
		when       string
		d          time.Duration
		cpu, pgCPU float64
	}{{"before", recvTime, recvCPU, recvPG}, {"after", recvTime2, recvCPU2, recvPG2}} {
		t.Logf("pg_recvlogical (%s Ferry): %d changes in %s = %.0f changes/s; CPU µs/change: pg_recvlogical %.2f, PostgreSQL %.2f",
			r.when, rows, r.d.Round(time.Millisecond), rate(r.d), us(r.cpu), us(r.pgCPU))
	}
	recvTime = min(recvTime, recvTime2) // the faster of the two: the stricter limit
	t.Logf("ferry CDC source into Iggy (3 partitions, batch_size %d, max_in_flight %d, acknowledged): %d changes in %s = %.0f changes/s (%.2f × pg_recvlogical); CPU µs/change: ferry run %.2f, ferry server %.2f, PostgreSQL %.2f",
		batch, inFlight, rows, ferryTime.Round(time.Millisecond), rate(ferryTime), rate(ferryTime)/rate(recvTime), us(runCPU), us(srvCPU), us(ferryPG))
	t.Logf("ferry: first change in Iggy %s after the process started", first.Round(time.Millisecond))
	for _, l := range strings.Split(run.out.String(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Logf("ferry run: %s", l) // a retry or a failure slows the run: say so
		}
	}
}

// TestPostgresCDCLatency measures the time from a transaction's commit (the record's
// timestamp, PostgreSQL's commit time) to its append in Iggy (the message's server
// timestamp), p50 and p99, while a writer commits 1,000 single-row transactions a second
// for 5 s. synchronous_commit stays on: PostgreSQL sends a transaction to logical
// replication only once its WAL is flushed, so with it off the WAL writer's delay (200 ms)
// would dominate. Only with FERRY_CDC_BENCH=1.
func TestPostgresCDCLatency(t *testing.T) {
	if os.Getenv("FERRY_CDC_BENCH") == "" {
		t.Skip("FERRY_CDC_BENCH is not set: the CDC latency run is part of scripts/bench.sh")
	}
	const rate, total = 1000, 5000
	db, url := pgDB(t)
	ctx := context.Background()
	name := fmt.Sprintf("lat_cdc_%d", time.Now().UnixNano()%1_000_000)
	if _, err := db.Exec(ctx, "CREATE TABLE "+name+" (id int PRIMARY KEY, v int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(ctx, testkit.Patience)
		defer cancel()
		if err := pgtest.DropSlot(dctx, db, name); err != nil {
			t.Log(err)
		}
		_, _ = db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name+"_pub")
		_, _ = db.Exec(ctx, "DROP TABLE IF EXISTS "+name)
	})
	dir := t.TempDir()
	_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
	c := dial(t, addr)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.CreateStream(cctx, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(cctx, iggy.Name("s"), "cdc", cdcPartitions); err != nil {
		t.Fatal(err)
	}
	cancel()
	conns := filepath.Join(dir, "pg")
	writeFile(t, filepath.Join(conns, "cdc.toml"), cdcSource(url, name, []string{name}))
	run := startFerry(t, "run", dir, nil, "run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0")
	testkit.WaitFor(t, "the replication slot", func() bool {
		return pgCount(db, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+name+"'") == 1
	})
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range total {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / rate)); d > 0 {
			time.Sleep(d) // the writer's pace
		}
		if _, err := conn.Exec(ctx, "INSERT INTO "+name+" VALUES ($1, $1)", i); err != nil {
			t.Fatal(err)
		}
	}
	conn.Release()
	writeTime := time.Since(start)
	testkit.WaitFor(t, "every row in the topic", func() bool { return topicMessages(c, "cdc") >= total })
	run.stop(30 * time.Second)
	var lat []time.Duration
	for p := range uint32(cdcPartitions) {
		next := uint64(0)
		for {
			part := p
			r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(9)},
				Stream: iggy.Name("s"), Topic: iggy.Name("cdc"), Partition: &part, Strategy: wire.PollOffset(next), Count: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Messages) == 0 {
				r.Release()
				break
			}
			for _, m := range r.Messages {
				var rec struct {
					Timestamp time.Time `json:"timestamp"`
				}
				if err := json.Unmarshal(m.Payload, &rec); err != nil {
					t.Fatal(err)
				}
				lat = append(lat, time.UnixMicro(int64(m.Timestamp)).Sub(rec.Timestamp))
				next = m.Offset + 1
			}
			r.Release()
		}
	}
	if len(lat) != total {
		t.Fatalf("read %d messages back, want %d", len(lat), total)
	}
	slices.Sort(lat)
	pct := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	t.Logf("%d single-row transactions at %.0f/s: commit → Iggy append p50 %s, p99 %s, max %s",
		total, float64(total)/writeTime.Seconds(), pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
}
