package connect

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/internal/pgtest"
	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/internal/testkit"
	"github.com/ferryio/ferry/server/servertest"
)

// TestPurgedTopicPostgres: an exactly-once PostgreSQL sink holds its position in its
// offsets table, so a purge is "a purged topic is skipped" twice over: the sink resumed
// at the table's 99 + 1 and dropped the new offsets 0..99 as written already. Now the
// offsets row keeps the timestamp of the message at last_offset; a purge noticed while
// running resets the row (sdk.RewindSeeker.Rewound), and one made while the runtime was
// stopped is found by the checked seek (the message at 99 is another one: rewound, reset).
// Either way the table holds the 100 rows before and the 110 after, exactly once, and the
// offsets row is 109 with the timestamp of the new message 109.
func TestPurgedTopicPostgres(t *testing.T) {
	db, url := pgtest.Connect(t)
	for _, during := range []string{"running", "stopped", "stopped-fewer"} {
		t.Run(during, func(t *testing.T) {
			table := "purge_" + strings.ReplaceAll(during, "-", "_")
			offsets := table + "_offsets"
			for _, tb := range []string{table, offsets} {
				if _, err := db.Exec(context.Background(), "DROP TABLE IF EXISTS "+tb); err != nil {
					t.Fatal(err)
				}
			}
			after := 110
			if during == "stopped-fewer" {
				after = 50 // the new partition ends below the table's position
			}
			env := newIggyEnv(t)
			env.Topic("s", "t", 1)
			env.Fill("s", "t", 0, 100, func(i int) []byte { return fmt.Appendf(nil, `{"old":%d}`, i) })
			dir := t.TempDir()
			doc := fmt.Sprintf(`type = "sink"
key = "pg"
enabled = true
version = 0
name = "PostgreSQL sink"
path = "builtin:postgres"
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = 30
poll_interval = "5ms"
consumer_group = "g"

[plugin_config]
connection_string = %q
target_table = %q
offsets_table = %q
payload_format = "json"
auto_create_table = true
`, url, table, offsets)
			file := filepath.Join(dir, "pg.toml")
			rt, logs := startSinkFileLogged(t, env, file, doc)
			defer func() { stopRuntime(t, rt) }()
			waitRow(t, db, offsets, 99)
			switch during {
			case "running":
			default:
				stopRuntime(t, rt)
			}
			if err := env.Admin.PurgeTopic(bg(t), iggy.Name("s"), iggy.Name("t")); err != nil {
				t.Fatal(err)
			}
			env.Fill("s", "t", 0, after, func(i int) []byte { return fmt.Appendf(nil, `{"new":%d}`, i) })
			if during != "running" {
				rt, logs = startSinkFileLogged(t, env, file, doc)
			}
			waitRow(t, db, offsets, int64(after-1))
			testkit.WaitFor(t, "the group's offset stored", func() bool {
				o, ok := env.Stored("g", "s", "t", 0)
				return ok && o == uint64(after-1)
			})
			var want []string
			for i := range 100 {
				want = append(want, fmt.Sprintf(`%d {"old": %d}`, i, i))
			}
			for i := range after {
				want = append(want, fmt.Sprintf(`%d {"new": %d}`, i, i))
			}
			if got := tableRows(t, db, table); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("table holds %d rows (from row 100: %q); want the 100 before and the %d after", len(got), got[min(100, len(got)-1):min(105, len(got))], after)
			}
			b, err := env.Dial().NewConsumer(bg(t), iggy.ConsumerConfig{Stream: iggy.Name("s"), Topic: iggy.Name("t"), Group: "probe", BatchSize: 200})
			if err != nil {
				t.Fatal(err)
			}
			batch, err := b.Poll(bg(t))
			if err != nil {
				t.Fatal(err)
			}
			wantTS := batch.Messages[len(batch.Messages)-1].Timestamp
			batch.Release()
			_ = b.Close(bg(t))
			var last, ts int64
			if err := db.QueryRow(context.Background(), `SELECT last_offset, last_timestamp FROM `+offsets).Scan(&last, &ts); err != nil {
				t.Fatal(err)
			}
			if last != int64(after-1) || uint64(ts) != wantTS {
				t.Fatalf("offsets row %d at %d; want %d at %d (the new message's timestamp)", last, ts, after-1, wantTS)
			}
			if st := rt.Status()[0].Stats; st.PartitionRewinds != 1 {
				t.Fatalf("partition rewinds %d; want 1", st.PartitionRewinds)
			}
			if !strings.Contains(logs.String(), `msg="partitions went back to offset 0 (purged); their offsets rows start again, the rows of the purged messages stay in the table"`) {
				t.Fatalf("no WARN of the sink's reset; logs:\n%s", logs.String())
			}
		})
	}
}

// waitRow waits until the offsets table's one row says last.
func waitRow(t *testing.T, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, offsets string, last int64) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%s at %d", offsets, last), func() bool {
		var got int64
		err := db.QueryRow(context.Background(), `SELECT last_offset FROM `+offsets).Scan(&got)
		return err == nil && got == last
	})
}

