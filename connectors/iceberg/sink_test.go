package iceberg

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/catalog"

	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

var catalogs atomic.Int64

// testConfig is a plugin_config on the SQL catalog of FERRY_POSTGRES_URL, a catalog name
// of the test's own and a warehouse in a temporary directory; extra is appended.
func testConfig(t *testing.T, extra string) (string, string) {
	t.Helper()
	return testConfigAt(t, t.TempDir(), extra)
}

// testConfigAt is testConfig with the warehouse given.
func testConfigAt(t *testing.T, warehouse, extra string) (string, string) {
	t.Helper()
	_, url := pgtest.Connect(t)
	name := fmt.Sprintf("t%d_%d", time.Now().UnixNano(), catalogs.Add(1))
	return fmt.Sprintf(`{"catalog_type":"sql","uri":%q,"warehouse":%q,"catalog_name":%q,"tables":["ns.events"],
"include_metadata":true,"flush_interval":"1h","schema":[{"name":"p","type":"long"},{"name":"o","type":"long"}]%s}`,
		url, warehouse, name, extra), name
}

// readTable scans ns.events with iceberg-go: each row's partition, offset and payload
// rebuilt from its columns p and o.
func readTable(ctx context.Context, cfg string) ([]sdktest.Record, error) {
	c, err := Config.Parse([]byte(cfg))
	if err != nil {
		return nil, err
	}
	wh, _ := warehouseLocation(&c)
	cat, closeCat, err := openCatalog(ctx, &c, wh)
	if err != nil {
		return nil, err
	}
	defer func() { _ = closeCat() }()
	tbl, err := cat.LoadTable(ctx, catalog.ToIdentifier("ns", "events"))
	if err != nil {
		return nil, err
	}
	scan := tbl.Scan()
	at, err := scan.ToArrowTable(ctx)
	if err != nil {
		return nil, err
	}
	defer at.Release()
	rdr := array.NewTableReader(at, 1024)
	defer rdr.Release()
	var out []sdktest.Record
	for rdr.Next() {
		rec := rdr.RecordBatch()
		idx := func(n string) int { return rec.Schema().FieldIndices(n)[0] }
		part := rec.Column(idx(colPartition)).(*array.Int32)
		off := rec.Column(idx(colOffset)).(*array.Int64)
		p := rec.Column(idx("p")).(*array.Int64)
		o := rec.Column(idx("o")).(*array.Int64)
		for i := range int(rec.NumRows()) {
			out = append(out, sdktest.Record{Partition: uint32(part.Value(i)), Offset: uint64(off.Value(i)),
				Payload: fmt.Appendf(nil, `{"p":%d,"o":%d}`, p.Value(i), o.Value(i))})
		}
	}
	return out, rdr.Err()
}

// TestSinkExactlyOnceAtEveryCrash: the kit's harness against the real SQL catalog on
// PostgreSQL and a local warehouse: open, assignment (the seek from the snapshots),
// batches of three partitions, the runtime's stores, a rebalance, close; whole, then with
// a crash at each step. The table, scanned, holds every message once with its values.
// Flushes happen only at the rebalance and at Close (flush_interval 1h), so a crash
// loses buffered rows that must come again from the group's offset.
func TestSinkExactlyOnceAtEveryCrash(t *testing.T) {
	cfg, _ := testConfig(t, "")
	sdktest.SinkHarness{
		New:            func() sdk.Sink { return New() },
		Config:         cfg,
		SinkControlled: true,
		Guarantee:      sdktest.ExactlyOnce,
		Messages:       20,
		Reset:          func(ctx context.Context) error { return dropTable(ctx, cfg) },
		Read:           func(ctx context.Context) ([]sdktest.Record, error) { return readTable(ctx, cfg) },
		Crash:          func(s sdk.Sink) { s.(*Sink).crash() },
	}.CrashAtEveryStep(t)
}

// dropTable drops ns.events (the next Open creates it again, empty).
func dropTable(ctx context.Context, cfg string) error {
	return withCatalog(ctx, cfg, func(cat catalog.Catalog) error {
		err := cat.DropTable(ctx, catalog.ToIdentifier("ns", "events"))
		if errors.Is(err, catalog.ErrNoSuchTable) {
			return nil
		}
		return err
	})
}

func withCatalog(ctx context.Context, cfg string, fn func(catalog.Catalog) error) error {
	c, err := Config.Parse([]byte(cfg))
	if err != nil {
		return err
	}
	wh, _ := warehouseLocation(&c)
	cat, closeCat, err := openCatalog(ctx, &c, wh)
	if err != nil {
		return err
	}
	defer func() { _ = closeCat() }()
	return fn(cat)
}
