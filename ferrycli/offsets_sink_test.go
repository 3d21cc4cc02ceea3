package ferrycli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/internal/testkit"
)

// startTargetRun runs ferry run --embedded with the connector file of sink key besides the
// file sink, and returns the config, the embedded server's address and the API's URL.
func startTargetRun(t *testing.T, key, file string) (cfg, addr, api string) {
	t.Helper()
	cfg, addr, _, api = startRunWith(t, map[string]string{key + ".toml": file}, nil, func(logs string) bool {
		return strings.Count(logs, "sink running") >= 2
	})
	return cfg, addr, api
}

// produceLines sends lines to s/t with ferry produce.
func produceLines(t *testing.T, addr, lines string) {
	t.Helper()
	root := New().command()
	root.SetIn(strings.NewReader(lines))
	root.SetErr(&lockedBuffer{})
	root.SetArgs([]string{"produce", "s", "t", "--addr", addr, "--username", "iggy", "--password", "iggy"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// sinkOffsetsRow is the fields of partition 0's line of ferry offsets --sink key.
func sinkOffsetsRow(t *testing.T, cfg, key string) string {
	t.Helper()
	out, err := runControl(t, cfg, "offsets", "--sink", key)
	if err != nil {
		t.Fatalf("ferry offsets --sink %s: %v\n%s", key, err, out)
	}
	for l := range strings.Lines(out) {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "s" && f[2] == "0" {
			return strings.Join(f, " ")
		}
	}
	t.Fatalf("no partition 0 in:\n%s", out)
	return ""
}

// waitRow waits until partition 0's line of ferry offsets --sink key is want.
func waitRow(t *testing.T, cfg, key, want string) {
	t.Helper()
	seen := ""
	testkit.WaitFor(t, "ferry offsets --sink "+key+" to show "+want, func() bool {
		got := sinkOffsetsRow(t, cfg, key)
		if got != want && got != seen {
			t.Logf("ferry offsets --sink %s: %s (waiting for %s)", key, got, want)
			seen = got
		}
		return got == want
	})
}

// TestOffsetsPostgresSinkRewind: ferry offsets --sink shows the PostgreSQL sink's offsets
// row beside Iggy's stored offset, running and stopped, and counts the lag from the row
// (the sink resumes from it, whatever Iggy holds); PUT offsets (ferry offsets --sink --set)
// on the stopped sink sets the row, then Iggy's offset, and the restarted sink writes the
// messages after it again. Before, the PUT answered 204 having changed only Iggy's offset,
// and the sink resumed from its row as if nothing had been asked.
func TestOffsetsPostgresSinkRewind(t *testing.T) {
	db, url := pgtest.Connect(t)
	ctx := context.Background()
	suffix := time.Now().UnixNano() % 1_000_000
	table, offsets := fmt.Sprintf("rewind_rows_%d", suffix), fmt.Sprintf("rewind_offsets_%d", suffix)
	// No primary key: a replayed message is a second row, which the test counts.
	if _, err := db.Exec(ctx, `CREATE TABLE `+table+` (id numeric(39,0), iggy_offset bigint, iggy_timestamp timestamptz,
	iggy_stream text, iggy_topic text, iggy_partition_id integer, iggy_checksum bigint, iggy_origin_timestamp timestamptz,
	payload bytea, created_at timestamptz DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+offsets) })
	cfg, addr, _ := startTargetRun(t, "pg", fmt.Sprintf(`type = "sink"
key = "pg"
enabled = true
version = 0
name = "pg"
path = "builtin:postgres"

[[streams]]
stream = "s"
topics = ["t"]
schema = "raw"
poll_interval = "10ms"

[plugin_config]
connection_string = %q
target_table = %q
offsets_table = %q
`, url, table, offsets))
	perOffset := func() map[int64]int {
		rows, err := db.Query(ctx, "SELECT iggy_offset, count(*) FROM "+table+" GROUP BY iggy_offset")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]int{}
		var off, n int64
		for rows.Next() {
			if err := rows.Scan(&off, &n); err != nil {
				t.Fatal(err)
			}
			out[off] = int(n)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	produceLines(t, addr, "a\nb\nc\nd\ne\n")
	// STREAM TOPIC PARTITION CURRENT STORED TARGET RESUMES LAG OWNED
	waitRow(t, cfg, "pg", "s t 0 4 4 4 target 0 yes")

	if out, err := runControl(t, cfg, "stop", "pg"); err != nil {
		t.Fatal(out, err)
	}
	waitRow(t, cfg, "pg", "s t 0 4 4 4 target 0 no") // read by an instance opened for it
	// Iggy's offset moved behind the sink's back: the sink still resumes from its row.
	if out, err := runControl(t, cfg, "offsets", "--addr", addr, "--username", "iggy", "--password", "iggy",
		"--stream", "s", "--topic", "t", "--group", "iggy-connect-sink-pg", "--set", "0=1"); err != nil {
		t.Fatal(out, err)
	}
	waitRow(t, cfg, "pg", "s t 0 4 1 4 target 0 no")

	out, err := runControl(t, cfg, "offsets", "--sink", "pg", "--set", "0=2")
	if err != nil || !strings.HasPrefix(out, "sink pg: offsets set (0=2); it resumes after them once restarted (ferry restart pg)\n") {
		t.Fatalf("ferry offsets --sink pg --set 0=2: %v\n%s", err, out)
	}
	if got := sinkOffsetsRow(t, cfg, "pg"); got != "s t 0 4 2 2 target 2 no" {
		t.Fatalf("after the rewind: %s", got)
	}
	var last int64
	var noTS bool
	if err := db.QueryRow(ctx, "SELECT last_offset, last_timestamp IS NULL FROM "+offsets+" WHERE connector = 'pg' AND stream = 's' AND topic = 't' AND partition_id = 0").Scan(&last, &noTS); err != nil {
		t.Fatal(err)
	}
	if last != 2 || !noTS {
		t.Fatalf("offsets row after the rewind: last_offset %d, last_timestamp NULL %v; want 2, true", last, noTS)
	}
	if got := perOffset(); !maps.Equal(got, map[int64]int{0: 1, 1: 1, 2: 1, 3: 1, 4: 1}) {
		t.Fatalf("rows per offset before the restart: %v", got)
	}

	if out, err := runControl(t, cfg, "restart", "pg"); err != nil {
		t.Fatal(out, err)
	}
	want := map[int64]int{0: 1, 1: 1, 2: 1, 3: 2, 4: 2}
	testkit.WaitFor(t, "offsets 3 and 4 written again", func() bool { return maps.Equal(perOffset(), want) })
	waitRow(t, cfg, "pg", "s t 0 4 4 4 target 0 yes")
	if got := perOffset(); !maps.Equal(got, want) {
		t.Fatalf("rows per offset after the replay: %v, want %v", got, want)
	}
}

// TestOffsetsS3SinkRefusesRewind: the S3 sink's position is its bucket's highest object,
// shown beside Iggy's offset; PUT offsets on the stopped sink is 409 rewind_refused with
// the sink's reason, and neither Iggy's offset nor the bucket changes. Before, the PUT
// answered 204 and the sink resumed after its highest object regardless.
func TestOffsetsS3SinkRefusesRewind(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	cfg, addr, api := startTargetRun(t, "lake", fmt.Sprintf(`type = "sink"
key = "lake"
enabled = true
version = 0
name = "lake"
path = "builtin:s3"

[[streams]]
stream = "s"
topics = ["t"]
schema = "raw"
poll_interval = "10ms"

[plugin_config]
bucket = %q
region = %q
endpoint = %q
access_key_id = %q
secret_access_key = %q
prefix = "lake"
output_format = "raw"
flush_interval = "50ms"
`, bucket, srv.Region, srv.Endpoint, srv.AccessKey, srv.SecretKey))
	produceLines(t, addr, "a\nb\nc\nd\ne\n")
	waitRow(t, cfg, "lake", "s t 0 4 4 4 target 0 yes")
	if out, err := runControl(t, cfg, "stop", "lake"); err != nil {
		t.Fatal(out, err)
	}
	keys := srv.Keys(t, bucket)

	req, err := http.NewRequest(http.MethodPut, api+"/sinks/lake/offsets",
		strings.NewReader(`{"offsets":[{"stream":"s","topic":"t","partition_id":0,"offset":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var got map[string]string
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("PUT answered %s: %s", res.Status, body)
	}
	reason := "sink lake keeps its positions in its target and cannot set them there; no offset was changed: " +
		"the S3 sink resumes after the highest object of each partition in s3://" + bucket + "/lake, and objects already written are not removed by Ferry; " +
		"to write a partition again, delete its objects above the offset (or give the sink a new prefix or bucket), then restart it"
	if res.StatusCode != http.StatusConflict || !maps.Equal(got, map[string]string{"code": "rewind_refused", "reason": reason}) {
		t.Fatalf("PUT answered %s %v; want 409 rewind_refused %q", res.Status, got, reason)
	}
	if got := sinkOffsetsRow(t, cfg, "lake"); got != "s t 0 4 4 4 target 0 no" {
		t.Fatalf("after the refused PUT: %s", got)
	}
	if _, err := runControl(t, cfg, "offsets", "--sink", "lake", "--set", "0=1"); err == nil ||
		err.Error() != "PUT /sinks/lake/offsets: 409 Conflict: rewind_refused: "+reason {
		t.Fatalf("ferry offsets --sink lake --set 0=1: %v", err)
	}
	if after := srv.Keys(t, bucket); !slices.Equal(after, keys) {
		t.Fatalf("the bucket changed: %v, was %v", after, keys)
	}
}
