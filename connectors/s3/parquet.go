package s3

import (
	"bytes"
	"fmt"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/ferryio/ferry/sdk"
)

// Parquet columns: the message's metadata and its payload, a UTF-8 string (the JSON, or
// the text) for every stream schema but raw, whose payload is bytes. Timestamps are
// microseconds since the epoch, UTC.
type parquetText struct {
	Stream          string            `parquet:"stream,dict"`
	Topic           string            `parquet:"topic,dict"`
	Partition       uint32            `parquet:"partition"`
	Offset          uint64            `parquet:"offset"`
	ID              string            `parquet:"id"`
	Timestamp       int64             `parquet:"timestamp,timestamp(microsecond)"`
	OriginTimestamp int64             `parquet:"origin_timestamp,timestamp(microsecond)"`
	Headers         map[string]string `parquet:"headers"`
	Payload         string            `parquet:"payload"`
}

type parquetBytes struct {
	Stream          string            `parquet:"stream,dict"`
	Topic           string            `parquet:"topic,dict"`
	Partition       uint32            `parquet:"partition"`
	Offset          uint64            `parquet:"offset"`
	ID              string            `parquet:"id"`
	Timestamp       int64             `parquet:"timestamp,timestamp(microsecond)"`
	OriginTimestamp int64             `parquet:"origin_timestamp,timestamp(microsecond)"`
	Headers         map[string]string `parquet:"headers"`
	Payload         []byte            `parquet:"payload"`
}

func codec(name string) compress.Codec {
	switch name {
	case "snappy":
		return &snappy.Codec{}
	case "gzip":
		return &gzip.Codec{}
	case "none":
		return &uncompressed.Codec{}
	}
	return &zstd.Codec{}
}

// encodeParquet writes the buffer's rows as one Parquet file.
func encodeParquet(s *settings, b *buffer) ([]byte, error) {
	var out bytes.Buffer
	opts := []parquet.WriterOption{
		parquet.Compression(codec(s.Compression)),
		parquet.MaxRowsPerRowGroup(int64(s.RowGroupSize)),
		parquet.CreatedBy("ferry", "", ""),
	}
	var err error
	raw := b.schema == sdk.SchemaRaw
	switch {
	case len(s.Columns) > 0:
		opts = append(opts, columnsSchema(s.Columns, raw))
		err = writeRows(&out, opts, b.rows, func(r *row) map[string]any { return columnsRow(s.Columns, r, raw) })
	case raw:
		err = writeRows(&out, opts, b.rows, func(r *row) parquetBytes {
			return parquetBytes{r.stream, r.topic, r.partition, r.offset, r.id, r.timestamp, r.originTimestamp, r.headers, r.payload}
		})
	default:
		err = writeRows(&out, opts, b.rows, func(r *row) parquetText {
			return parquetText{r.stream, r.topic, r.partition, r.offset, r.id, r.timestamp, r.originTimestamp, r.headers, string(r.payload)}
		})
	}
	if err != nil {
		return nil, fmt.Errorf("encode parquet (offsets %d-%d): %w", b.first, b.last, err)
	}
	return out.Bytes(), nil
}

// writeRows converts rows in chunks (so a large object never holds two copies) and writes
// them.
func writeRows[T any](out *bytes.Buffer, opts []parquet.WriterOption, rows []row, conv func(*row) T) error {
	w := parquet.NewGenericWriter[T](out, opts...)
	chunk := make([]T, 0, 1024)
	for i := range rows {
		chunk = append(chunk, conv(&rows[i]))
		if len(chunk) == cap(chunk) || i == len(rows)-1 {
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			chunk = chunk[:0]
		}
	}
	return w.Close()
}
