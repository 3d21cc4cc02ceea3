package conformance

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHandovers checks the rebalance rule on records written by hand: a partition that
// moves from process 100 to process 200 and is then delivered by 100 again counts as moved
// once, with each later message of 100 a revoked delivery; the old record format (no pid)
// still parses; a line cut by a kill (no newline) is ignored.
func TestHandovers(t *testing.T) {
	cases := []struct {
		name, record     string
		moved, revoked   int
		messages, opened int
	}{
		{"clean move", "O 1 100\nM 0 0 00 100\nM 1 0 00 100\nO 1 200\nM 0 1 00 200\nM 1 1 00 200\n", 2, 0, 4, 2},
		{"revoked delivered", "O 1 100\nM 0 0 00 100\nO 1 200\nM 0 1 00 200\nM 0 2 00 100\nM 0 3 00 100\n", 1, 2, 4, 2},
		// Back and forth: 200 delivered the partition before 100 took it again, so 200's
		// later message is a revoked delivery too.
		{"back and forth", "O 1 100\nM 0 0 00 100\nO 1 200\nM 0 1 00 200\nM 0 2 00 100\nM 0 3 00 200\n", 1, 2, 4, 2},
		{"one process", "O 1 100\nM 0 0 00 100\nM 0 1 00 100\n", 0, 0, 2, 1},
		{"old format", "O 1\nM 0 0 00\nM 0 1 00\n", 0, 0, 2, 1},
		{"cut line", "O 1 100\nM 0 0 00 100\nO 1 200\nM 0 1 00 200\nM 0 2 00 10", 1, 0, 2, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fixture{record: filepath.Join(t.TempDir(), "record.txt")}
			if err := os.WriteFile(f.record, []byte(c.record), 0o644); err != nil {
				t.Fatal(err)
			}
			h := f.handovers()
			if h.moved != c.moved || h.revoked != c.revoked {
				t.Errorf("handovers %+v, want moved %d, revoked %d", h, c.moved, c.revoked)
			}
			if n := f.count('M'); n != c.messages {
				t.Errorf("%d messages parsed, want %d", n, c.messages)
			}
			if n := f.count('O'); n != c.opened {
				t.Errorf("%d opens parsed, want %d", n, c.opened)
			}
		})
	}
}
