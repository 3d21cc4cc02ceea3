package iceberg

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/ferryio/ferry/internal/icebergtest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// restCatalog is the REST catalog of scripts/iceberg.sh rest-start (Apache Iceberg's own
// REST catalog server): its URL and its warehouse. Unset, the test is skipped; set and
// down, it fails.
func restCatalog(t *testing.T) (url, warehouse string) {
	t.Helper()
	url, warehouse = os.Getenv("FERRY_ICEBERG_REST_URL"), os.Getenv("FERRY_ICEBERG_REST_WAREHOUSE")
	if url == "" {
		t.Skip("FERRY_ICEBERG_REST_URL is not set: run `bash scripts/iceberg.sh rest-install` and `eval \"$(bash scripts/iceberg.sh rest-start)\"` for the REST catalog tests")
	}
	if warehouse == "" {
		t.Fatal("FERRY_ICEBERG_REST_URL is set without FERRY_ICEBERG_REST_WAREHOUSE (scripts/iceberg.sh rest-start prints both)")
	}
	return url, warehouse
}

// TestRESTCatalogExactlyOnceAtEveryCrash: the harness's run with a crash at every step
// against a real REST catalog (Iceberg's RESTCatalogServer: the commit's assertion of the
// current snapshot is the server's, as are the conflicts), data in its local warehouse;
// then pyiceberg's RestCatalog reads the last run's table: every message once, with its
// values, and the snapshot summary's offsets.
func TestRESTCatalogExactlyOnceAtEveryCrash(t *testing.T) {
	url, warehouse := restCatalog(t)
	icebergtest.Python(t)
	cfg := fmt.Sprintf(`{"catalog_type":"rest","uri":%q,"warehouse":%q,"tables":["ns.events"],
"include_metadata":true,"flush_interval":"1h","schema":[{"name":"p","type":"long"},{"name":"o","type":"long"}]}`, url, warehouse)
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
	tbl := icebergtest.Read(t, icebergtest.Catalog{Name: "rest", URL: url, REST: true, Warehouse: warehouse}, "ns.events")
	seen := map[string]bool{}
	for _, r := range tbl.Rows {
		if fmt.Sprint(r["p"]) != fmt.Sprint(r["iggy_partition"]) || fmt.Sprint(r["o"]) != fmt.Sprint(r["iggy_offset"]) {
			t.Fatalf("row %v is not its message's", r)
		}
		k := fmt.Sprint(r["iggy_partition"], "/", r["iggy_offset"])
		if seen[k] {
			t.Fatalf("%s twice", k)
		}
		seen[k] = true
	}
	if len(seen) != 60 || len(tbl.Rows) != 60 {
		t.Fatalf("pyiceberg (RestCatalog) read %d rows, %d distinct; want 60 of each", len(tbl.Rows), len(seen))
	}
	last := tbl.Snapshots[len(tbl.Snapshots)-1]
	for p := range 3 {
		if k := offsetKey("test", sdktest.Topic.Stream, sdktest.Topic.Topic, uint32(p)); last[k] != "19" {
			t.Errorf("the last snapshot's %s = %q, want 19 (summary %v)", k, last[k], last)
		}
	}
}
