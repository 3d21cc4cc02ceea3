package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ferryio/ferry/sdk"
)

// BenchmarkSink: rows/s into one PostgreSQL for each write mode with exactly_once on and
// off, 200-byte JSON payloads as jsonb, 3 partitions, 1000 rows per Consume (one
// transaction each). Run side by side in one run (scripts/bench.sh or
// go test -bench Sink ./connectors/postgres/) so the ratios compare like with like.
func BenchmarkSink(b *testing.B) {
	const batch = 1000
	pad := strings.Repeat("x", 200-len(`{"n":"000000000","pad":""}`))
	for _, mode := range []writeMode{modeCopy, modeInsert} {
		for _, eo := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/exactly_once=%t", mode, eo), func(b *testing.B) {
				db, url := testDB(b)
				tbl := strings.ReplaceAll(fmt.Sprintf("bench_%s_%t", mode, eo), "/", "_")
				for _, q := range []string{"DROP TABLE IF EXISTS " + tbl, "DROP TABLE IF EXISTS " + tbl + "_offs"} {
					if _, err := db.Exec(context.Background(), q); err != nil {
						b.Fatal(err)
					}
				}
				s := New()
				cfg := fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":"%s_offs","auto_create_table":true,"payload_format":"json","write_mode":%q,"exactly_once":%t,"batch_size":1000}`,
					url, tbl, tbl, mode, eo)
				if err := s.Open(context.Background(), sdk.SinkEnv{Key: "bench", Config: []byte(cfg), OnFailure: "stop"}); err != nil {
					b.Fatal(err)
				}
				defer func() { _ = s.Close(context.Background()) }()
				next := [3]uint64{}
				msgs := make([]sdk.ConsumedMessage, batch)
				b.ResetTimer()
				start := time.Now()
				for i := 0; b.Loop(); i++ {
					p := uint32(i % 3)
					for j := range msgs {
						o := next[p] + uint64(j)
						msgs[j] = sdk.ConsumedMessage{ID: sdk.MessageIDFromUint64(uint64(p)<<40 | o), Offset: o, Timestamp: 1_700_000_000_000_000,
							Payload: fmt.Appendf(nil, `{"n":"%09d","pad":"%s"}`, o, pad)}
					}
					next[p] += batch
					if err := s.Consume(context.Background(), topic, sdk.MessagesMetadata{Partition: part(p)}, msgs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkEncodeRows: building a batch's row values (as Consume does) and encoding them
// as one COPY stream, per format, for 1000 messages of the e2e benchmark's shape (200-byte
// JSON, every optional column). No database: the sink's own CPU per row (ns/op is per
// row) and its allocations per batch.
func BenchmarkEncodeRows(b *testing.B) {
	cfg, err := Config.Parse([]byte(`{"connection_string":"x","payload_format":"json"}`))
	if err != nil {
		b.Fatal(err)
	}
	s := &Sink{cfg: cfg}
	s.cols = s.columns()
	oids := []uint32{pgtype.NumericOID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.TextOID, pgtype.TextOID,
		pgtype.Int4OID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.JSONBOID}
	pad := strings.Repeat("x", 200-len(`{"n":"000000000","pad":""}`))
	msgs := make([]sdk.ConsumedMessage, 1000)
	for j := range msgs {
		msgs[j] = sdk.ConsumedMessage{ID: sdk.MessageIDFromUint64(1<<40 | uint64(j)), Offset: uint64(j), Timestamp: 1_700_000_000_000_000 + uint64(j),
			OriginTimestamp: 1_700_000_000_000_000, Checksum: uint64(j) * 7919, Payload: fmt.Appendf(nil, `{"n":"%09d","pad":"%s"}`, j, pad)}
	}
	m := pgtype.NewMap()
	idx := make([]int, len(msgs))
	for i := range idx {
		idx[i] = i
	}
	for _, format := range []copyFormat{copyText, copyBinary} {
		b.Run(string(format), func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				rows := make([][]any, len(msgs))
				width := len(s.cols) + 1
				backing := make([]any, len(msgs)*width)
				vals := make([]rowValues, len(msgs))
				nm := names(topic)
				for i := range msgs {
					rows[i] = s.appendRow(backing[i*width:i*width:(i+1)*width], &vals[i], nm, 1, &msgs[i])
				}
				if format == copyText {
					buf, err = appendCopyTextRows(buf[:0], m, oids, rows, idx)
				} else {
					buf, err = appendCopyRows(buf[:0], m, oids, rows, idx)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/row")
		})
	}
}
