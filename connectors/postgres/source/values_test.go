package source

import (
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestJSONValue: each type's text form as pgoutput sends it, and the JSON the record holds.
func TestJSONValue(t *testing.T) {
	m := pgtype.NewMap()
	for _, tc := range []struct {
		oid        uint32
		text, want string
	}{
		{pgtype.BoolOID, "t", "true"},
		{pgtype.BoolOID, "f", "false"},
		{pgtype.Int8OID, "-9223372036854775808", "-9223372036854775808"},
		{pgtype.Float8OID, "1.5e+300", "1.5e+300"},
		{pgtype.Float8OID, "NaN", `"NaN"`},
		{pgtype.Float4OID, "-Infinity", `"-Infinity"`},
		{pgtype.NumericOID, "123456789012345678901234567890.000000001", "123456789012345678901234567890.000000001"},
		{pgtype.NumericOID, "NaN", `"NaN"`},
		{pgtype.NumericOID, "Infinity", `"Infinity"`},
		{pgtype.JSONBOID, `{"a": [1, null]}`, `{"a":[1,null]}`},
		{pgtype.ByteaOID, `\x00ff`, `"AP8="`},
		{pgtype.TimestamptzOID, "2024-02-29 23:59:59.123456+05:30", `"2024-02-29T18:29:59.123456Z"`},
		{pgtype.TimestamptzOID, "infinity", `"infinity"`},
		{pgtype.TimestampOID, "2024-01-15 10:30:00", `"2024-01-15 10:30:00"`},
		{pgtype.TextOID, `say "hi"`, `"say \"hi\""`},
		{pgtype.Int4ArrayOID, "{{1,2},{NULL,4}}", "[[1,2],[null,4]]"},
		{pgtype.TextArrayOID, `{"a,b","c\"d",NULL,"NULL"}`, `["a,b","c\"d",null,"NULL"]`},
		{pgtype.Int4ArrayOID, "{}", "[]"},
		{pgtype.NumericArrayOID, "[0:1]={1.5,NaN}", `[1.5,"NaN"]`},
		{pgtype.ByteaArrayOID, `{"\\x01"}`, `["AQ=="]`},
	} {
		got, err := jsonValue(m, tc.oid, []byte(tc.text))
		if err != nil || string(got) != tc.want {
			t.Errorf("oid %d %q: %s, %v; want %s", tc.oid, tc.text, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		oid  uint32
		text string
	}{
		{pgtype.Int4OID, "12a"},
		{pgtype.JSONOID, "{"},
		{pgtype.ByteaOID, `\xzz`},
		{pgtype.Int4ArrayOID, "{1,2"},
	} {
		if got, err := jsonValue(m, tc.oid, []byte(tc.text)); err == nil {
			t.Errorf("oid %d %q: %s, want an error", tc.oid, tc.text, got)
		}
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{"userId": "user_id", "HTTPCode": "httpcode", "already_snake": "already_snake", "A": "a", "orderID2x": "order_id2x"} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAppendJSONValueAsJSONValue: the allocation-free paths of appendJSONValue write what
// jsonValue writes, for integers and text at and past the edges of those paths, after
// what dst already holds.
func TestAppendJSONValueAsJSONValue(t *testing.T) {
	m := pgtype.NewMap()
	texts := []string{"", "0", "-0", "-", "+5", "123456789012345678", "-123456789012345678", "1234567890123456789",
		"12345678901234567890", "9223372036854775807", "row 1", "a<b", "a>b", "a&b", `say "hi"`, `back\slash`, "tab\there",
		"é", "\x7f", "~ok~", "x\xffy"}
	for _, oid := range []uint32{pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID} {
		for _, s := range texts {
			want, wantErr := jsonValue(m, oid, []byte(s))
			got, err := appendJSONValue([]byte("{"), m, oid, []byte(s))
			if (err != nil) != (wantErr != nil) || (err == nil && string(got) != "{"+string(want)) {
				t.Fatalf("oid %d %q: appendJSONValue = %q, %v; jsonValue = %q, %v", oid, s, got, err, want, wantErr)
			}
		}
	}
}
