package conformance

import "testing"

// TestJudgeCDC: the postgres-cdc verdict counts lost and duplicated changes (a repeated
// truncate identity included) and commit-order or per-partition disorder.
func TestJudgeCDC(t *testing.T) {
	want := []string{"a INSERT 1 1", "a TRUNCATE", "a INSERT 2 2", "a TRUNCATE"}
	ch := func(p uint32, lsn, idx uint64, id string) cdcChange {
		return cdcChange{partition: p, lsn: lsn, idx: idx, ident: id}
	}
	for _, tc := range []struct {
		name                  string
		got                   []cdcChange
		lost, dup, disordered int
	}{
		{"exact", []cdcChange{ch(0, 1, 0, want[0]), ch(1, 2, 0, want[1]), ch(0, 3, 0, want[2]), ch(1, 4, 0, want[3])}, 0, 0, 0},
		{"one truncate lost", []cdcChange{ch(0, 1, 0, want[0]), ch(1, 2, 0, want[1]), ch(0, 3, 0, want[2])}, 1, 0, 0},
		{"insert twice", []cdcChange{ch(0, 1, 0, want[0]), ch(0, 1, 0, want[0]), ch(1, 2, 0, want[1]), ch(0, 3, 0, want[2]), ch(1, 4, 0, want[3])}, 0, 1, 1},
		{"commit order swapped", []cdcChange{ch(0, 1, 0, want[2]), ch(1, 2, 0, want[1]), ch(0, 3, 0, want[0]), ch(1, 4, 0, want[3])}, 0, 0, 2},
		{"partition goes back", []cdcChange{ch(0, 3, 0, want[2]), ch(1, 2, 0, want[1]), ch(0, 1, 0, want[0]), ch(1, 4, 0, want[3])}, 0, 0, 1},
	} {
		lost, dup, dis := judgeCDC(tc.got, want)
		if lost != tc.lost || dup != tc.dup || dis != tc.disordered {
			t.Errorf("%s: lost %d, duplicated %d, disorder %d; want %d, %d, %d", tc.name, lost, dup, dis, tc.lost, tc.dup, tc.disordered)
		}
	}
}
