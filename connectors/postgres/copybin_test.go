package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

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

// TestCopyEncodersWriteWhatPgxWrote: for each payload format, the same messages written by
// the sink's own COPY encoders (binary and text) and by pgx's CopyFrom (the sink's former
// path, the id as a big.Int) give tables whose rows are identical byte for byte, column by
// column, with every optional column on and [[plugin_config.columns]] of several types;
// the last case is random payloads full of what COPY's text format must escape.
func TestCopyEncodersWriteWhatPgxWrote(t *testing.T) {
	db, url := testDB(t)
	payloads := map[payloadFormat][]string{
		formatJSON: {
			`{"n":1,"s":"plain","f":1.5,"b":true,"at":"2024-02-29T12:34:56.789012Z","obj":{"k":[1,2,{"z":null}]},"big":123456789012345678901234567890}`,
			`[1, "two", {"three": 3}, [], {}]`,
			`"a string with unicode é 漢字 🚀 and escapes \" \\ \n \t \u00e9 \ud83d\ude80"`,
			`12345.678e-3`, `-0`, `true`, `null`, `   {"spaced" :  "out" , "dup":1, "dup":2 }  `,
			`{"n":-2147483648,"s":"","f":-0.0,"b":false,"at":"1999-12-31T23:59:59.999999+02:00","obj":"not an object"}`,
			`{"n":null,"s":null,"obj":{"deep":{"deeper":"x"}}}`,
		},
		formatText:  {"plain", "", "unicode é 漢字 🚀", `{"looks":"like json"}`, "tab\tnewline\nbackslash\\ quote'\"", "\u0001 control"},
		formatBytea: {"", "\x00\x01\x02\xff\xfe", "binary \x00 zero", `{"n":1}`, strings.Repeat("\xab", 70_000), "\\.\n\\N\t\r\\x"},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		payloads[formatText] = append(payloads[formatText], trickyText(r))
		payloads[formatJSON] = append(payloads[formatJSON], trickyJSON(r))
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		payloads[formatBytea] = append(payloads[formatBytea], string(b))
	}
	columns := `,"columns":[{"name":"c_int","type":"integer","path":"n"},{"name":"c_big","type":"bigint","path":"n"},
{"name":"c_num","type":"numeric","path":"big"},{"name":"c_f","type":"double precision","path":"f"},{"name":"c_b","type":"boolean","path":"b"},
{"name":"c_at","type":"timestamptz","path":"at"},{"name":"c_obj","type":"jsonb","path":"obj"},{"name":"c_s","type":"text","path":"s"},
{"name":"c_deep","type":"text","path":"obj.deep.deeper"}]`
	for _, format := range []payloadFormat{formatJSON, formatText, formatBytea} {
		t.Run(string(format), func(t *testing.T) {
			mine, text, theirs := fresh(t, db, "mine"), fresh(t, db, "text"), fresh(t, db, "pgx")
			cfg := func(tbl string, copyFormat copyFormat) string {
				return fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"auto_create_table":true,"payload_format":%q,"copy_format":%q,
"include_metadata":true,"include_checksum":true,"include_origin_timestamp":true,"exactly_once":false%s}`, url, tbl, format, copyFormat, columns)
			}
			sm, st, sp := open(t, cfg(mine, copyBinary), "stop", nil), open(t, cfg(text, copyText), "stop", nil), open(t, cfg(theirs, copyBinary), "stop", nil)
			ids := []msgID{{0, 0}, {0, 9999}, {0, 10000}, {0, ^uint64(0)}, {1, 0}, {^uint64(0), ^uint64(0)}, {12345, 678}}
			for range 20 {
				ids = append(ids, msgID{r.Uint64() >> r.IntN(64), r.Uint64() << 8})
			}
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
				if p == "" && format == formatBytea {
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
				n, _ := old[i][0].(*msgID).NumericValue()
				old[i][0] = n // as the former path built it
				idx[i] = i
			}
			ctx := context.Background()
			err := pgx.BeginFunc(ctx, sm.pool, func(tx pgx.Tx) error {
				sent, err := sm.copyOwn(ctx, tx.Conn(), rows, idx)
				if err == nil && !sent {
					err = fmt.Errorf("the encoder fell back to pgx")
				}
				return err
			})
			if err != nil {
				t.Fatalf("binary copy: %v", err)
			}
			err = pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
				sent, err := st.copyOwn(ctx, tx.Conn(), rows, idx)
				if err == nil && !sent {
					err = fmt.Errorf("the text encoder fell back to pgx")
				}
				return err
			})
			if err != nil {
				t.Fatalf("text copy: %v", err)
			}
			_, err = sp.pool.CopyFrom(ctx, pgx.Identifier{theirs}, sp.cols, pgx.CopyFromSlice(len(old), func(i int) ([]any, error) {
				return pgxValues(old[i][:len(old[i])-1]), nil
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
			want := q(theirs)
			if len(want) != len(ms) {
				t.Fatalf("pgx wrote %d rows, want %d", len(want), len(ms))
			}
			for name, tbl := range map[string]string{"binary": mine, "text": text} {
				got := q(tbl)
				if len(got) != len(want) {
					t.Fatalf("%s encoder: %d rows, pgx %d", name, len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s encoder: row %d differs:\nencoder: %s\npgx:     %s", name, i, got[i], want[i])
					}
				}
			}
		})
	}
}

// trickyText is a random UTF-8 string without NUL, made mostly of what COPY's text format
// must escape or could misread: backslashes, tabs, newlines, carriage returns, \. and \N.
func trickyText(r *rand.Rand) string {
	parts := []string{"\\", "\t", "\n", "\r", "\\.", "\\N", "\\x41", "é", "漢", "🚀", "\u0001", "\u007f", "a", " ", `"`, "'", ",", "\\\\"}
	var b strings.Builder
	for range r.IntN(30) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// trickyJSON is a JSON object whose strings are trickyText (escaped as JSON requires), so
// the JSON text holds backslash escapes, raw tabs cannot appear, and unicode is raw.
func trickyJSON(r *rand.Rand) string {
	k, _ := json.Marshal(trickyText(r))
	v, _ := json.Marshal(trickyText(r))
	return fmt.Sprintf(`{%s:%s,"n":%d,"s":%s}`, k, v, r.Int64N(1<<31), v)
}

// TestDecimal128: appendDecimal128 writes hi·2^64 + lo as math/big does, at the edges of
// its 19-digit chunks and for random values.
func TestDecimal128(t *testing.T) {
	ids := []msgID{{0, 0}, {0, 1}, {0, ^uint64(0)}, {1, 0}, {0, 1e19 - 1}, {0, 1e19}, {^uint64(0), ^uint64(0)}, {5421010862, 7766279631452241920}}
	r := rand.New(rand.NewPCG(5, 6))
	for range 10000 {
		ids = append(ids, msgID{r.Uint64() >> r.IntN(64), r.Uint64() >> r.IntN(64)})
	}
	for _, id := range ids {
		want, _ := id.NumericValue()
		if got := string(appendDecimal128(nil, id.hi, id.lo)); got != want.Int.String() {
			t.Fatalf("%v: %s, want %s", id, got, want.Int)
		}
	}
}

// TestTimestamptzText: appendTimestamptz writes what time.Format does, in UTC whatever the
// zone, and refuses (to pgx's conversions) the years it does not write.
func TestTimestamptzText(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	zone := time.FixedZone("x", -(3*3600 + 1800))
	var c stampCache
	var prev time.Time
	for i := range 20000 {
		ts := time.UnixMicro(r.Int64N(253402300799999999+30610224000000000) - 30610224000000000).In(zone)
		if i%2 == 1 { // the second before, other microseconds: from the cache
			ts = prev.Truncate(time.Second).Add(time.Duration(r.Int64N(1e6)) * time.Microsecond)
		}
		prev = ts
		got, err := appendTimestamptz(nil, ts, &c)
		if y := ts.UTC().Year(); y < 1000 || y > 9999 {
			if !errors.Is(err, errCopyFallback) {
				t.Fatalf("%v: %q, %v; want errCopyFallback", ts, got, err)
			}
			continue
		}
		if want := ts.UTC().Format("2006-01-02 15:04:05.000000Z"); err != nil || string(got) != want {
			t.Fatalf("%v: %q, %v; want %q", ts, got, err, want)
		}
	}
}

// TestCopyFormats: both copy_format values write the same rows through Consume, a bad
// value is refused naming the field, and a text batch the encoder cannot write itself (a
// mapped timestamp in year 500) reaches the table through pgx's conversions.
func TestCopyFormats(t *testing.T) {
	db, url := testDB(t)
	if _, err := Config.Parse([]byte(`{"connection_string":"x","copy_format":"csv"}`)); err == nil || !strings.Contains(err.Error(), `plugin_config.copy_format: unknown value "csv" (want text or binary)`) {
		t.Fatalf("copy_format csv: %v; want an error naming it", err)
	}
	for _, format := range []copyFormat{copyText, copyBinary} {
		t.Run(string(format), func(t *testing.T) {
			tbl := fresh(t, db, "rows")
			s := open(t, fmt.Sprintf(`{"connection_string":%q,"target_table":%q,"offsets_table":%q,"auto_create_table":true,"payload_format":"json",
"copy_format":%q,"columns":[{"name":"at","type":"timestamptz","path":"at"}]}`, url, tbl, fresh(t, db, "offs"), format), "stop", nil)
			ms := msgs(0, 3, func(o uint64) string {
				return fmt.Sprintf(`{"at":"0%d00-01-02T03:04:05.678901Z","tab":"a\tb\\c"}`, 5+o)
			})
			if err := consume(t, s, 0, ms); err != nil {
				t.Fatal(err)
			}
			if n := count(t, db, "SELECT count(*) FROM "+tbl+` WHERE at = make_timestamptz((5 + iggy_offset::int) * 100, 1, 2, 3, 4, 5.678901, 'UTC')
AND payload->>'tab' = E'a\tb\\c' AND iggy_timestamp = to_timestamp((1700000000000000 + iggy_offset) / 1e6)`); n != 3 {
				t.Fatalf("rows as sent = %d, want 3", n)
			}
		})
	}
}

// TestCopyEscaped: appendCopyEscaped escapes exactly backslash, tab, newline and carriage
// return, wherever and however often they occur, for strings and byte slices alike.
func TestCopyEscaped(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	alphabet := []byte("\\\t\n\rab\x00é")
	// Dense runs (every other draw) and sparse ones (a special byte among 62 plain ones, so the
	// eight-byte steps meet it at every place).
	sparse := []byte("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\\\t\n\r\x00\x1fé")
	for k := range 40000 {
		a := alphabet
		if k%2 == 1 {
			a = sparse
		}
		in := make([]byte, r.IntN(80))
		for i := range in {
			in[i] = a[r.IntN(len(a))]
		}
		var want []byte
		for _, c := range in {
			switch c {
			case '\\':
				want = append(want, `\\`...)
			case '\t':
				want = append(want, `\t`...)
			case '\n':
				want = append(want, `\n`...)
			case '\r':
				want = append(want, `\r`...)
			default:
				want = append(want, c)
			}
		}
		if got := appendCopyEscaped([]byte("p"), in); string(got) != "p"+string(want) {
			t.Fatalf("%q: %q, want %q", in, got, want)
		}
		if got := appendCopyEscaped(nil, string(in)); string(got) != string(want) {
			t.Fatalf("string %q: %q, want %q", in, got, want)
		}
	}
}
