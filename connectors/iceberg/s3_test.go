package iceberg

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ferryio/ferry/internal/icebergtest"
	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// TestSinkOnS3ExactlyOnceAtEveryCrash: the harness's run with a crash at every step, the
// data on the S3 server (versitygw) through iceberg-go's S3 IO, the catalog on PostgreSQL;
// then pyiceberg reads the last run's table from the bucket: every message once, with its
// values.
func TestSinkOnS3ExactlyOnceAtEveryCrash(t *testing.T) {
	srv := s3test.Connect(t)
	icebergtest.Python(t)
	bucket := srv.Bucket(t)
	cfg, name := testConfigAt(t, bucket+"/lake", fmt.Sprintf(`,"store_class":"s3","store_url":%q,"store_access_key_id":%q,"store_secret_access_key":%q,"store_region":%q`,
		srv.Endpoint, srv.AccessKey, srv.SecretKey, srv.Region))
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
	tbl := icebergtest.Read(t, icebergtest.Catalog{Name: name, URL: os.Getenv("FERRY_POSTGRES_URL"), Warehouse: "s3://" + bucket + "/lake",
		Props: map[string]string{"s3.endpoint": srv.Endpoint, "s3.access-key-id": srv.AccessKey, "s3.secret-access-key": srv.SecretKey,
			"s3.region": srv.Region, "s3.force-virtual-addressing": "false"}}, "ns.events")
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
	if len(seen) != 60 {
		t.Fatalf("pyiceberg read %d distinct rows from the bucket, want 60", len(seen))
	}
	keys := srv.Keys(t, bucket)
	if len(keys) == 0 || !strings.HasPrefix(keys[0], "lake/") {
		t.Fatalf("the bucket's keys %v: want the table under lake/", keys)
	}
}
