package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ferryio/ferry/internal/icebergtest"
	"github.com/ferryio/ferry/sdk"
	"github.com/ferryio/ferry/sdk/sdktest"
)

const baseSchema = `"schema":[{"name":"p","type":"long"},{"name":"o","type":"long"}]`

// runSink opens a sink on cfg, sends offsets first..first+n-1 of partition 0 with
// payload, and closes it (a flush and a commit).
func runSink(t *testing.T, cfg string, first, n uint64, payload func(p uint32, o uint64) []byte) {
	t.Helper()
	ctx := context.Background()
	c := sdktest.NewCommitter()
	s := New()
	if err := s.Open(ctx, sdktest.SinkEnv(t, cfg, c)); err != nil {
		t.Fatal(err)
	}
	p := sdktest.Part(0)
	if _, err := s.Assigned(ctx, sdktest.Topic, []sdk.Partition{p}); err != nil {
		t.Fatal(err)
	}
	c.Assign(p, first)
	if err := sdktest.Consume(ctx, s, c, sdktest.Topic, p, sdktest.Messages(0, first, n, payload)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSchemaEvolutionAddsOptionalColumns: a table written with columns p, o; the declared
// schema then gains two optional columns (note, a string; score, a double): the next Open
// adds them to the table, the new rows fill them, and pyiceberg reads the old rows with
// nulls in them and the new rows with their values, in one scan.
func TestSchemaEvolutionAddsOptionalColumns(t *testing.T) {
	icebergtest.Python(t)
	cfg, name := testConfig(t, "")
	payload := func(_ uint32, o uint64) []byte {
		return fmt.Appendf(nil, `{"p":0,"o":%d,"note":"n%d","score":%d.25}`, o, o, o)
	}
	runSink(t, cfg, 0, 3, payload)
	evolved := strings.Replace(cfg, baseSchema, `"schema":[{"name":"p","type":"long"},{"name":"o","type":"long"},{"name":"note","type":"string"},{"name":"score","type":"double"}]`, 1)
	if evolved == cfg {
		t.Fatal("the test's config has no schema to change")
	}
	runSink(t, evolved, 3, 3, payload)
	runSink(t, evolved, 6, 1, payload) // the table has the columns now: nothing to add
	wh, _ := warehouseLocation(mustParse(t, cfg))
	tbl := icebergtest.Read(t, icebergtest.Catalog{Name: name, URL: os.Getenv("FERRY_POSTGRES_URL"), Warehouse: wh}, "ns.events")
	var got []string
	for _, r := range tbl.Rows {
		got = append(got, fmt.Sprintf("%v %v %v", r["o"], r["note"], r["score"]))
	}
	slices.Sort(got)
	want := []string{"0 <nil> <nil>", "1 <nil> <nil>", "2 <nil> <nil>", "3 n3 3.25", "4 n4 4.25", "5 n5 5.25", "6 n6 6.25"}
	if !slices.Equal(got, want) {
		t.Fatalf("pyiceberg read (o note score):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(tbl.Rows[0]); n != 9 {
		b, _ := json.Marshal(tbl.Rows[0])
		t.Fatalf("a row has %d columns, want 9 (p, o, note, score and the 5 metadata columns): %s", n, b)
	}
}

// TestSchemaEvolutionRefused: every change of an existing table other than an added
// optional column refuses Open, naming the table, the column and the change, and leaves
// the table as it was.
func TestSchemaEvolutionRefused(t *testing.T) {
	cfg, _ := testConfig(t, "")
	runSink(t, cfg, 0, 1, func(_ uint32, o uint64) []byte { return fmt.Appendf(nil, `{"p":0,"o":%d}`, o) })
	for _, tc := range []struct{ schema, want string }{
		{`{"name":"p","type":"long"},{"name":"o","type":"string"}`,
			`table ns.events: column "o" is long in the table, plugin_config.schema declares string: changing a column's type is refused (the sink only adds optional columns)`},
		{`{"name":"p","type":"long"},{"name":"o","type":"long"},{"name":"must","type":"int","required":true}`,
			`table ns.events: plugin_config.schema declares column "must" (int, required), which the table lacks: adding a required column to a table that has rows is refused (declare it optional)`},
		{`{"name":"p","type":"long","required":true},{"name":"o","type":"long"}`,
			`table ns.events: column "p" is optional in the table, plugin_config.schema declares it required: changing whether a column is required is refused (the sink only adds optional columns)`},
	} {
		changed := strings.Replace(cfg, baseSchema, `"schema":[`+tc.schema+`]`, 1)
		err := New().Open(context.Background(), sdktest.SinkEnv(t, changed, sdktest.NewCommitter()))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, sdk.ErrPermanent) {
			t.Errorf("schema %s: Open = %v (permanent %t), want the permanent error %q", tc.schema, err, errors.Is(err, sdk.ErrPermanent), tc.want)
		}
	}
	// The table kept its schema: the first config still opens and writes.
	runSink(t, cfg, 1, 1, func(_ uint32, o uint64) []byte { return fmt.Appendf(nil, `{"p":0,"o":%d}`, o) })
}
