package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/icebergtest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// TestSinkRowsReadByPyiceberg: a table created from the declared schema (partitioned by
// day of a timestamp), typed JSON fields converted by name, one message that does not
// convert rejected alone (on_failure skip), and the metadata columns; pyiceberg's
// SqlCatalog on the same PostgreSQL reads exactly the rows and values sent, and the
// snapshot summary carries each partition's last offset.
func TestSinkRowsReadByPyiceberg(t *testing.T) {
	icebergtest.Python(t)
	cfg, name := testConfig(t, "")
	cfg = strings.Replace(cfg, `"schema":[{"name":"p","type":"long"},{"name":"o","type":"long"}]`,
		`"schema":[{"name":"p","type":"long"},{"name":"o","type":"long"},{"name":"name","type":"string","required":true},
{"name":"score","type":"double"},{"name":"ok","type":"boolean"},{"name":"ts","type":"timestamptz"},{"name":"day","type":"date"},{"name":"n","type":"int"}],
"partition_by":["day(ts)"]`, 1)
	ctx := context.Background()
	c := sdktest.NewCommitter()
	s := New()
	env := sdktest.SinkEnv(t, cfg, c)
	env.OnFailure = sdk.FailureSkip
	if err := s.Open(ctx, env); err != nil {
		t.Fatal(err)
	}
	topic := sdktest.Topic
	parts := []sdk.Partition{sdktest.Part(0), sdktest.Part(1)}
	if _, err := s.Assigned(ctx, topic, parts); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		c.Assign(p, 0)
	}
	payload := func(p uint32, o uint64) []byte {
		if p == 1 && o == 2 {
			return []byte(`{"p":1,"o":2,"name":"bad","n":"seven"}`) // n is no integer
		}
		return fmt.Appendf(nil, `{"p":%d,"o":%d,"name":"n%d-%d","score":%d.5,"ok":%t,"ts":"2024-03-%02dT10:00:00Z","day":"2024-01-%02d","n":%d,"extra":{"x":1}}`,
			p, o, p, o, o, o%2 == 0, 16+o%2, 1+o, o*10)
	}
	for _, p := range parts {
		err := sdktest.Consume(ctx, s, c, topic, p, sdktest.Messages(p.PartitionID, 0, 4, payload))
		var rej *sdk.RejectedMessages
		if p.PartitionID == 1 {
			if !errors.As(err, &rej) || !slices.Equal(rej.Offsets, []uint64{2}) || !strings.Contains(err.Error(), `column "n" (int32): want an integer, got "seven"`) {
				t.Fatalf("partition 1: want offset 2 rejected for its n, got %v", err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if done, _ := c.Done(p); done != 4 {
			t.Errorf("partition %d: committed up to %d, want 4 (offsets 0..3)", p.PartitionID, done)
		}
	}
	wh, _ := warehouseLocation(mustParse(t, cfg))
	tbl := icebergtest.Read(t, icebergtest.Catalog{Name: name, URL: os.Getenv("FERRY_POSTGRES_URL"), Warehouse: wh}, "ns.events")
	var got []string
	for _, r := range tbl.Rows {
		b, _ := json.Marshal(r)
		got = append(got, string(b))
	}
	slices.Sort(got)
	var want []string
	for p := range uint64(2) {
		for o := range uint64(4) {
			if p == 1 && o == 2 {
				continue
			}
			want = append(want, fmt.Sprintf(`{"day":"2024-01-%02d","iggy_offset":%d,"iggy_partition":%d,"iggy_stream":"%s","iggy_timestamp":"%s","iggy_topic":"%s","n":%d,"name":"n%d-%d","o":%d,"ok":%t,"p":%d,"score":%d.5,"ts":"2024-03-%02dT10:00:00+00:00"}`,
				1+o, o, p, topic.Stream, tsISO(sdktest.Message(uint32(p), o, nil).Timestamp), topic.Topic, o*10, p, o, o, o%2 == 0, p, o, 16+o%2))
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("pyiceberg read:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	last := tbl.Snapshots[len(tbl.Snapshots)-1]
	for p := range 2 {
		if k := offsetKey("test", topic.Stream, topic.Topic, uint32(p)); last[k] != "3" {
			t.Errorf("the last snapshot's %s = %q, want 3 (summary %v)", k, last[k], last)
		}
	}
	if len(tbl.Snapshots) != 1 || tbl.Files != 4 {
		t.Errorf("%d snapshots with %d data files, want 1 append of 4 files (2 partitions × 2 days)", len(tbl.Snapshots), tbl.Files)
	}
}

func mustParse(t *testing.T, cfg string) *config {
	c, err := Config.Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// tsISO is a µs timestamp as pyiceberg prints a timestamptz.
func tsISO(us uint64) string {
	ts := time.UnixMicro(int64(us)).UTC()
	if ts.Nanosecond() == 0 {
		return ts.Format("2006-01-02T15:04:05") + "+00:00"
	}
	return ts.Format("2006-01-02T15:04:05.000000") + "+00:00"
}
