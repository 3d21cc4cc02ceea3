package source

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// BenchmarkCDCSource: changes/s the source decodes and hands over (Read and ack, no Iggy)
// from a bulk insert of b.N rows in one transaction, the WAL decoded by the server included.
func BenchmarkCDCSource(b *testing.B) {
	f := newFixture(b, map[string]string{"a": "id int PRIMARY KEY, v int NOT NULL, note text"})
	s := f.open(f.config(`, "batch_size": 5000`), nil)
	f.exec("INSERT INTO "+f.table("a")+" SELECT g, g, 'row ' || g FROM generate_series(1, $1) g", b.N)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	n := 0
	for n < b.N {
		batch, ack, err := s.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		n += len(batch.Messages)
		_ = ack(ctx, nil)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "changes/s")
}

// BenchmarkChangeMessage: the source's CPU per change without a server: one insert of the
// benchmark's row (id int, v int, note text) decoded from its pgoutput tuple and rendered
// as the message sent to Iggy (payload, headers, id, key).
func BenchmarkChangeMessage(b *testing.B) {
	cfg, err := Config.Parse([]byte(`{"connection_string": "postgres://x", "mode": "cdc", "tables": ["public.t"], "replication_slot": "bench"}`))
	if err != nil {
		b.Fatal(err)
	}
	d := newDecoder(&cfg, map[string][]string{"public.t": {"id"}})
	d.relation(&pglogrepl.RelationMessage{RelationID: 1, Namespace: "public", RelationName: "t", ReplicaIdentity: 'd',
		Columns: []*pglogrepl.RelationMessageColumn{
			{Flags: 1, Name: "id", DataType: pgtype.Int4OID},
			{Name: "v", DataType: pgtype.Int4OID},
			{Name: "note", DataType: pgtype.TextOID}}})
	d.begin(&pglogrepl.BeginMessage{FinalLSN: 0x1234567, Xid: 77, CommitTime: time.Now()})
	tuple := &pglogrepl.TupleData{Columns: []*pglogrepl.TupleDataColumn{
		{DataType: pglogrepl.TupleDataTypeText, Data: []byte("123456")},
		{DataType: pglogrepl.TupleDataTypeText, Data: []byte("123456")},
		{DataType: pglogrepl.TupleDataTypeText, Data: []byte("row 123456")}}}
	b.ReportAllocs()
	for b.Loop() {
		c, err := d.row(1, opInsert, tuple, 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.message(); err != nil {
			b.Fatal(err)
		}
	}
}
