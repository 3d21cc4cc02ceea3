package parquetrows

import (
	"io"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// Compression is a codec's name, ZstdLevel one of zstd's levels, as a config file
// names them.
type (
	Compression string
	ZstdLevel   string
)

const (
	Zstd         Compression = "zstd"
	Snappy       Compression = "snappy"
	Gzip         Compression = "gzip"
	Uncompressed Compression = "none"

	// zstd's levels are klauspost/compress's, about zstd's 1, 3 and 7.
	ZstdFastest ZstdLevel = "fastest"
	ZstdDefault ZstdLevel = "default"
	ZstdBetter  ZstdLevel = "better"
)

// codecs are shared by every file of the process: a codec keeps a pool of encoders, and
// a zstd encoder allocates megabytes of history when it is built, so one per file costs
// more than the compression. zstd has one codec per level.
var codecs = map[string]compress.Codec{
	string(Snappy):                           &snappy.Codec{},
	string(Gzip):                             &gzip.Codec{Level: gzip.DefaultCompression}, // its zero Level stores uncompressed
	string(Uncompressed):                     &uncompressed.Codec{},
	string(Zstd) + "/" + string(ZstdFastest): &zstd.Codec{Level: zstd.SpeedFastest},
	string(Zstd) + "/" + string(ZstdDefault): &zstd.Codec{Level: zstd.SpeedDefault},
	string(Zstd) + "/" + string(ZstdBetter):  &zstd.Codec{Level: zstd.SpeedBetterCompression},
}

// Codec returns the shared codec of c (level is zstd's, ignored for the others); nil
// for a name not among the constants.
func Codec(c Compression, level ZstdLevel) compress.Codec {
	if c == Zstd {
		return codecs[string(Zstd)+"/"+string(level)]
	}
	return codecs[string(c)]
}

// Writer writes rows of T into one Parquet file as they come: a row group is written out
// whenever it holds as many rows as the parquet.MaxRowsPerRowGroup option says, or, when
// groupBytes is not 0, once its rows hold that many bytes (as the caller counts them),
// so memory holds one row group, not the file. A Writer is kept from one file to the next
// (Reset): building one per file, and growing its column buffers again, costs more than
// encoding a small file.
type Writer[T any] struct {
	w          *parquet.GenericWriter[T]
	chunk      []T
	groupBytes int
	held       int // bytes of the rows in the current row group
}

// NewWriter returns a Writer of rows of T to out. For a T that is map[string]any, opts
// must hold the schema.
func NewWriter[T any](out io.Writer, groupBytes int, opts ...parquet.WriterOption) *Writer[T] {
	return &Writer[T]{w: parquet.NewGenericWriter[T](out, opts...), chunk: make([]T, 0, 1024), groupBytes: groupBytes}
}

// Write writes n rows: row(i) returns the i-th and its size in bytes. Rows are converted
// in chunks, so a large batch is never held twice; nothing of them is kept once Write
// returns (the caller may reuse what they point to).
func (w *Writer[T]) Write(n int, row func(i int) (T, int)) error {
	for i := range n {
		v, size := row(i)
		w.chunk = append(w.chunk, v)
		w.held += size
		full := w.groupBytes > 0 && w.held >= w.groupBytes
		if len(w.chunk) == cap(w.chunk) || i == n-1 || full {
			if _, err := w.w.Write(w.chunk); err != nil {
				return err
			}
			clear(w.chunk)
			w.chunk = w.chunk[:0]
		}
		if full {
			if err := w.w.Flush(); err != nil {
				return err
			}
			w.held = 0
		}
	}
	return nil
}

// Close writes the last row group and the footer.
func (w *Writer[T]) Close() error { return w.w.Close() }

// Reset starts another file on out, keeping the buffers grown for the last.
func (w *Writer[T]) Reset(out io.Writer) {
	w.w.Reset(out)
	w.held = 0
}
