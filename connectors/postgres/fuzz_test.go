package postgres

import (
	"strings"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

// FuzzParseConfig: any plugin_config either parses to a complete configuration (every
// default applied, the table names safe to splice into SQL) or fails with an error that
// names plugin_config; it never panics.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"connection_string":"postgres://h/db","write_mode":"upsert","upsert_key":"k","columns":[{"name":"k","path":"a.b","type":"bigint"}]}`))
	f.Add([]byte(`{"connection_string":"x","batch_size":0,"payload_format":"jsonb","retry_delay":"1s"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := Config.Parse(raw)
		if err != nil {
			if !strings.Contains(err.Error(), "plugin_config") {
				t.Fatalf("error %q does not name plugin_config", err)
			}
			return
		}
		for _, col := range c.Columns {
			if !identRe.MatchString(col.Name) {
				t.Fatalf("column name %q accepted", col.Name)
			}
		}
		if c.ConnectionString.IsZero() || c.BatchSize < 1 || c.MaxConnections < 1 || c.MaxRowsPerTransaction < 1 || tableName(c.TargetTable) != nil ||
			tableName(c.OffsetsTable) != nil || c.RetryDelay <= 0 || c.PayloadFormat == "" || c.WriteMode == "" || c.CopyFormat == "" || c.OnOffsetsMismatch == "" {
			t.Fatalf("incomplete config %+v", c)
		}
	})
}

// FuzzRow: any payload becomes one row of the configured width, mapped columns converted
// or the row rejected with a convError; it never panics.
func FuzzRow(f *testing.F) {
	f.Add([]byte(`{"n":1,"user":{"name":"a","age":3.5},"ok":true,"at":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"n":"x"}`))
	f.Add([]byte("\xff"))
	c, err := Config.Parse([]byte(`{"connection_string":"x","payload_format":"text","columns":[
		{"name":"n","type":"bigint","path":"n"},{"name":"age","type":"numeric(10,2)","path":"user.age"},
		{"name":"f","type":"double precision","path":"user.age"},{"name":"ok","type":"boolean","path":"ok"},
		{"name":"at","type":"timestamptz","path":"at"},{"name":"u","type":"jsonb","path":"user"},{"name":"name","path":"user.name"}]}`))
	if err != nil {
		f.Fatal(err)
	}
	s := &Sink{cfg: c}
	s.cols = s.columns()
	f.Fuzz(func(t *testing.T, payload []byte) {
		m := sdk.ConsumedMessage{Offset: 1, Payload: payload}
		r := s.row(sdk.TopicMetadata{Stream: "s", Topic: "t"}, 0, &m)
		if len(r) != len(s.cols)+1 {
			t.Fatalf("row has %d values for %d columns", len(r), len(s.cols))
		}
		if last := r[len(r)-1]; last != nil {
			if _, ok := last.(convError); !ok {
				t.Fatalf("trailing slot %T, want nil or convError", last)
			}
		}
	})
}
