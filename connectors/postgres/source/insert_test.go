package source

import (
	"bytes"
	"testing"

	"github.com/jackc/pglogrepl"
)

// TestInsertParserAsPglogrepl: the insert fast path reads what pglogrepl.Parse reads (the
// relation, every column's kind, length and data, text, NULL, unchanged TOAST, empty, binary),
// twice in a row on the reused tuple; anything else, cut short or with bytes left over is
// left to the generic parser.
func TestInsertParserAsPglogrepl(t *testing.T) {
	msg := []byte{'I', 0, 0, 0x40, 0x01, 'N', 0, 5,
		't', 0, 0, 0, 3, '1', '2', '3',
		'n',
		'u',
		't', 0, 0, 0, 0,
		'b', 0, 0, 0, 2, 0xff, 0x00}
	var p insertParser
	for range 2 {
		relID, got, ok := p.parse(msg)
		if !ok {
			t.Fatal("insert not parsed")
		}
		m, err := pglogrepl.Parse(msg)
		if err != nil {
			t.Fatal(err)
		}
		want := m.(*pglogrepl.InsertMessage)
		if relID != want.RelationID || got.ColumnNum != want.Tuple.ColumnNum || len(got.Columns) != len(want.Tuple.Columns) {
			t.Fatalf("relation %d, %d columns (%d); want %d, %d", relID, got.ColumnNum, len(got.Columns), want.RelationID, want.Tuple.ColumnNum)
		}
		for i, c := range got.Columns {
			w := want.Tuple.Columns[i]
			if c.DataType != w.DataType || c.Length != w.Length || !bytes.Equal(c.Data, w.Data) {
				t.Fatalf("column %d = %+v, want %+v", i, *c, *w)
			}
		}
	}
	for _, bad := range [][]byte{
		msg[:len(msg)-1],                        // cut short
		append(append([]byte{}, msg...), 0),     // a byte left over
		{'U', 0, 0, 0x40, 0x01, 'N', 0, 0},      // an update
		{'I', 0, 0, 0x40, 0x01, 'N', 0, 1, 'x'}, // an unknown column kind
	} {
		if _, _, ok := p.parse(bad); ok {
			t.Fatalf("%q parsed as an insert", bad)
		}
	}
}
