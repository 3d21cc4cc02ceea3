package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/iggy"
	"github.com/ferryio/ferry/iggy/wire"
	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/internal/testkit"
)

// TestS3TopicsTheTemplateCannotTellApart: one S3 sink over two (stream, topic) pairs whose
// keys the path_template alone renders alike: stream shop's topics orders and refunds
// under "{stream}/{date}", and two streams whose names sanitize to the same "__". Both cut
// objects at the same offsets (100 messages each), so the template gives both the same
// keys: before, the second upload of each range was refused by the conditional PUT and
// "counted as written", and half the messages (1,000 of 2,000) never reached the bucket
// while every offset was committed. Every line must be in the bucket once, read back with
// the AWS SDK.
func TestS3TopicsTheTemplateCannotTellApart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pairs [][2]string // stream, topic
	}{
		{"two topics of one stream", [][2]string{{"shop", "orders"}, {"shop", "refunds"}}},
		{"two non-ASCII streams", [][2]string{{"é", "t"}, {"ü", "t"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := s3test.Connect(t)
			bucket := srv.Bucket(t)
			dir := t.TempDir()
			_, addr := startServer(t, "server", dir, filepath.Join(dir, "data"))
			c := dial(t, addr)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			streams := map[string][]string{}
			var order []string
			for _, p := range tc.pairs {
				if streams[p[0]] == nil {
					order = append(order, p[0])
					if _, err := c.CreateStream(ctx, p[0]); err != nil {
						t.Fatal(err)
					}
				}
				streams[p[0]] = append(streams[p[0]], p[1])
				if _, err := c.CreateTopic(ctx, iggy.Name(p[0]), p[1], 1); err != nil {
					t.Fatal(err)
				}
				for from := 0; from < 1000; from += 100 {
					msgs := make([]iggy.Message, 100)
					for i := range msgs {
						msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, `{"o":%d}`, from+i)}
					}
					if _, err := c.SendMessages(ctx, iggy.Name(p[0]), iggy.Name(p[1]), wire.ToPartition(0), msgs); err != nil {
						t.Fatal(err)
					}
				}
			}
			var sections strings.Builder
			for _, s := range order {
				topics, _ := json.Marshal(streams[s])
				fmt.Fprintf(&sections, "[[streams]]\nstream = %q\ntopics = %s\nschema = \"json\"\nbatch_length = 100\npoll_interval = \"5ms\"\n\n", s, topics)
			}
			sink := fmt.Sprintf(`type = "sink"
key = "s3"
enabled = true
version = 0
name = "s3"
path = "builtin:s3"
offset_commit = "sink_controlled"

%s[plugin_config]
bucket = %q
region = %q
endpoint = %q
access_key_id = %q
secret_access_key = %q
path_template = "{stream}/{date}"
output_format = "json_lines"
file_rotation = "messages"
max_messages_per_file = 100
flush_interval = "200ms"
`, sections.String(), bucket, srv.Region, srv.Endpoint, srv.AccessKey, srv.SecretKey)
			conns := filepath.Join(dir, "s3")
			writeFile(t, filepath.Join(conns, "sink.toml"), sink)
			run := startFerry(t, "run", dir, nil, "run", "--config", remoteConfig(t, dir, addr, conns), "--progress", "0")
			testkit.WaitFor(t, "every topic's offset 999 stored", func() bool {
				for _, p := range tc.pairs {
					offs, err := offsets(t, addr, p[0], p[1], "iggy-connect-sink-s3")
					if err != nil || offs[0].stored != 999 {
						return false
					}
				}
				return true
			})
			run.stop(15 * time.Second)
			if out := run.out.String(); strings.Contains(out, "counted as written") {
				t.Errorf("the run counted an existing object as written:\n%s", tail(out, 20))
			}
			seen := map[string]int{}
			lines := 0
			for _, k := range srv.Keys(t, bucket) {
				for _, l := range strings.Split(strings.TrimSpace(string(srv.Get(t, bucket, k))), "\n") {
					var r struct {
						Offset  uint64 `json:"offset"`
						Stream  string `json:"stream"`
						Topic   string `json:"topic"`
						Payload struct {
							O uint64 `json:"o"`
						} `json:"payload"`
					}
					if err := json.Unmarshal([]byte(l), &r); err != nil || r.Payload.O != r.Offset {
						t.Fatalf("%s: line %s (%v)", k, l, err)
					}
					seen[fmt.Sprintf("%s/%s/%d", r.Stream, r.Topic, r.Offset)]++
					lines++
				}
			}
			if lines != 2000 || len(seen) != 2000 {
				t.Fatalf("%d lines, %d distinct (stream, topic, offset) in the bucket; want 2000 of each\nkeys: %v", lines, len(seen), srv.Keys(t, bucket))
			}
		})
	}
}
