package s3

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/sdk"
)

// BenchmarkSink: rows/s into the S3 server of scripts/s3.sh, 200-byte JSON messages, 3
// partitions, 1000 a Consume, 8MiB objects, for Parquet (zstd) and JSON Lines; and, side
// by side in the same run, the server's own PUT loop of the same bytes in 8MiB objects
// (put-only: what the sink's uploads cost, without formatting), reported as rows/s of
// 200-byte rows. Run with go test -run '^$' -bench Sink -benchtime 300x ./connectors/s3/.
func BenchmarkSink(b *testing.B) {
	const batch = 1000
	pad := strings.Repeat("x", 200-len(`{"n":"000000000","pad":""}`))
	srv := s3test.Connect(b)
	for _, format := range []string{FormatParquet, FormatJSONLines, "put-only"} {
		b.Run(format, func(b *testing.B) {
			bucket := srv.Bucket(b)
			if format == "put-only" {
				benchPut(b, srv, bucket, 200*batch)
				return
			}
			s := New()
			cfg := config(srv, bucket, fmt.Sprintf(`,"output_format":%q`, format))
			if err := s.Open(context.Background(), sdk.SinkEnv{Key: "bench", Config: []byte(cfg), Committer: &commits{}}); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Assigned(context.Background(), topic, []sdk.Partition{part(0), part(1), part(2)}); err != nil {
				b.Fatal(err)
			}
			next := [3]uint64{}
			msgs := make([]sdk.ConsumedMessage, batch)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				p := uint32(i % 3)
				for j := range msgs {
					o := next[p] + uint64(j)
					msgs[j] = sdk.ConsumedMessage{Offset: o, ID: sdk.MessageIDFromUint64(o), Timestamp: ts0 + o,
						Payload: fmt.Appendf(msgs[j].Payload[:0], `{"n":"%09d","pad":"%s"}`, o, pad)}
				}
				next[p] += batch
				if err := s.Consume(context.Background(), topic, sdk.MessagesMetadata{Partition: part(p), Schema: sdk.SchemaJSON}, msgs); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "rows/s")
		})
	}
}

// benchPut PUTs b.N × perOp bytes as 8MiB objects, conditional as the sink's.
func benchPut(b *testing.B, srv *s3test.Server, bucket string, perOp int) {
	s := New()
	if err := s.Open(context.Background(), sdk.SinkEnv{Key: "bench", Config: []byte(config(srv, bucket, "")), Committer: &commits{}}); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	body := make([]byte, 8<<20)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	b.ResetTimer()
	start := time.Now()
	total := b.N * perOp
	for n := 0; total > 0; n++ {
		size := min(total, len(body))
		if err := s.st.put(context.Background(), fmt.Sprintf("put/%08d", n), body[:size], "application/octet-stream"); err != nil {
			b.Fatal(err)
		}
		total -= size
	}
	b.ReportMetric(float64(b.N*perOp/200)/time.Since(start).Seconds(), "rows/s")
}
