package source

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
	"unicode"

	"github.com/ferryio/ferry/sdk"
)

// Message headers every change carries.
const (
	// HeaderCommitLSN is the commit LSN of the change's transaction (uint64).
	HeaderCommitLSN = "pg_commit_lsn"
	// HeaderTxnIndex is the change's position inside its transaction, from 0 (uint64),
	// counting every change the publication sends, captured or not.
	HeaderTxnIndex = "pg_txn_index"
	// HeaderXID is the transaction id (uint64).
	HeaderXID = "pg_xid"
	// HeaderTable is the change's table, schema-qualified (string).
	HeaderTable = "pg_table"
	// HeaderSlot is the replication slot the change was read from (string): a source reads
	// back only its own messages, so several sources may share a topic.
	HeaderSlot = "pg_slot"
)

// position orders changes: the commit LSN of the transaction, then the change's index in
// it. pgoutput sends transactions in commit order, so positions only grow.
type position struct {
	LSN   uint64 `json:"lsn"`
	Index uint64 `json:"index"`
}

func (p position) after(q position) bool {
	return p.LSN > q.LSN || (p.LSN == q.LSN && p.Index > q.Index)
}

// indexBits is how many low bits of an id's low half hold the index; the bits above hold a
// hash of the slot, so two sources reading the same transaction never share an id.
const indexBits = 40

// id is the change's deterministic message id: the commit LSN in the high 64 bits; in the
// low ones a hash of the slot above the index.
func (p position) id(slot string) sdk.MessageID {
	h := fnv.New32a()
	_, _ = h.Write([]byte(slot))
	var id sdk.MessageID
	binary.LittleEndian.PutUint64(id[:8], uint64(h.Sum32())<<indexBits|p.Index&(1<<indexBits-1))
	binary.LittleEndian.PutUint64(id[8:], p.LSN)
	return id
}

// positionOf reads the position headers of a message read back from Iggy; ok is false
// for a message this source (this slot) did not write.
func positionOf(hs []sdk.Header, slot string) (position, bool) {
	var p position
	found := 0
	for _, h := range hs {
		if h.Key.Kind == sdk.HeaderString && string(h.Key.Value) == HeaderSlot {
			if h.Value.Kind == sdk.HeaderString && string(h.Value.Value) == slot {
				found++
			}
			continue
		}
		if h.Key.Kind != sdk.HeaderString || h.Value.Kind != sdk.HeaderUint64 || len(h.Value.Value) != 8 {
			continue
		}
		switch string(h.Key.Value) {
		case HeaderCommitLSN:
			p.LSN = binary.LittleEndian.Uint64(h.Value.Value)
			found++
		case HeaderTxnIndex:
			p.Index = binary.LittleEndian.Uint64(h.Value.Value)
			found++
		}
	}
	return p, found == 3
}

// change is one decoded row change, ready to become a message.
type change struct {
	pos        position
	xid        uint32
	commitTime time.Time
	schema     string
	table      string
	op         string
	data       []byte // a JSON object
	oldData    []byte // a JSON object, or nil
	unchanged  []string
	key        []byte // partition key
	slot       string
}

// message renders the change as the message sent to Iggy. The payload is written by hand:
// data and old_data are valid JSON already (the decoder built them), so the encoder's
// validation and compaction of them would be spent for nothing.
func (c *change) message() (sdk.ProducedMessage, error) {
	b := make([]byte, 0, 96+len(c.table)+len(c.data)+len(c.oldData))
	b = append(b, `{"table_name":`...)
	b = appendJSONString(b, c.table)
	b = append(b, `,"operation_type":"`...)
	b = append(b, c.op...)
	b = append(b, `","timestamp":"`...)
	b = c.commitTime.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","data":`...)
	b = append(b, c.data...)
	b = append(b, `,"old_data":`...)
	if c.oldData != nil {
		b = append(b, c.oldData...)
	} else {
		b = append(b, "null"...)
	}
	if len(c.unchanged) > 0 {
		b = append(b, `,"unchanged_toast_columns":[`...)
		for i, n := range c.unchanged {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, n)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	return sdk.ProducedMessage{ID: c.pos.id(c.slot), Payload: b, PartitionKey: c.key, Headers: []sdk.Header{
		{Key: sdk.String(HeaderCommitLSN), Value: sdk.Uint64(c.pos.LSN)},
		{Key: sdk.String(HeaderTxnIndex), Value: sdk.Uint64(c.pos.Index)},
		{Key: sdk.String(HeaderXID), Value: sdk.Uint64(uint64(c.xid))},
		{Key: sdk.String(HeaderTable), Value: sdk.String(c.schema + "." + c.table)},
		{Key: sdk.String(HeaderSlot), Value: sdk.String(c.slot)},
	}}, nil
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

func (p position) String() string {
	return fmt.Sprintf("%X/%X#%d", p.LSN>>32, uint32(p.LSN), p.Index)
}

// snakeCase converts a column name as upstream's snake_case_columns does: an underscore
// before an upper-case letter that does not follow another one, all lower case.
func snakeCase(s string) string {
	var b strings.Builder
	prevUpper := false
	for i, r := range []rune(s) {
		if unicode.IsUpper(r) {
			if i > 0 && !prevUpper {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			prevUpper = true
			continue
		}
		b.WriteRune(r)
		prevUpper = false
	}
	return b.String()
}
