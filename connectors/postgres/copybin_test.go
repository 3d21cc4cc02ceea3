package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ferryio/ferry/sdk"
)

// TestNumericIDEncoding: appendNumericID's bytes decode (by pgx) to the id's value, for
// the edges of base-10000 digits, zero, the largest id and random ids.
func TestNumericIDEncoding(t *testing.T) {
	ids := []msgID{{0, 0}, {0, 1}, {0, 9999}, {0, 10000}, {0, 10001}, {0, 100_000_000}, {0, ^uint64(0)}, {1, 0}, {^uint64(0), ^uint64(0)}}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		ids = append(ids, msgID{r.Uint64() >> r.IntN(64), r.Uint64()})
	}
	m := pgtype.NewMap()
	for _, id := range ids {
		b := appendNumericID(nil, id)
		if n := binary.BigEndian.Uint32(b); int(n) != len(b)-4 {
			t.Fatalf("%v: length field %d for %d bytes", id, n, len(b)-4)
		}
		var got pgtype.Numeric
		if err := m.Scan(pgtype.NumericOID, pgtype.BinaryFormatCode, b[4:], &got); err != nil {
			t.Fatalf("%v: %v", id, err)
		}
		want, _ := id.NumericValue()
		if got.Int.Cmp(new(big.Int).Mul(want.Int, pow10(-int(got.Exp)))) != 0 && new(big.Int).Mul(got.Int, pow10(int(got.Exp))).Cmp(want.Int) != 0 {
			t.Fatalf("%v: decoded %s e%d, want %s", id, got.Int, got.Exp, want.Int)
		}
	}
}

func pow10(n int) *big.Int {
	if n < 0 {
		n = 0
	}
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// TestBinaryCopyWritesWhatPgxWrote: for each payload format, the same messages written by
// the sink's own binary COPY encoder and by pgx's CopyFrom (the sink's former path, the id
// as a big.Int) give tables whose rows are identical as text, column by column, with every
// optional column on and [[plugin_config.columns]] of several types.
func TestBinaryCopyWritesWhatPgxWrote(t *testing.T) {
	db, url := testDB(t)
	payloads := map[string][]string{
		FormatJSON: {
			`{"n":1,"s":"plain","f":1.5,"b":true,"at":"2024-02-29T12:34:56.789012Z","obj":{"k":[1,2,{"z":null}]},"big":123456789012345678901234567890}`,
			`[1, "two", {"three": 3}, [], {}]`,
			`"a string with unicode é 漢字 🚀 and escapes \" \\ \n \t \u00e9 \ud83d\ude80"`,
			`12345.678e-3`, `-0`, `true`, `null`, `   {"spaced" :  "out" , "dup":1, "dup":2 }  `,
			`{"n":-2147483648,"s":"","f":-0.0,"b":false,"at":"1999-12-31T23:59:59.999999+02:00","obj":"not an object"}`,
			`{"n":null,"s":null,"obj":{"deep":{"deeper":"x"}}}`,
		},
		FormatText:  {"plain", "", "unicode é 漢字 🚀", `{"looks":"like json"}`, "tab\tnewline\nbackslash\\ quote'\"", "\u0001 control"},
		FormatBytea: {"", "\x00\x01\x02\xff\xfe", "binary \x00 zero", `{"n":1}`, strings.Repeat("\xab", 70_000)},
	}
	columns := `,"columns":[{"name":"c_int","type":"integer","path":"n"},{"name":"c_big","type":"bigint","path":"n"},
{"name":"c_num","type":"numeric","path":"big"},{"name":"c_f","type":"double precision","path":"f"},{"name":"c_b","type":"boolean","path":"b"},
{"name":"c_at","type":"timestamptz","path":"at"},{"name":"c_obj","type":"jsonb","path":"obj"},{"name":"c_s","type":"text","path":"s"},
{"name":"c_deep","type":"text","path":"obj.deep.deeper"}]`
	for _, format := range []string{FormatJSON, FormatText, FormatBytea} {
		t.Run(format, func(t *testing.T) {
			mine, theirs := fresh(t, db, "mine"), fresh(t, db, "pgx")
			cfg := func(tbl string) string {
				return fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"auto_create_table":true,"payload_format":%q,
"include_metadata":true,"include_checksum":true,"include_origin_timestamp":true,"exactly_once":false%s}`, url, tbl, format, columns)
			}
			sm, sp := open(t, cfg(mine), "stop", nil), open(t, cfg(theirs), "stop", nil)
			ids := []msgID{{0, 0}, {0, 9999}, {0, 10000}, {0, ^uint64(0)}, {1, 0}, {^uint64(0), ^uint64(0)}, {12345, 678}}
			var ms []sdk.ConsumedMessage
			for i, p := range payloads[format] {
				id := ids[i%len(ids)]
				id.lo += uint64(i) // unique
				var mid sdk.MessageID
				binary.LittleEndian.PutUint64(mid[:8], id.lo)
				binary.LittleEndian.PutUint64(mid[8:], id.hi)
				m := sdk.ConsumedMessage{ID: mid, Offset: uint64(i), Checksum: ^uint64(0) - uint64(i), Payload: []byte(p)}
				if i%2 == 0 { // the other half NULL timestamps (0 is unset)
					m.Timestamp, m.OriginTimestamp = 1_700_000_000_123_456+uint64(i), 946_684_800_000_000-1
				}
				if p == "" && format == FormatBytea {
					m.Payload = nil
				}
				ms = append(ms, m)
			}
			rows := make([][]any, len(ms))
			old := make([][]any, len(ms))
			idx := make([]int, len(ms))
			for i := range ms {
				rows[i] = sm.row(topic, 7, &ms[i])
				if err := rows[i][len(rows[i])-1]; err != nil {
					t.Fatalf("row %d rejected: %v", i, err)
				}
				old[i] = sp.row(topic, 7, &ms[i])
				n, _ := old[i][0].(msgID).NumericValue()
				old[i][0] = n // as the former path built it
				idx[i] = i
			}
			ctx := context.Background()
			err := pgx.BeginFunc(ctx, sm.pool, func(tx pgx.Tx) error {
				sent, err := sm.copyBinary(ctx, tx, rows, idx)
				if err == nil && !sent {
					err = fmt.Errorf("the encoder fell back to pgx")
				}
				return err
			})
			if err != nil {
				t.Fatalf("binary copy: %v", err)
			}
			_, err = sp.pool.CopyFrom(ctx, pgx.Identifier{theirs}, sp.cols, pgx.CopyFromSlice(len(old), func(i int) ([]any, error) {
				return old[i][:len(old[i])-1], nil
			}))
			if err != nil {
				t.Fatalf("pgx copy: %v", err)
			}
			q := func(tbl string) []string {
				rs, err := db.Query(ctx, "SELECT "+sm.quotedCols()+" FROM "+tbl+" ORDER BY id")
				if err != nil {
					t.Fatal(err)
				}
				defer rs.Close()
				var out []string
				for rs.Next() {
					raw := rs.RawValues()
					var b strings.Builder
					for _, v := range raw {
						fmt.Fprintf(&b, "%q|", v) // binary results: the stored values byte for byte
					}
					out = append(out, b.String())
				}
				if rs.Err() != nil {
					t.Fatal(rs.Err())
				}
				return out
			}
			got, want := q(mine), q(theirs)
			if len(want) != len(ms) {
				t.Fatalf("pgx wrote %d rows, want %d", len(want), len(ms))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("rows differ:\nencoder: %s\npgx:     %s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
