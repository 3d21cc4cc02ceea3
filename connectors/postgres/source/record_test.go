package source

import (
	"testing"
	"time"
)

// TestPositionsBelongToTheirSlot: a message read back counts as this source's only with
// its slot's header, and two slots reading the same transaction give different ids.
func TestPositionsBelongToTheirSlot(t *testing.T) {
	c := change{pos: position{LSN: 0x16B3748, Index: 7}, commitTime: time.Unix(0, 0), schema: "public", table: "t", op: opInsert,
		data: []byte(`{"id":1}`), slot: "a"}
	m, err := c.message()
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := positionOf(m.Headers, "a"); !ok || p != c.pos {
		t.Fatalf("own slot: %v %v", p, ok)
	}
	if _, ok := positionOf(m.Headers, "b"); ok {
		t.Fatal("a message of slot a counted as slot b's")
	}
	if _, ok := positionOf(m.Headers[:2], "a"); ok {
		t.Fatal("a message without the slot header counted")
	}
	lo, hi := m.ID.Halves()
	if hi != c.pos.LSN || lo&(1<<indexBits-1) != 7 || c.pos.id("b") == m.ID {
		t.Fatalf("id %s (lo %x hi %x); slot b's %s", m.ID, lo, hi, c.pos.id("b"))
	}
	want := `{"table_name":"t","operation_type":"INSERT","timestamp":"1970-01-01T00:00:00Z","data":{"id":1},"old_data":null}`
	if string(m.Payload) != want {
		t.Fatalf("payload %s, want %s", m.Payload, want)
	}
}
