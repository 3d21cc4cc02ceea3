package s3

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ferryio/ferry/internal/s3test"
	"github.com/ferryio/ferry/sdk/sdktest"
)

// TestParquetTypedColumnsZeroIsNotNull: a typed column's Go zero value (0, 0.0, false, "")
// is a value, not a null; only a missing field or a JSON null is null. parquet-go writes a
// zero value held as a plain Go value in an optional column as null, so every zero read
// back as None before. Every accepted type name, read back by pyarrow.
func TestParquetTypedColumnsZeroIsNotNull(t *testing.T) {
	srv := s3test.Connect(t)
	bucket := srv.Bucket(t)
	types := []string{"string", "text", "json", "jsonb", "int64", "bigint", "float64", "double", "bool", "boolean"}
	var cols []string
	for _, typ := range types {
		cols = append(cols, fmt.Sprintf(`{"name":%q,"type":%q,"path":%q}`, typ, typ, typ))
	}
	// The four columns too, by their own names.
	cols = append(cols, `{"name":"i","type":"int64","path":"i"}`, `{"name":"f","type":"float64","path":"f"}`,
		`{"name":"b","type":"bool","path":"b"}`, `{"name":"s","type":"string","path":"s"}`)
	c := sdktest.NewCommitter()
	s := open(t, cfgOf(srv, bucket, `,"output_format":"parquet","columns":[`+strings.Join(cols, ",")+`]`), c)
	assign(t, s, 0)
	payloads := []string{
		// 0: the zero value of each type
		`{"string":"","text":"","json":0,"jsonb":false,"int64":0,"bigint":0,"float64":0.0,"double":0,"bool":false,"boolean":false,` +
			`"i":0,"f":0.0,"b":false,"s":""}`,
		// 1: every field missing
		`{}`,
		// 2: every field a JSON null
		`{"string":null,"text":null,"json":null,"jsonb":null,"int64":null,"bigint":null,"float64":null,"double":null,"bool":null,"boolean":null,` +
			`"i":null,"f":null,"b":null,"s":null}`,
		// 3: values that are not zero
		`{"string":"x","text":"y","json":{"a":[1]},"jsonb":"","int64":-7,"bigint":9007199254740993,"float64":1.5,"double":-2.25,"bool":true,"boolean":true,` +
			`"i":1,"f":1.5,"b":true,"s":"x"}`,
	}
	batch := msgs(0, 0, uint64(len(payloads)))
	for i, p := range payloads {
		batch[i].Payload = []byte(p)
	}
	consume(t, s, 0, batch)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs := srv.ReadParquet(t, bucket)
	if len(objs) != 1 || len(objs[0].Rows) != len(payloads) {
		t.Fatalf("objects %+v; want one with %d rows", objs, len(payloads))
	}
	nulls := map[string]any{}
	for _, typ := range append(types, "i", "f", "b", "s") {
		nulls[typ] = nil
	}
	n := func(s string) json.Number { return json.Number(s) }
	want := []map[string]any{
		{"string": "", "text": "", "json": "0", "jsonb": "false", "int64": n("0"), "bigint": n("0"), "float64": n("0.0"), "double": n("0.0"), "bool": false, "boolean": false,
			"i": n("0"), "f": n("0.0"), "b": false, "s": ""},
		nulls,
		nulls,
		{"string": "x", "text": "y", "json": `{"a":[1]}`, "jsonb": `""`, "int64": n("-7"), "bigint": n("9007199254740993"), "float64": n("1.5"), "double": n("-2.25"), "bool": true, "boolean": true,
			"i": n("1"), "f": n("1.5"), "b": true, "s": "x"},
	}
	for i, r := range objs[0].Rows {
		if r.Offset != uint64(i) || !reflect.DeepEqual(r.Columns, want[i]) {
			got, _ := json.Marshal(r.Columns)
			exp, _ := json.Marshal(want[i])
			t.Errorf("row %d (offset %d, payload %s):\n got %s\nwant %s", i, r.Offset, payloads[i], got, exp)
		}
	}
	for _, col := range []string{"string: string", "text: string", "json: string", "jsonb: string", "int64: int64", "bigint: int64",
		"float64: double", "double: double", "bool: bool", "boolean: bool", "i: int64", "f: double", "b: bool", "s: string"} {
		if !strings.Contains(objs[0].Schema, col) {
			t.Errorf("schema %s lacks %q", objs[0].Schema, col)
		}
	}
}
