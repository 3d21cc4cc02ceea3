package parquetrows

import (
	"bytes"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/ferryio/ferry/sdk"
)

// TestTypeFieldAliases: each type and its PostgreSQL spelling decode to the type; any
// other name is refused with the choices listed.
func TestTypeFieldAliases(t *testing.T) {
	type cfg struct{ T Type }
	c := sdk.NewConfig(func(c *cfg, f *sdk.Fields) { TypeField(f, "type", &c.T).Required() })
	for name, want := range map[string]Type{"string": String, "text": String, "int64": Int64, "bigint": Int64,
		"float64": Float64, "double": Float64, "bool": Bool, "boolean": Bool, "json": JSON, "jsonb": JSON} {
		got, err := c.Parse([]byte(`{"type":"` + name + `"}`))
		if err != nil || got.T != want {
			t.Errorf("%s: %q %v, want %q", name, got.T, err, want)
		}
	}
	if _, err := c.Parse([]byte(`{"type":"int"}`)); err == nil || err.Error() != `plugin_config.type: unknown value "int" (want string, int64, float64, bool or json)` {
		t.Errorf("int: %v", err)
	}
}

// TestExtract: a pointer per column (zero values are values), nil for a missing field, a
// JSON null or a path through a non-object; a value of the wrong kind names the column,
// its path and what it held.
func TestExtract(t *testing.T) {
	cols := []Column{{"s", String, "a.s"}, {"i", Int64, "i"}, {"f", Float64, "f"}, {"b", Bool, "b"}, {"j", JSON, "j"}, {"n", String, "a.s.deeper"}}
	vals, err := Extract(cols, []byte(`{"a":{"s":""},"i":0,"f":0,"b":false,"j":{"x":[1,2]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if *vals[0].(*string) != "" || *vals[1].(*int64) != 0 || *vals[2].(*float64) != 0 || *vals[3].(*bool) || *vals[4].(*string) != `{"x":[1,2]}` || vals[5] != nil {
		t.Fatalf("values %v", vals)
	}
	if vals, err := Extract(cols, []byte(`{"a":null,"i":null}`)); err != nil || vals[0] != nil || vals[1] != nil {
		t.Fatalf("nulls %v %v", vals, err)
	}
	if vals, err := Extract(cols[:1], []byte(`{"a":{"s":12.50}}`)); err != nil || *vals[0].(*string) != "12.50" {
		t.Fatalf("a number in a string column: %v %v", vals, err)
	}
	for payload, want := range map[string]string{
		`{"i":1.5}`:    `column "i" (path i): want an integer, got the number 1.5`,
		`{"i":"7"}`:    `column "i" (path i): want an integer, got the string "7"`,
		`{"f":[1]}`:    `column "f" (path f): want a number, got an array`,
		`{"b":"true"}`: `column "b" (path b): want true or false, got the string "true"`,
		`{"b":{}}`:     `column "b" (path b): want true or false, got an object`,
		`{"i":`:        `typed columns: the payload is not JSON: unexpected EOF`,
	} {
		if _, err := Extract(cols, []byte(payload)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", payload, err, want)
		}
	}
	if err := CheckPath("a..b"); err == nil || err.Error() != `"a..b" is not a dot-separated field path` {
		t.Errorf("a..b: %v", err)
	}
}

// TestWriterRowGroups: a row group ends at the row limit and at groupBytes, whichever
// comes first, across Write calls; Reset starts a file that holds only its own rows; each
// codec name has its codec.
func TestWriterRowGroups(t *testing.T) {
	type rec struct {
		N int64 `parquet:"n"`
	}
	var out bytes.Buffer
	w := NewWriter[rec](&out, 300, parquet.MaxRowsPerRowGroup(40), parquet.Compression(Codec(Zstd, ZstdFastest)))
	write := func(from, n int) {
		if err := w.Write(n, func(i int) (rec, int) { return rec{int64(from + i)}, 10 }); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 25)
	write(25, 75) // groups of 30 rows (300 bytes)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	groups := func(b []byte) (sizes []int64) {
		f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range f.RowGroups() {
			sizes = append(sizes, g.NumRows())
		}
		return sizes
	}
	if got := groups(out.Bytes()); len(got) != 4 || got[0] != 30 || got[1] != 30 || got[2] != 30 || got[3] != 10 {
		t.Fatalf("row groups %v, want 30 30 30 10", got)
	}
	var next bytes.Buffer
	w.Reset(&next)
	write(0, 5)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := groups(next.Bytes()); len(got) != 1 || got[0] != 5 {
		t.Fatalf("after Reset: row groups %v, want 5", got)
	}
	for _, c := range []Compression{Snappy, Gzip, Uncompressed} {
		if Codec(c, "") == nil {
			t.Errorf("%s: no codec", c)
		}
	}
	for _, l := range []ZstdLevel{ZstdFastest, ZstdDefault, ZstdBetter} {
		if Codec(Zstd, l) == nil {
			t.Errorf("zstd %s: no codec", l)
		}
	}
	if Codec("lz4", "") != nil || Codec(Zstd, "") != nil {
		t.Error("a codec for an unknown name")
	}
}
