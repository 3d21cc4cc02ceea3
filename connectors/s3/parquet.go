package s3

import (
	"bytes"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"

	"github.com/ferryio/ferry/connectors/internal/parquetrows"
	"github.com/ferryio/ferry/sdk"
)

// Parquet columns: the message's metadata and its payload, a UTF-8 string (the JSON, or
// the text) for every stream schema but raw, whose payload is bytes. Timestamps are
// microseconds since the epoch, UTC. The columns constant in an object (stream, topic,
// partition) are dictionary-encoded, the rising ones (offsets, timestamps) delta-encoded:
// fewer bytes for the codec to compress (a tenth of an uncompressed file's); the payload
// and id are plain.
type parquetText struct {
	Stream          string            `parquet:"stream,dict"`
	Topic           string            `parquet:"topic,dict"`
	Partition       uint32            `parquet:"partition,dict"`
	Offset          uint64            `parquet:"offset,delta"`
	ID              string            `parquet:"id"`
	Timestamp       int64             `parquet:"timestamp,timestamp(microsecond),delta"`
	OriginTimestamp int64             `parquet:"origin_timestamp,timestamp(microsecond),delta"`
	Headers         map[string]string `parquet:"headers"`
	Payload         string            `parquet:"payload"`
}

type parquetBytes struct {
	Stream          string            `parquet:"stream,dict"`
	Topic           string            `parquet:"topic,dict"`
	Partition       uint32            `parquet:"partition,dict"`
	Offset          uint64            `parquet:"offset,delta"`
	ID              string            `parquet:"id"`
	Timestamp       int64             `parquet:"timestamp,timestamp(microsecond),delta"`
	OriginTimestamp int64             `parquet:"origin_timestamp,timestamp(microsecond),delta"`
	Headers         map[string]string `parquet:"headers"`
	Payload         []byte            `parquet:"payload"`
}

// rowEncoder writes rows into one Parquet file as they come: a row group is written out
// whenever it holds row_group_size rows, so memory holds one row group, not the file.
type rowEncoder interface {
	write(rows []row) error
	close() error        // writes the last row group and the footer
	reset(out io.Writer) // starts another file, keeping the buffers grown for the last
}

// newRowEncoder returns the encoder of a file of the given stream schema written to out.
// groupBytes, when not 0, also ends a row group once its rows hold that many bytes
// (payloads and headers as buffered), so a streamed file never holds more in the encoder.
func newRowEncoder(s *config, schema sdk.Schema, out io.Writer, groupBytes int) rowEncoder {
	opts := []parquet.WriterOption{
		parquet.Compression(parquetrows.Codec(s.Compression, s.Level)),
		parquet.MaxRowsPerRowGroup(int64(s.RowGroupSize)),
		parquet.CreatedBy("ferry", "", ""),
	}
	raw := schema == sdk.SchemaRaw
	switch {
	case len(s.Columns) > 0:
		opts = append(opts, columnsSchema(s.Columns, raw))
		return newTypedEncoder(out, opts, groupBytes, func(r *row) map[string]any { return columnsRow(s.Columns, r, raw) })
	case raw:
		return newTypedEncoder(out, opts, groupBytes, func(r *row) parquetBytes {
			return parquetBytes{r.stream, r.topic, r.partition, r.offset, r.id, r.timestamp, r.originTimestamp, r.headers, r.payload}
		})
	}
	return newTypedEncoder(out, opts, groupBytes, func(r *row) parquetText {
		return parquetText{r.stream, r.topic, r.partition, r.offset, r.id, r.timestamp, r.originTimestamp, r.headers, r.text()}
	})
}

// typedEncoder converts rows to T as the shared writer asks for them.
type typedEncoder[T any] struct {
	w    *parquetrows.Writer[T]
	conv func(*row) T
}

func newTypedEncoder[T any](out io.Writer, opts []parquet.WriterOption, groupBytes int, conv func(*row) T) *typedEncoder[T] {
	return &typedEncoder[T]{w: parquetrows.NewWriter[T](out, groupBytes, opts...), conv: conv}
}

func (e *typedEncoder[T]) write(rows []row) error {
	return e.w.Write(len(rows), func(i int) (T, int) { return e.conv(&rows[i]), rows[i].bytes() })
}

func (e *typedEncoder[T]) close() error { return e.w.Close() }

func (e *typedEncoder[T]) reset(out io.Writer) { e.w.Reset(out) }

// fileEncoder encodes a partition's whole objects into Parquet. It is kept from one object
// to the next (building a writer per file, and growing its column buffers again, was a
// tenth of the sink's time), and is used by one goroutine at a time: the partition's, or
// the upload's while it encodes in the background.
type fileEncoder struct {
	enc      rowEncoder
	raw      bool  // enc was built for a raw stream
	lastFile int   // the size of the last file, to size the next one's output
	spare    []row // the rows slice of the last object encoded, for the next one
}

// encode writes rows, offsets first to last of a stream of the given schema, as one
// Parquet file.
func (e *fileEncoder) encode(s *config, schema sdk.Schema, rows []row, first, last uint64) ([]byte, error) {
	out := bytes.NewBuffer(make([]byte, 0, e.lastFile+e.lastFile/4))
	raw := schema == sdk.SchemaRaw
	if e.enc == nil || e.raw != raw {
		e.enc, e.raw = newRowEncoder(s, schema, out, 0), raw
	} else {
		e.enc.reset(out)
	}
	err := e.enc.write(rows)
	if err == nil {
		err = e.enc.close()
	}
	if err != nil {
		e.enc = nil // in an unknown state
		return nil, fmt.Errorf("encode parquet (offsets %d-%d): %w", first, last, err)
	}
	e.lastFile = out.Len()
	return out.Bytes(), nil
}
