package source

import (
	"strings"
	"testing"
)

// TestCDCZeroIsNotNull: a column's zero value (0, 0.0, false, the empty string, an empty bytea, an empty
// array, an array of one empty string, the epoch) is that value in the change, never
// null; only SQL NULL is null. CDC and polling alike.
func TestCDCZeroIsNotNull(t *testing.T) {
	const cols = "id int PRIMARY KEY, i2 smallint, i4 int, i8 bigint, n numeric, f4 real, f8 double precision, b bool, " +
		"t text, vc varchar(5), ch char(1), by bytea, arr int[], tags text[], j json, jb jsonb, ts timestamptz, d date"
	const zeros = "(1, 0, 0, 0, 0.0, 0, 0, false, '', '', ' ', '', '{}', '{\"\"}', '0', '\"\"', 'epoch', '1970-01-01')"
	const nulls = "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
	wantZero := `{"id":1,"i2":0,"i4":0,"i8":0,"n":0.0,"f4":0,"f8":0,"b":false,"t":"","vc":"","ch":" ","by":"","arr":[],"tags":[""],"j":0,"jb":"","ts":"1970-01-01T00:00:00Z","d":"1970-01-01"}`
	wantNull := `{"id":2,"i2":null,"i4":null,"i8":null,"n":null,"f4":null,"f8":null,"b":null,"t":null,"vc":null,"ch":null,"by":null,"arr":null,"tags":null,"j":null,"jb":null,"ts":null,"d":null}`

	t.Run("cdc", func(t *testing.T) {
		f := newFixture(t, map[string]string{"z": cols})
		z := f.table("z")
		s := f.open(f.config(""), nil)
		f.exec("INSERT INTO " + z + " VALUES " + zeros + ", " + nulls)
		got := payloads(t, first(read(t, s, 2)))
		for i, want := range []string{wantZero, wantNull} {
			w := `{"table_name":"` + z + `","operation_type":"INSERT","timestamp":"T","data":` + want + `,"old_data":null}`
			if got[i] != w {
				t.Errorf("change %d:\n got %s\nwant %s", i, got[i], w)
			}
		}
	})
	t.Run("polling", func(t *testing.T) {
		f := newFixture(t, map[string]string{"z": cols})
		z := f.table("z")
		f.exec("INSERT INTO " + z + " VALUES " + zeros + ", " + nulls)
		cfg := strings.Replace(string(f.config(`, "poll_interval": "20ms"`)), `"mode": "cdc"`, `"mode": "polling"`, 1)
		got := payloads(t, first(read(t, f.open([]byte(cfg), nil), 2)))
		for i, want := range []string{wantZero, wantNull} {
			w := `{"table_name":"` + z + `","operation_type":"SELECT","timestamp":"T","data":` + want + `,"old_data":null}`
			if got[i] != w {
				t.Errorf("row %d:\n got %s\nwant %s", i, got[i], w)
			}
		}
	})
}

func first[A, B any](a A, _ B) A { return a }

// TestPollingEmptyStringIsAValue: a tracking value or primary key that is the empty
// string is a value: the tracking value advances past it (it was taken for "none", so the
// round after read the empty-string row again, forever) and delete_after_read deletes its row (it
// was left in the table).
func TestPollingEmptyStringIsAValue(t *testing.T) {
	f := newFixture(t, map[string]string{"e": "k text PRIMARY KEY, v int"})
	e := f.table("e")
	f.exec("INSERT INTO " + e + " VALUES ('', 0), ('a', 1), ('b', 2)")
	cfg := strings.Replace(string(f.config(`, "tracking_column": "k", "batch_size": 1, "delete_after_read": true, "poll_interval": "20ms"`)),
		`"mode": "cdc"`, `"mode": "polling"`, 1)
	s := f.open([]byte(cfg), nil)
	var keys []string
	for range 3 {
		for _, p := range payloads(t, first(read(t, s, 1))) {
			i := strings.Index(p, `"k":`)
			keys = append(keys, p[i:strings.Index(p[i:], ",")+i])
		}
	}
	if got := strings.Join(keys, " "); got != `"k":"" "k":"a" "k":"b"` {
		t.Fatalf("rows read %s; want each key once, in order", got)
	}
	var left int
	if err := f.db.QueryRow(t.Context(), "SELECT count(*) FROM "+e).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d rows left after delete_after_read (%v), want 0", left, err)
	}
}
