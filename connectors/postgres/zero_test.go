package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryio/ferry/sdk"
)

// zeroColumns are a mapped column of each SQL type the sink converts to, with the text
// PostgreSQL gives back for the payload's zero value of it.
var zeroColumns = []struct{ name, typ, zero, want string }{
	{"c_smallint", "smallint", `0`, "0"},
	{"c_integer", "integer", `0`, "0"},
	{"c_bigint", "bigint", `0`, "0"},
	{"c_numeric", "numeric", `0`, "0"},
	{"c_numeric_scale", "numeric(10,2)", `0.0`, "0.00"},
	{"c_real", "real", `0`, "0"},
	{"c_double", "double precision", `0.0`, "0"},
	{"c_bool", "boolean", `false`, "false"},
	{"c_text", "text", `""`, ""},
	{"c_varchar", "varchar(10)", `""`, ""},
	{"c_json", "json", `0`, "0"},
	{"c_jsonb_false", "jsonb", `false`, "false"},
	{"c_jsonb_str", "jsonb", `""`, `""`},
	{"c_timestamptz", "timestamptz", `"1970-01-01T00:00:00Z"`, "1970-01-01 00:00:00+00"},
	{"c_timestamptz_y1", "timestamptz", `"0001-01-01T00:00:00Z"`, "0001-01-01 00:00:00+00"},
	{"c_timestamp", "timestamp", `"0001-01-01T00:00:00Z"`, "0001-01-01 00:00:00"},
	{"c_date", "date", `"0001-01-01T00:00:00Z"`, "0001-01-01"},
}

// TestColumnsZeroIsNotNull: a mapped column's zero value (0, false, "", the zero time) is
// that value in the table, in every write mode and COPY format; only a missing field or a
// JSON null is NULL. Read back by PostgreSQL itself (IS NULL and the column's text).
func TestColumnsZeroIsNotNull(t *testing.T) {
	db, url := testDB(t)
	var cols, zero, null []string
	for _, c := range zeroColumns {
		cols = append(cols, fmt.Sprintf(`{"name":%q,"type":%q,"path":%q}`, c.name, c.typ, c.name))
		zero = append(zero, fmt.Sprintf(`%q:%s`, c.name, c.zero))
		null = append(null, fmt.Sprintf(`%q:null`, c.name))
	}
	payloads := []string{"{" + strings.Join(zero, ",") + "}", `{}`, "{" + strings.Join(null, ",") + "}"}
	for name, mode := range map[string]string{"copy_binary": `"write_mode":"copy","copy_format":"binary"`,
		"copy_text": `"write_mode":"copy","copy_format":"text"`, "insert": `"write_mode":"insert"`, "upsert": `"write_mode":"upsert"`} {
		t.Run(name, func(t *testing.T) {
			tbl := fresh(t, db, "rows")
			s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json",%s,"columns":[%s]}`,
				url, tbl, fresh(t, db, "offs"), mode, strings.Join(cols, ",")), "stop", nil)
			if err := consume(t, s, 0, msgs(0, 3, func(o uint64) string { return payloads[o] })); err != nil {
				t.Fatal(err)
			}
			for _, c := range zeroColumns {
				var isNull []bool
				var text []string
				rows, err := db.Query(context.Background(), fmt.Sprintf("SELECT %s IS NULL, coalesce(%s::text, '') FROM %s ORDER BY iggy_offset", c.name, c.name, tbl))
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var n bool
					var s string
					if err := rows.Scan(&n, &s); err != nil {
						t.Fatal(err)
					}
					isNull, text = append(isNull, n), append(text, s)
				}
				if rows.Err() != nil {
					t.Fatal(rows.Err())
				}
				if len(isNull) != 3 || isNull[0] || text[0] != c.want || !isNull[1] || !isNull[2] {
					t.Errorf("%s %s: NULL %v, text %q; want the zero %s as %q, then NULL (missing), NULL (null)", c.name, c.typ, isNull, text, c.zero, c.want)
				}
			}
		})
	}
}

// TestEmptyPayloadIsNotNull: a message's payload column is never NULL: an empty payload
// (nil or zero bytes, as a format conversion may hand on) is an empty bytea or text, and
// under payload_format = "json" a row PostgreSQL refuses (it is not JSON), as any other
// payload that is not JSON, instead of a NULL nobody notices.
func TestEmptyPayloadIsNotNull(t *testing.T) {
	db, url := testDB(t)
	for _, format := range []payloadFormat{formatBytea, formatText, formatJSON} {
		for name, mode := range map[string]string{"copy_binary": `"write_mode":"copy","copy_format":"binary"`,
			"copy_text": `"write_mode":"copy","copy_format":"text"`, "insert": `"write_mode":"insert"`} {
			t.Run(string(format)+"/"+name, func(t *testing.T) {
				tbl := fresh(t, db, "rows")
				s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":%q,%s}`,
					url, tbl, fresh(t, db, "offs"), format, mode), "skip", nil)
				ms := msgs(0, 3, func(uint64) string { return `"x"` })
				ms[0].Payload, ms[1].Payload = nil, []byte{}
				err := consume(t, s, 0, ms)
				nulls := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE payload IS NULL")
				if format == formatJSON {
					var rej *sdk.RejectedMessages
					if !errors.As(err, &rej) || fmt.Sprint(rej.Offsets) != "[0 1]" {
						t.Fatalf("Consume = %v; want offsets [0 1] rejected", err)
					}
					if n := count(t, db, "SELECT count(*) FROM "+tbl); n != 1 || nulls != 0 {
						t.Fatalf("%d rows, %d with a NULL payload; want the one JSON row", n, nulls)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if empty := count(t, db, "SELECT count(*) FROM "+tbl+" WHERE length(payload) = 0"); nulls != 0 || empty != 2 {
					t.Fatalf("%d NULL payloads, %d empty; want 0 and 2", nulls, empty)
				}
			})
		}
	}
}
