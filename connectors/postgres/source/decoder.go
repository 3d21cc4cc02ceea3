package source

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// relation is what a pgoutput Relation message said about a table, plus how its changes
// are keyed.
type relation struct {
	schema, table string
	names         []string // output column names (snake_case_columns applied)
	quoted        [][]byte // the names as JSON strings
	oids          []uint32
	identity      []bool // columns of the replica identity (sent in an old key)
	keyCols       []int  // columns whose values form the partition key
	captured      bool
	// Rendered once for every message of the relation (shared, never written).
	tableJSON   []byte // the table's name as a JSON string
	tableHeader []byte // "schema.table"
	slot        []byte // the replication slot's name
}

// decoder turns pgoutput messages into changes. It is used by the stream goroutine only.
type decoder struct {
	cfg   *config
	types *pgtype.Map
	pks   map[string][]string // "schema.table" -> primary key columns, read at Open
	rels  map[uint32]*relation

	slotID uint32 // slotHash of the slot

	inTxn  bool
	lsn    uint64 // the current transaction's commit LSN
	xid    uint32
	at     time.Time
	atText []byte // at as RFC 3339 in UTC, shared by the transaction's changes
	next   uint64 // index of the next change in the transaction
}

func newDecoder(cfg *config, pks map[string][]string) *decoder {
	return &decoder{cfg: cfg, types: pgtype.NewMap(), pks: pks, rels: map[uint32]*relation{}, slotID: slotHash(cfg.ReplicationSlot)}
}

// reset forgets the relations and the open transaction (a new replication connection
// sends them again).
func (d *decoder) reset() {
	d.rels = map[uint32]*relation{}
	d.inTxn = false
}

func (d *decoder) captured(schema, table string) bool {
	for _, t := range d.cfg.Tables {
		s, n := tableRef(t)
		if s == schema && n == table {
			return true
		}
	}
	return false
}

func (d *decoder) relation(m *pglogrepl.RelationMessage) {
	r := &relation{schema: m.Namespace, table: m.RelationName, captured: d.captured(m.Namespace, m.RelationName),
		tableJSON: appendJSONString(nil, m.RelationName), tableHeader: []byte(m.Namespace + "." + m.RelationName),
		slot: []byte(d.cfg.ReplicationSlot)}
	var flagged []int
	pk := d.pks[m.Namespace+"."+m.RelationName]
	byName := map[string]int{}
	for i, c := range m.Columns {
		name := c.Name
		if d.cfg.SnakeCaseColumns {
			name = snakeCase(name)
		}
		r.names = append(r.names, name)
		q, _ := json.Marshal(name)
		r.quoted = append(r.quoted, q)
		r.oids = append(r.oids, c.DataType)
		byName[c.Name] = i
		r.identity = append(r.identity, c.Flags&1 != 0)
		if c.Flags&1 != 0 {
			flagged = append(flagged, i)
		}
	}
	// A primary key names the row across REPLICA IDENTITY FULL (which flags every column);
	// then the replica identity index; then primary_key_column.
	switch {
	case len(pk) > 0:
		for _, n := range pk {
			if i, ok := byName[n]; ok {
				r.keyCols = append(r.keyCols, i)
			}
		}
	case len(flagged) > 0 && m.ReplicaIdentity != 'f':
		r.keyCols = flagged
	case d.cfg.PrimaryKeyColumn != "":
		if i, ok := byName[d.cfg.PrimaryKeyColumn]; ok {
			r.keyCols = []int{i}
		}
	}
	d.rels[m.RelationID] = r
}

func (d *decoder) begin(m *pglogrepl.BeginMessage) {
	d.inTxn, d.lsn, d.xid, d.at, d.next = true, uint64(m.FinalLSN), m.Xid, m.CommitTime, 0
	d.atText = m.CommitTime.UTC().AppendFormat(nil, time.RFC3339Nano)
}

