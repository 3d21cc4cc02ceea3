package conformance

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHandovers checks the rebalance rule on records written by hand: a partition that
// moves from process 100 to process 200 and is then delivered by 100 again counts as moved
// once, with each later message of 100 (not of 200) a revoked delivery; the old record format (no pid)
// still parses; a line cut by a kill (no newline) is ignored.
func TestHandovers(t *testing.T) {
	cases := []struct {
		name, record     string
		moved, revoked   int
		revokedParts     int
		messages, opened int
	}{
		{"clean move", "O 1 100\nM 0 0 00 100\nM 1 0 00 100\nO 1 200\nM 0 1 00 200\nM 1 1 00 200\n", 2, 0, 0, 4, 2},
		{"revoked delivered", "O 1 100\nM 0 0 00 100\nO 1 200\nM 0 1 00 200\nM 0 2 00 100\nM 0 3 00 100\n", 1, 2, 1, 4, 2},
		{"two partitions revoked", "O 1 100\nM 0 0 00 100\nM 1 0 00 100\nO 1 200\nM 0 1 00 200\nM 1 1 00 200\nM 1 2 00 100\nM 0 2 00 100\n", 2, 2, 2, 6, 2},
		// Interleaved: the late messages of 100 do not make 200's later ones revoked.
		{"interleaved", "O 1 100\nM 0 0 00 100\nO 1 200\nM 0 1 00 200\nM 0 2 00 100\nM 0 3 00 200\nM 0 4 00 100\n", 1, 2, 1, 5, 2},
		{"one process", "O 1 100\nM 0 0 00 100\nM 0 1 00 100\n", 0, 0, 0, 2, 1},
		{"old format", "O 1\nM 0 0 00\nM 0 1 00\n", 0, 0, 0, 2, 1},
		{"cut line", "O 1 100\nM 0 0 00 100\nO 1 200\nM 0 1 00 200\nM 0 2 00 10", 1, 0, 0, 2, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fixture{record: filepath.Join(t.TempDir(), "record.txt")}
			if err := os.WriteFile(f.record, []byte(c.record), 0o644); err != nil {
				t.Fatal(err)
			}
			h := f.handovers()
			if h.moved != c.moved || h.revoked != c.revoked || h.revokedParts != c.revokedParts {
				t.Errorf("handovers %+v, want moved %d, revoked %d in %d partitions", h, c.moved, c.revoked, c.revokedParts)
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