// tableRows lists a target table's rows, "offset payload", in the order written.
func tableRows(t *testing.T, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, table string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT iggy_offset, payload::text FROM `+table+` ORDER BY created_at, iggy_offset`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var off int64
	var p string
	if _, err := pgx.ForEachRow(rows, []any{&off, &p}, func() error {
		out = append(out, fmt.Sprintf("%d %s", off, p))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPurgedTopicS3: the S3 sink names its objects by offset range, so after a purge the
// new messages 0..49 were "already in the bucket" (the purged messages' object of that
// range answered the conditional PUT with 412) and skipped, and the sink resumed past
// them. Now a rewind starts a new generation of objects, whether noticed while running or,
// for a purge made while the runtime was stopped, by the checked seek (each object's
// metadata records its last message's timestamp): the bucket holds the purged messages' two objects under their keys and the new messages'
// three under keys of generation 1, each message exactly once.
func TestPurgedTopicS3(t *testing.T) {
	for _, during := range []string{"running", "stopped"} {
		t.Run(during, func(t *testing.T) { purgedTopicS3(t, during) })
	}
}

func purgedTopicS3(t *testing.T, during string) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	g := &pollGate{}
	env := newIggyEnv(t, servertest.WithReplyDelay(g.hold))
	env.Topic("s", "t", 1)
	env.Fill("s", "t", 0, 100, func(i int) []byte { return fmt.Appendf(nil, `{"old":%d}`, i) })
	doc := fmt.Sprintf(`type = "sink"
key = "s3"
enabled = true
version = 0
name = "S3 sink"
path = "builtin:s3"
offset_commit = "sink_controlled"

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = 50
poll_interval = "5ms"
consumer_group = "g"

[plugin_config]
bucket = %q
region = %q
endpoint = %q
access_key_id = %q
secret_access_key = %q
prefix = "pre"
path_template = "{stream}/{topic}"
max_messages_per_file = 50
flush_interval = "50ms"
`, bucket, srv.Region, srv.Endpoint, srv.AccessKey, srv.SecretKey)
	file0 := filepath.Join(t.TempDir(), "s3.toml")
	rt, logs := startSinkFileLogged(t, env, file0, doc)
	defer func() { stopRuntime(t, rt) }()
	testkit.WaitFor(t, "the group's offset at 99", func() bool {
		o, ok := env.Stored("g", "s", "t", 0)
		return ok && o == 99
	})
	file := file0
	if during == "running" {
		g.close(t)
	} else {
		stopRuntime(t, rt)
	}
	if err := env.Admin.PurgeTopic(bg(t), iggy.Name("s"), iggy.Name("t")); err != nil {
		t.Fatal(err)
	}
	env.Fill("s", "t", 0, 150, func(i int) []byte { return fmt.Appendf(nil, `{"new":%d}`, i) })
	if during == "running" {
		g.open()
	} else {
		// Purged while the sink was away: its seek's timestamp (the highest object's
		// last message) no longer matches the message at 99, so the partition is rewound.
		rt, logs = startSinkFileLogged(t, env, file, doc)
	}
	testkit.WaitFor(t, "the group's offset at 149", func() bool {
		o, ok := env.Stored("g", "s", "t", 0)
		return ok && o == 149
	})
	want := []string{
		"pre/s/t/00000-00000000000000000000-00000000000000000049.jsonl",
		"pre/s/t/00000-00000000000000000000-00000000000000000049.r1.jsonl",
		"pre/s/t/00000-00000000000000000050-00000000000000000099.jsonl",
		"pre/s/t/00000-00000000000000000050-00000000000000000099.r1.jsonl",
		"pre/s/t/00000-00000000000000000100-00000000000000000149.r1.jsonl",
	}
	keys := srv.Keys(t, bucket)
	if strings.Join(keys, "\n") != strings.Join(want, "\n") {
		t.Fatalf("bucket holds\n%s\nwant\n%s\nlogs:\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"), logs.String())
	}
	for _, k := range want {
		body := string(srv.Get(t, bucket, k))
		what, first := "old", 0
		if strings.Contains(k, ".r1.") {
			what = "new"
		}
		fmt.Sscanf(k[len("pre/s/t/00000-"):], "%020d", &first)
		for i := first; i < first+50; i++ {
			if !strings.Contains(body, fmt.Sprintf(`{"%s":%d}`, what, i)) {
				t.Fatalf("%s lacks message %s %d:\n%s", k, what, i, body)
			}
		}
		if n := strings.Count(body, "\n"); n != 50 {
			t.Fatalf("%s holds %d lines; want 50", k, n)
		}
	}
	if st := rt.Status()[0].Stats; st.PartitionRewinds != 1 {
		t.Fatalf("partition rewinds %d; want 1", st.PartitionRewinds)
	}
}