// row decodes one change. It returns nil (no error) for a change that is not captured
// (its table or operation), which still takes its index in the transaction.
//
// oldKind is pgoutput's old-tuple kind: 'K' (the replica identity's columns only), 'O' (the
// whole old row) or 0 (none sent).
func (d *decoder) row(relID uint32, op string, newT *pglogrepl.TupleData, oldKind uint8, oldT *pglogrepl.TupleData) (*change, error) {
	if !d.inTxn {
		return nil, fmt.Errorf("%s outside a transaction", op)
	}
	pos := position{LSN: d.lsn, Index: d.next}
	d.next++
	r, ok := d.rels[relID]
	if !ok {
		return nil, fmt.Errorf("%s at %s: relation %d was never described", op, pos, relID)
	}
	if !r.captured || !d.cfg.capture[op] {
		return nil, nil
	}
	c := &change{pos: pos, xid: d.xid, commitTime: d.at, schema: r.schema, table: r.table, op: op, slot: d.cfg.ReplicationSlot,
		rel: r, atText: d.atText, hashed: true, slotID: d.slotID}
	var err error
	ident := newT
	switch op {
	case opDelete:
		// As upstream: a delete's data is the old key (or the whole old row under
		// REPLICA IDENTITY FULL); old_data is null.
		ident = oldT
		if c.data, _, err = d.tuple(r, oldT, oldKind == 'K'); err != nil {
			return nil, fmt.Errorf("%s.%s %s at %s: %w", r.schema, r.table, op, pos, err)
		}
	default:
		if c.data, c.unchanged, err = d.tuple(r, newT, false); err != nil {
			return nil, fmt.Errorf("%s.%s %s at %s: %w", r.schema, r.table, op, pos, err)
		}
		if oldT != nil {
			if c.oldData, _, err = d.tuple(r, oldT, oldKind == 'K'); err != nil {
				return nil, fmt.Errorf("%s.%s %s at %s: old row: %w", r.schema, r.table, op, pos, err)
			}
		}
	}
	c.key = d.key(r, ident)
	return c, nil
}

// truncate returns one change per captured table of a TRUNCATE (data {}).
func (d *decoder) truncate(m *pglogrepl.TruncateMessage) ([]*change, error) {
	var out []*change
	for _, id := range m.RelationIDs {
		c, err := d.row(id, opTruncate, nil, 0, nil)
		if err != nil || c == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		c.data = []byte("{}")
		out = append(out, c)
	}
	return out, nil
}

// tuple renders the columns of t as a JSON object in column order. Columns whose
// unchanged TOASTed value was not sent are left out and named in unchanged; keyOnly keeps
// only the replica identity's columns (an old key: the others are sent as NULL).
func (d *decoder) tuple(r *relation, t *pglogrepl.TupleData, keyOnly bool) (obj []byte, unchanged []string, err error) {
	if t == nil {
		return []byte("{}"), nil, nil
	}
	if len(t.Columns) > len(r.names) {
		return nil, nil, fmt.Errorf("%d columns sent, relation has %d", len(t.Columns), len(r.names))
	}
	size := 2
	for i, col := range t.Columns {
		size += len(r.quoted[i]) + len(col.Data) + 4
	}
	b := make([]byte, 0, size+size/4)
	b = append(b, '{')
	first := true
	for i, col := range t.Columns {
		if keyOnly && !r.identity[i] {
			continue
		}
		if col.DataType == pglogrepl.TupleDataTypeToast {
			unchanged = append(unchanged, r.names[i])
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, r.quoted[i]...)
		b = append(b, ':')
		switch col.DataType {
		case pglogrepl.TupleDataTypeNull:
			b = append(b, "null"...)
		case pglogrepl.TupleDataTypeText:
			if b, err = appendJSONValue(b, d.types, r.oids[i], col.Data); err != nil {
				return nil, nil, fmt.Errorf("column %s: %w", r.names[i], err)
			}
		default:
			return nil, nil, fmt.Errorf("column %s: tuple data kind %q not handled", r.names[i], col.DataType)
		}
	}
	b = append(b, '}')
	return b, unchanged, nil
}

// key is the change's partition key.
func (d *decoder) key(r *relation, t *pglogrepl.TupleData) []byte {
	switch d.cfg.PartitionBy {
	case partitionByNone:
		return []byte("*")
	case partitionByTable:
		return []byte(r.schema + "." + r.table)
	}
	if t == nil || len(r.keyCols) == 0 {
		return []byte(r.schema + "." + r.table)
	}
	size := len(r.tableHeader) + len(r.keyCols)
	for _, i := range r.keyCols {
		if i < len(t.Columns) {
			size += len(t.Columns[i].Data)
		}
	}
	k := append(make([]byte, 0, size), r.tableHeader...)
	for _, i := range r.keyCols {
		k = append(k, 0)
		if i < len(t.Columns) {
			k = append(k, t.Columns[i].Data...)
		}
	}
	return k
}
