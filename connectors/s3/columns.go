package s3

import (
	"fmt"
	"slices"

	"github.com/parquet-go/parquet-go"

	"github.com/ferryio/ferry/connectors/internal/parquetrows"
	"github.com/ferryio/ferry/sdk"
)

// baseColumns are the columns every Parquet object has.
var baseColumns = []string{"stream", "topic", "partition", "offset", "id", "timestamp", "origin_timestamp", "headers", "payload"}

// checkColumns checks what Config cannot per entry: the format, and names taken.
func checkColumns(cols []parquetrows.Column, f format) error {
	if len(cols) > 0 && f != formatParquet {
		return sdk.FieldErr("columns", "typed columns need output_format = \"parquet\"")
	}
	for i, c := range cols {
		if slices.Contains(baseColumns, c.Name) || slices.ContainsFunc(cols[:i], func(o parquetrows.Column) bool { return o.Name == c.Name }) {
			return sdk.FieldErr(fmt.Sprintf("columns[%d].name", i), "%q is taken (by a metadata column or an earlier entry)", c.Name)
		}
	}
	return nil
}

// columnsSchema is the schema of an object with typed columns: the base columns (payload
// as text or bytes) and each typed column, optional (null only for a nil pointer: see
// parquetrows.Extract).
func columnsSchema(cols []parquetrows.Column, raw bool) *parquet.Schema {
	payload := parquet.String()
	if raw {
		payload = parquet.Leaf(parquet.ByteArrayType)
	}
	g := parquet.Group{
		"stream": parquet.Encoded(parquet.String(), &parquet.RLEDictionary), "topic": parquet.Encoded(parquet.String(), &parquet.RLEDictionary),
		"partition": parquet.Encoded(parquet.Uint(32), &parquet.RLEDictionary), "offset": parquet.Encoded(parquet.Uint(64), &parquet.DeltaBinaryPacked),
		"id":        parquet.String(),
		"timestamp": parquet.Encoded(parquet.Timestamp(parquet.Microsecond), &parquet.DeltaBinaryPacked), "origin_timestamp": parquet.Encoded(parquet.Timestamp(parquet.Microsecond), &parquet.DeltaBinaryPacked),
		"headers": parquet.Map(parquet.String(), parquet.String()), "payload": payload,
	}
	for _, c := range cols {
		g[c.Name] = c.Node()
	}
	return parquet.NewSchema("ferry", g)
}

// columnsRow is one row of an object with typed columns.
func columnsRow(cols []parquetrows.Column, r *row, raw bool) map[string]any {
	headers := r.headers
	if headers == nil {
		headers = map[string]string{}
	}
	m := map[string]any{
		"stream": r.stream, "topic": r.topic, "partition": r.partition, "offset": r.offset, "id": r.id,
		"timestamp": r.timestamp, "origin_timestamp": r.originTimestamp, "headers": headers,
	}
	if raw {
		m["payload"] = r.payload
	} else {
		m["payload"] = string(r.payload)
	}
	for i, c := range cols {
		m[c.Name] = r.extra[i]
	}
	return m
}
