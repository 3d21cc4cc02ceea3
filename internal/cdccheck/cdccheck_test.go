package cdccheck

import "testing"

// TestJudge: the verdict counts lost and duplicated changes (a repeated truncate identity
// included) and commit-order or per-partition disorder, and names the first difference.
func TestJudge(t *testing.T) {
	want := []string{"a INSERT 1 1", "a TRUNCATE", "a INSERT 2 2", "a TRUNCATE"}
	ch := func(p uint32, lsn uint64, id string) Change {
		return Change{Partition: p, Offset: lsn, LSN: lsn, Ident: id}
	}
	for _, tc := range []struct {
		name                  string
		got                   []Change
		lost, dup, disordered int
		first                 string
	}{
		{"exact", []Change{ch(0, 1, want[0]), ch(1, 2, want[1]), ch(0, 3, want[2]), ch(1, 4, want[3])}, 0, 0, 0, ""},
		{"one truncate lost", []Change{ch(0, 1, want[0]), ch(1, 2, want[1]), ch(0, 3, want[2])}, 1, 0, 0,
			`change 3 of 4 (the topic has 3): topic "", committed "a TRUNCATE"`},
		{"insert twice", []Change{ch(0, 1, want[0]), ch(0, 1, want[0]), ch(1, 2, want[1]), ch(0, 3, want[2]), ch(1, 4, want[3])}, 0, 1, 1,
			"partition 0 offset 1: position 1#0 not after 1#0"},
		{"commit order swapped", []Change{ch(0, 1, want[2]), ch(1, 2, want[1]), ch(0, 3, want[0]), ch(1, 4, want[3])}, 0, 0, 2,
			`change 0 of 4 (the topic has 4): topic "a INSERT 2 2", committed "a INSERT 1 1"`},
		{"partition goes back", []Change{ch(0, 3, want[2]), ch(1, 2, want[1]), ch(0, 1, want[0]), ch(1, 4, want[3])}, 0, 0, 1,
			"partition 0 offset 1: position 1#0 not after 3#0"},
	} {
		v := Judge(tc.got, want)
		if v.Lost != tc.lost || v.Duplicated != tc.dup || v.Disorder != tc.disordered || v.First != tc.first || v.OK() != (tc.first == "") {
			t.Errorf("%s: %+v; want lost %d, duplicated %d, disorder %d, first %q", tc.name, v, tc.lost, tc.dup, tc.disordered, tc.first)
		}
	}
}

// TestIdentity: each operation's payload as the writer names it, and a payload that is not
// a change is an error naming it.
func TestIdentity(t *testing.T) {
	for payload, want := range map[string]string{
		`{"table_name":"a","operation_type":"INSERT","data":{"id":1,"v":2}}`:                           "a INSERT 1 2",
		`{"table_name":"a","operation_type":"UPDATE","data":{"id":3,"v":4},"old_data":{"id":1,"v":2}}`: "a UPDATE 3 4 old 1",
		`{"table_name":"a","operation_type":"DELETE","data":{"id":3}}`:                                 "a DELETE 3",
		`{"table_name":"b","operation_type":"TRUNCATE","data":null}`:                                   "b TRUNCATE",
	} {
		if got, err := Identity([]byte(payload)); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", payload, got, err, want)
		}
	}
	for payload, want := range map[string]string{
		`{"table_name":"a","operation_type":"INSERT","data":{"id":1}}`: `payload "{\"table_name\":\"a\",\"operation_type\":\"INSERT\",\"data\":{\"id\":1}}": no data.id or data.v`,
		`not json`: `payload "not json": invalid character 'o' in literal null (expecting 'u')`,
	} {
		if _, err := Identity([]byte(payload)); err == nil || err.Error() != want {
			t.Errorf("%s: %v; want %s", payload, err, want)
		}
	}
}
