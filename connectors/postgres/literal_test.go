package postgres

import (
	"context"
	"fmt"
	"testing"

	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// TestWriteAheadNamesAsLiterals: a batch that goes ahead carries the offsets row's
// names as literals in its one query (a COPY's query takes no parameters). Stream and
// topic names with quotes, backslashes, a semicolon, comment dashes and a placeholder
// are data, never SQL: the row is found and moved under exactly those names. On a
// server whose strings treat a backslash as an escape (standard_conforming_strings off)
// the batch goes ahead in two round trips instead, with the names as parameters.
func TestWriteAheadNamesAsLiterals(t *testing.T) {
	for _, conforming := range []bool{true, false} {
		t.Run(map[bool]string{true: "conforming", false: "escaping"}[conforming], func(t *testing.T) {
			db, url := testDB(t)
			tbl, off, victim := fresh(t, db, "rows"), fresh(t, db, "offs"), fresh(t, db, "victim")
			exec(t, db, "CREATE TABLE "+victim+" (x int)")
			hostile := sdk.TopicMetadata{Stream: `s'; DROP TABLE ` + victim + `; --`, Topic: `t\' \\ "q" ü $1 ''`, StreamID: 1, TopicID: 2}
			if !conforming {
				url += "&standard_conforming_strings=off"
			}
			c := sdktest.NewCommitter()
			s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true}`, url, tbl, off), "stop", c)
			for b := range uint64(3) {
				m := msgs(b*10, 10, jsonPayload)
				for i := range m {
					m[i].ID = sdk.MessageIDFromUint64(1000 + m[i].Offset)
				}
				c.Deliver(part(0), m)
				if err := s.Consume(context.Background(), hostile, sdk.MessagesMetadata{Partition: part(0), CurrentOffset: 1000}, m); err != nil {
					t.Fatalf("batch %d: %v", b, err)
				}
			}
			wantOne := map[bool]uint64{true: 2, false: 0}[conforming]
			if a, one := s.ahead.Load(), s.inOne.Load(); a != 2 || one != wantOne {
				t.Fatalf("batches ahead = %d, in one query = %d; want 2 and %d", a, one, wantOne)
			}
			if n := count(t, db, "SELECT count(*) FROM "+off+" WHERE stream = $1 AND topic = $2 AND last_offset = 29", hostile.Stream, hostile.Topic); n != 1 {
				t.Fatalf("offsets rows for the names at 29 = %d, want 1", n)
			}
			if n := count(t, db, "SELECT count(*) FROM "+off); n != 1 {
				t.Fatalf("offsets rows = %d, want 1", n)
			}
			if n := count(t, db, "SELECT count(DISTINCT iggy_offset) FROM "+tbl+" WHERE iggy_stream = $1 AND iggy_topic = $2", hostile.Stream, hostile.Topic); n != 30 {
				t.Fatalf("distinct offsets under the names = %d, want 30", n)
			}
			if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 30 {
				t.Fatalf("rows = %d, want 30", n)
			}
			if n := count(t, db, "SELECT count(*) FROM "+victim); n != 0 { // still there to count
				t.Fatalf("victim rows = %d", n)
			}
			if last, _ := c.Committed(part(0)); last != 29 {
				t.Fatalf("last commit %d, want 29", last)
			}
		})
	}
}

func TestStringLiteral(t *testing.T) {
	for in, want := range map[string]string{``: `''`, `a`: `'a'`, `it's`: `'it''s'`, `\'`: `'\'''`, `''`: `''''''`, `a\\b`: `'a\\b'`} {
		if got, ok := stringLiteral(in); !ok || got != want {
			t.Errorf("stringLiteral(%q) = %q, %v; want %q, true", in, got, ok, want)
		}
	}
	if got, ok := stringLiteral("a\x00b"); ok {
		t.Errorf("stringLiteral of a NUL = %q, true; want false", got)
	}
	if got := intLiteral(-1); got != "(-1)" {
		t.Errorf("intLiteral(-1) = %q, want (-1)", got)
	}
}
