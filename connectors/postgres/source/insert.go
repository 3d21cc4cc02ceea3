package source

import (
	"encoding/binary"

	"github.com/jackc/pglogrepl"
)

// insertParser reads pgoutput's Insert message (protocol 1: 'I', the relation's id, 'N',
// the new tuple) into one tuple it reuses, whose columns' data point into the message: the
// decoder copies what it keeps before the next message arrives. Used by the stream's
// goroutine only.
type insertParser struct {
	tuple pglogrepl.TupleData
	cols  []pglogrepl.TupleDataColumn
}

// parse returns the relation and the new tuple of an Insert message; ok is false for any
// other message, or one that does not parse (the generic parser then reports it).
func (p *insertParser) parse(data []byte) (relID uint32, t *pglogrepl.TupleData, ok bool) {
	if len(data) < 8 || data[0] != 'I' || data[5] != 'N' {
		return 0, nil, false
	}
	relID = binary.BigEndian.Uint32(data[1:5])
	n := int(binary.BigEndian.Uint16(data[6:8]))
	rest := data[8:]
	if cap(p.cols) < n {
		p.cols = make([]pglogrepl.TupleDataColumn, n)
		p.tuple.Columns = make([]*pglogrepl.TupleDataColumn, n)
	}
	p.cols, p.tuple.Columns = p.cols[:n], p.tuple.Columns[:n]
	for i := range n {
		if len(rest) < 1 {
			return 0, nil, false
		}
		c := &p.cols[i]
		*c = pglogrepl.TupleDataColumn{DataType: rest[0]}
		rest = rest[1:]
		switch c.DataType {
		case pglogrepl.TupleDataTypeNull, pglogrepl.TupleDataTypeToast:
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			if len(rest) < 4 {
				return 0, nil, false
			}
			c.Length = binary.BigEndian.Uint32(rest)
			rest = rest[4:]
			if uint64(len(rest)) < uint64(c.Length) {
				return 0, nil, false
			}
			c.Data, rest = rest[:c.Length:c.Length], rest[c.Length:]
		default:
			return 0, nil, false
		}
		p.tuple.Columns[i] = c
	}
	if len(rest) != 0 {
		return 0, nil, false
	}
	p.tuple.ColumnNum = uint16(n)
	return relID, &p.tuple, true
}
