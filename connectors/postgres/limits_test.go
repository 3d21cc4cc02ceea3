package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// deepJSON is an array nested n deep. PostgreSQL 15 with the default max_stack_depth (2MB)
// refuses it in jsonb with 54001 from about 15,000 levels; 100,000 (200 KB) stays past
// the limit up to the largest max_stack_depth an 8 MB stack allows.
func deepJSON(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// wideText is n bytes of random hex: no compression shrinks it, so from about 2,900 bytes
// its btree index row is over the 2,704 bytes a row may hold (54000).
func wideText(n int) string {
	b := make([]byte, (n+1)/2)
	r := rand.New(rand.NewPCG(36, 6))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return hex.EncodeToString(b)[:n]
}

// TestProgramLimitRowAlone: a row PostgreSQL refuses with SQLSTATE class 54 (program limit
// exceeded) is refused alone, as a class 22 or 23 row is: every write path returns it as
// RejectedMessages and writes the batch's other rows with the batch's last offset in the
// offsets row. Before, class 54 failed the whole batch, which on_failure = skip then
// dropped whole (10 rows of 10 for one bad row). Each partition gets two batches: 0..9
// (the locked write) and 10..19 (a batch that continues the last one: write-ahead), with
// offsets 4 and 14 refused.
func TestProgramLimitRowAlone(t *testing.T) {
	limits := []struct {
		name, code string
		format     payloadFormat
		index      bool   // an index on payload
		sameRow    string // the row holds its message's payload
		bad, good  func(o uint64) string
	}{
		{name: "stack_depth", code: "54001", format: formatJSON,
			sameRow: "(payload->>'n')::bigint = iggy_offset",
			bad:     func(uint64) string { return deepJSON(100_000) }, good: jsonPayload},
		{name: "index_row", code: "54000", format: formatText, index: true, sameRow: "payload = 'row ' || iggy_offset",
			bad: func(uint64) string { return wideText(4000) }, good: func(o uint64) string { return fmt.Sprintf("row %d", o) }},
	}
	paths := []struct {
		name, cfg string
		parts     int  // partitions written at once (max_in_flight > 1)
		group     bool // flush_interval: both batches in one open transaction, committed at Close
	}{
		{name: "copy_binary", cfg: `"write_mode":"copy","copy_format":"binary"`, parts: 1},
		{name: "copy_text", cfg: `"write_mode":"copy","copy_format":"text"`, parts: 1},
		{name: "insert", cfg: `"write_mode":"insert"`, parts: 1},
		{name: "upsert", cfg: `"write_mode":"upsert"`, parts: 1},
		{name: "group", cfg: `"flush_interval":"1h","max_rows_per_transaction":10000`, parts: 1, group: true},
		{name: "in_flight", cfg: `"max_connections":3`, parts: 3},
	}
	for _, l := range limits {
		for _, p := range paths {
			t.Run(l.name+"/"+p.name, func(t *testing.T) {
				db, url := testDB(t)
				tbl, off := fresh(t, db, "rows"), fresh(t, db, "offs")
				c := sdktest.NewCommitter()
				s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":%q,%s}`,
					url, tbl, off, l.format, p.cfg), "skip", c)
				if l.index {
					exec(t, db, "CREATE INDEX ON "+tbl+" (payload)")
				}
				payload := func(o uint64) string {
					if o%10 == 4 {
						return l.bad(o)
					}
					return l.good(o)
				}
				var wg sync.WaitGroup
				errs := make([]error, 2*p.parts)
				for part := range p.parts {
					wg.Go(func() {
						errs[2*part] = consume(t, s, uint32(part), msgs(0, 10, payload))
						errs[2*part+1] = consume(t, s, uint32(part), msgs(10, 10, payload))
					})
				}
				wg.Wait()
				for i, err := range errs {
					want := fmt.Sprint([]uint64{uint64(i%2*10 + 4)})
					var rej *sdk.RejectedMessages
					if !errors.As(err, &rej) || fmt.Sprint(rej.Offsets) != want || !strings.Contains(rej.Error(), "SQLSTATE "+l.code) {
						t.Fatalf("partition %d batch %d: Consume = %v; want RejectedMessages %s with SQLSTATE %s", i/2, i%2, err, want, l.code)
					}
				}
				if p.group {
					if err := s.Close(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				for part := range p.parts {
					var got string
					q := "SELECT coalesce(string_agg(iggy_offset::text, ',' ORDER BY iggy_offset), '') FROM " + tbl +
						" WHERE iggy_partition_id = $1 AND id = iggy_partition_id * 4294967296 + 1000 + iggy_offset AND " + l.sameRow
					if err := db.QueryRow(context.Background(), q, part).Scan(&got); err != nil {
						t.Fatal(err)
					}
					if want := "0,1,2,3,5,6,7,8,9,10,11,12,13,15,16,17,18,19"; got != want {
						t.Fatalf("partition %d: offsets in the table (with their id and payload) %q, want %q", part, got, want)
					}
					if n := count(t, db, "SELECT last_offset FROM "+off+" WHERE partition_id = $1", part); n != 19 {
						t.Fatalf("partition %d: offsets row %d, want 19", part, n)
					}
					if o, ok := c.Committed(sdk.Partition{StreamID: 1, TopicID: 2, PartitionID: uint32(part)}); !ok || o != 19 {
						t.Fatalf("partition %d: commit %d (%t), want 19", part, o, ok)
					}
				}
				if n := count(t, db, "SELECT count(*) FROM "+tbl); n != int64(18*p.parts) {
					t.Fatalf("rows = %d, want %d", n, 18*p.parts)
				}
			})
		}
	}
}
