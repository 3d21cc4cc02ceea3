package conformance

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// iceberg-soak runs the Iceberg sink (builtin:iceberg, sink_controlled) into a table of
// its own, in a SQL catalog of its own on the PostgreSQL database given and a local
// warehouse under the work directory, while the runtime is SIGKILLed Config.Soak times,
// and judges from the table only: its current snapshot is scanned (apache/iceberg-go,
// the catalog's own library) and each produced (partition, offset) must be in exactly
// one row. The kills alternate between a random (seeded) moment and a held offset store
// (the storeGate of postgres-soak): the sink committed after its catalog commit, the gate
// holds the runtime's store, and the kill leaves rows in the table past the group's
// stored offset, which a sink that trusts Iggy's offset appends again. Flushes are
// frequent, so snapshot boundaries depend on timing.

// icebergSoak is one iceberg-soak run: the fixture and the catalog.
type icebergSoak struct {
	f     *fixture
	cat   catalog.Catalog
	ident []string
}

func (s *icebergSoak) tally(ctx context.Context) (pgTally, error) {
	t, _, err := s.read(ctx)
	return t, err
}

func (s *icebergSoak) maxWritten(ctx context.Context) (map[uint32]int64, error) {
	_, max, err := s.read(ctx)
	return max, err
}

// read scans the table's current snapshot: the tally and the highest offset written per
// partition. A table not created yet holds nothing.
func (s *icebergSoak) read(ctx context.Context) (pgTally, map[uint32]int64, error) {
	var t pgTally
	max := map[uint32]int64{}
	for q := uint32(0); q < s.f.partitions; q++ {
		max[q] = -1
	}
	tbl, err := s.cat.LoadTable(ctx, s.ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return t, max, nil
	}
	if err != nil {
		return t, nil, fmt.Errorf("load table conformance.events: %w", err)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		return t, nil, fmt.Errorf("scan table conformance.events: %w", err)
	}
	defer at.Release()
	rdr := array.NewTableReader(at, 4096)
	defer rdr.Release()
	seen := map[pkey]int{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		col := func(name string) arrowInts {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) == 0 {
				return nil
			}
			return ints(rec.Column(idx[0]))
		}
		part, off, p, n := col("iggy_partition"), col("iggy_offset"), col("p"), col("n")
		if part == nil || off == nil || p == nil || n == nil {
			return t, nil, fmt.Errorf("table conformance.events lacks a column of iggy_partition, iggy_offset, p, n (schema %s)", rec.Schema())
		}
		for i := range int(rec.NumRows()) {
			t.rows++
			k := pkey{uint32(part(i)), uint64(off(i))}
			if _, ok := s.f.sent[k]; !ok {
				t.unknown++
				continue
			}
			if uint32(p(i)) != k.p || uint64(n(i)) != k.off {
				t.corrupt++
			}
			seen[k]++
			if int64(k.off) > max[k.p] {
				max[k.p] = int64(k.off)
			}
		}
	}
	if err := rdr.Err(); err != nil {
		return t, nil, err
	}
	for k := range s.f.sent {
		if c := seen[k]; c == 0 {
			t.lost++
		} else {
			t.covered++
			t.duplicated += c - 1
		}
	}
	return t, max, nil
}

// arrowInts reads row i of an integer column (a null is -1).
type arrowInts func(i int) int64

func ints(a interface{ IsNull(int) bool }) arrowInts {
	switch c := a.(type) {
	case *array.Int64:
		return func(i int) int64 {
			if c.IsNull(i) {
				return -1
			}
			return c.Value(i)
		}
	case *array.Int32:
		return func(i int) int64 {
			if c.IsNull(i) {
				return -1
			}
			return int64(c.Value(i))
		}
	}
	return nil
}

func runIcebergSoak(ctx context.Context, r *Runner, mode string) Result {
	kills := r.cfg.Soak
	expected := fmt.Sprintf("%d SIGKILLs: lost 0, duplicated 0 (exactly-once into an Iceberg table)", kills)
	if r.cfg.Iceberg == "" {
		return unsupported(expected, errors.New("no Iceberg catalog database given (--iceberg postgres://…)"))
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return broken(expected, err)
	}
	name := "ferry_conformance_" + hex.EncodeToString(b)
	warehouse := filepath.Join(r.dir, name+"-warehouse")
	if err := os.MkdirAll(warehouse, 0o755); err != nil {
		return broken(expected, err)
	}
	db, err := sql.Open("pgx", r.cfg.Iceberg)
	if err != nil {
		return broken(expected, fmt.Errorf("--iceberg: %w", err))
	}
	defer func() { _ = db.Close() }()
	cat, err := sqlcat.NewCatalog(name, db, sqlcat.Postgres, iceberg.Properties{"warehouse": "file://" + warehouse})
	if err != nil {
		return broken(expected, fmt.Errorf("the SQL catalog (--iceberg): %w", err))
	}
	s := &icebergSoak{cat: cat, ident: []string{"conformance", "events"}}
	r.log.Info("iceberg-soak catalog", "mode", mode, "catalog", name, "warehouse", warehouse, "kept", r.cfg.Keep)
	if !r.cfg.Keep {
		defer func() {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = cat.DropTable(dctx, s.ident)
			_ = cat.DropNamespace(dctx, []string{"conformance"})
		}()
	}
	pc := map[string]string{
		"tables": `["conformance.events"]`, "catalog_type": `"sql"`, "uri": strconv.Quote(r.cfg.Iceberg),
		"warehouse": strconv.Quote(warehouse), "catalog_name": strconv.Quote(name), "include_metadata": "true",
		"flush_interval": `"150ms"`, "schema": `[{name = "p", type = "long"}, {name = "n", type = "long"}]`,
	}
	f, gate, p, err := r.soakStart(ctx, "iceberg-soak", mode, connector{batch: 20, schema: "json", maxRetries: -1, plugin: "builtin:iceberg", pluginConfig: pc},
		func(f *fixture) { s.f = f })
	if err != nil {
		return broken(expected, err)
	}
	defer gate.close()
	defer func() { p.kill() }()
	rng := mrand.New(mrand.NewSource(r.cfg.Seed))
	fail := func(err error) Result { return broken(expected, err) }
	err = f.wait(ctx, "the Iceberg sink's first snapshot", func() bool {
		t, err := s.tally(ctx)
		return p.exited() || (err == nil && t.rows > 0)
	})
	if err == nil && p.exited() {
		err = fmt.Errorf("before the Iceberg sink appended a row: %w", exitError(p))
	}
	if err != nil {
		return unsupported(expected, fmt.Errorf("%w; runtime log: %s", err, oneLine(p.tail(5))))
	}
	var held, ahead, noStore int
	if p, held, ahead, noStore, err = alternateKills(ctx, f, s, p, gate, rng, kills); err != nil {
		return fail(err)
	}
	how := fmt.Sprintf("%d at held offset stores (%d with rows past the stored offset), %d at random moments", held, ahead, kills-held)
	return soakFinish(ctx, expected, f, s, p, kills, noStore, how)
}
