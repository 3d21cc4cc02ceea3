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
func (p position) id(slot string) sdk.MessageID { return p.idHashed(slotHash(slot)) }

// idHashed is id with the slot's hash (slotHash) computed once.
func (p position) idHashed(slot uint32) sdk.MessageID {
	var id sdk.MessageID
	binary.LittleEndian.PutUint64(id[:8], uint64(slot)<<indexBits|p.Index&(1<<indexBits-1))
	binary.LittleEndian.PutUint64(id[8:], p.LSN)
	return id
}

// slotHash is the hash of a slot's name in its changes' ids.
func slotHash(slot string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(slot))
	return h.Sum32()
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

	// What every change of a relation or a transaction shares, rendered once by the decoder
	// (nil: message renders it).
	rel    *relation
	atText []byte // commitTime as RFC 3339 in UTC
	hashed bool   // slotID holds slotHash(slot)
	slotID uint32
}

// headerKeys are the keys of a change's headers, in order. Messages share them (and their
// relation's table and slot values): nothing downstream writes to a header's bytes.
var headerKeys = [...]sdk.HeaderField{sdk.String(HeaderCommitLSN), sdk.String(HeaderTxnIndex), sdk.String(HeaderXID),
	sdk.String(HeaderTable), sdk.String(HeaderSlot)}

// changeHeaders holds a message's headers and their number values: one allocation.
type changeHeaders struct {
	hs   [len(headerKeys)]sdk.Header
	nums [24]byte
}

// message renders the change as the message sent to Iggy. The payload is written by hand:
// data and old_data are valid JSON already (the decoder built them), so the encoder's
// validation and compaction of them would be spent for nothing.
func (c *change) message() (sdk.ProducedMessage, error) {
	var tableJSON, tableHeader, slot []byte
	if c.rel != nil {
		tableJSON, tableHeader, slot = c.rel.tableJSON, c.rel.tableHeader, c.rel.slot
	} else {
		tableJSON, tableHeader, slot = appendJSONString(nil, c.table), []byte(c.schema+"."+c.table), []byte(c.slot)
	}
	at := c.atText
	if at == nil {
		at = c.commitTime.UTC().AppendFormat(nil, time.RFC3339Nano)
	}
	b := make([]byte, 0, 80+len(tableJSON)+len(c.op)+len(at)+len(c.data)+len(c.oldData))
	b = append(b, `{"table_name":`...)
	b = append(b, tableJSON...)
	b = append(b, `,"operation_type":"`...)
	b = append(b, c.op...)
	b = append(b, `","timestamp":"`...)
	b = append(b, at...)
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
	h := new(changeHeaders)
	binary.LittleEndian.PutUint64(h.nums[0:8], c.pos.LSN)
	binary.LittleEndian.PutUint64(h.nums[8:16], c.pos.Index)
	binary.LittleEndian.PutUint64(h.nums[16:24], uint64(c.xid))
	h.hs = [len(headerKeys)]sdk.Header{
		{Key: headerKeys[0], Value: sdk.HeaderField{Kind: sdk.HeaderUint64, Value: h.nums[0:8:8]}},
		{Key: headerKeys[1], Value: sdk.HeaderField{Kind: sdk.HeaderUint64, Value: h.nums[8:16:16]}},
		{Key: headerKeys[2], Value: sdk.HeaderField{Kind: sdk.HeaderUint64, Value: h.nums[16:24:24]}},
		{Key: headerKeys[3], Value: sdk.HeaderField{Kind: sdk.HeaderString, Value: tableHeader}},
		{Key: headerKeys[4], Value: sdk.HeaderField{Kind: sdk.HeaderString, Value: slot}},
	}
	id := c.slotID
	if !c.hashed {
		id = slotHash(c.slot)
	}
	return sdk.ProducedMessage{ID: c.pos.idHashed(id), Payload: b, PartitionKey: c.key, Headers: h.hs[:]}, nil
}

var _ sdk.MessageDescriber = (*Source)(nil)

// DescribeMessage names a CDC message by its headers (sdk.MessageDescriber), for the
// runtime's lines about a message it could not send: the table, the transaction's commit
// LSN and xid, and the change's index in it. "" for a message without them (polling
// mode's).
func (s *Source) DescribeMessage(m *sdk.ProducedMessage) string {
	var table string
	var lsn, index, xid uint64
	found := 0
	for _, h := range m.Headers {
		if h.Key.Kind != sdk.HeaderString {
			continue
		}
		switch k := string(h.Key.Value); {
		case k == HeaderTable && h.Value.Kind == sdk.HeaderString:
			table = string(h.Value.Value)
			found++
		case h.Value.Kind == sdk.HeaderUint64 && len(h.Value.Value) == 8 && (k == HeaderCommitLSN || k == HeaderTxnIndex || k == HeaderXID):
			v := binary.LittleEndian.Uint64(h.Value.Value)
			switch k {
			case HeaderCommitLSN:
				lsn = v
			case HeaderTxnIndex:
				index = v
			default:
				xid = v
			}
			found++
		}
	}
	if found < 4 {
		return ""
	}
	return fmt.Sprintf("table %s, commit LSN %X/%X, xid %d, change %d of the transaction", table, lsn>>32, uint32(lsn), xid, index)
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
